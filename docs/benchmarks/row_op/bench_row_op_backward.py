"""The rowwise skeleton's backward (dx = dy - mean(dy)) timed as `opgen bench` times softmax's.

`opgen bench row_op` times only the forward: the rowwise recipe names no PyTorch backward to set
beside the op's. This script times the backward op with opgen.bench's method and contenders (the
op, eager PyTorch, a device copy), on the generated benchmark's shapes. The bytes model is the
fewest bytes the backward must move: the placeholder's gradient reads dy and writes dx, and never
x, so a pass moves two tensors (softmax's backward reads y and dy: three).

Run from the folder that holds generated_ops/, with row_op built (scripts/gpu_session.sh):

    python docs/benchmarks/row_op/bench_row_op_backward.py --markdown row_op_backward.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from generated_ops.row_op import bench_row_op

from opgen.bench import Report, Workload, environment, markdown_table, print_table, run_benchmark


def backward_workloads(dtype: torch.dtype) -> list[Workload]:
    element_bytes = torch.empty((), dtype=dtype).element_size()
    workloads = []
    for shape in bench_row_op.shapes(element_bytes, "cuda"):
        numel = int(torch.Size(shape).numel())

        def make(shape: tuple[int, ...] = shape) -> tuple[torch.Tensor, ...]:
            return tuple(torch.randn(shape, device="cuda").to(dtype) * 3 for _ in range(2))  # dy, x

        label = "x".join(map(str, shape))
        workloads.append(Workload(label=label, numel=numel, make_inputs=make, bytes_moved=2 * numel * element_bytes))
    return workloads


def reference_backward(grad_output: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return grad_output - grad_output.mean(dim=-1, keepdim=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", type=Path, help="write the table here")
    options = parser.parse_args()
    report = Report(op="row_op", environment=environment("cuda"))
    for dtype in (torch.float32, torch.bfloat16):
        measurements = run_benchmark(
            "row_op",
            [],  # no forward: `opgen bench row_op` times it
            forward=bench_row_op.forward,
            reference=bench_row_op.reference,
            backward=bench_row_op.backward,
            reference_backward=reference_backward,
            backward_workloads=backward_workloads(dtype),
            dtype=dtype,
            device="cuda",
            include_compile=False,
        )
        report.measurements.extend(measurements)
        print_table(measurements, f"row_op backward, {dtype}")
    if options.markdown:
        options.markdown.write_text(markdown_table(report))


if __name__ == "__main__":
    main()

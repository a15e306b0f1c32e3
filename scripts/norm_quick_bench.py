"""Quick timing of the norm ops on a GPU: opgen against eager PyTorch and a device copy, every row length.

A tuning aid for the GPU machine (scripts/gpu_session.sh's `quick` mode): no torch.compile
contender (`opgen bench` times it, compiling for minutes), and fewer samples, so one call sweeps
every op, row length and dtype in a minute or two. Prints one line per (op, dtype, pass, row
length): GB/s and % of copy of opgen, and of eager.

    python3 scripts/norm_quick_bench.py WORKSPACE OP [OP...]
    python3 scripts/norm_quick_bench.py --report LOG OP OUT_DIR [ENVIRONMENT_JSON]
        (OP's lines of a saved log as OUT_DIR/OP.json, .md and .png, through opgen.bench)
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import torch

from opgen.bench import Measurement, Report, _copy_contender, markdown_table, plot, time_side_by_side, write_json

BYTES = {"bfloat16": 2, "float32": 4}
TENSORS = {  # (forward, forward+backward) tensors of x's size, as the generated bench counts them
    "layernorm": (2, 5), "rmsnorm": (2, 5), "add_layernorm": (4, 8), "add_rmsnorm": (4, 8),
}  # fmt: skip


def report(log: Path, op: str, out_dir: Path, environment: dict[str, object]) -> None:
    """OP's lines of a log of this script as opgen.bench's JSON, markdown table and plot."""
    result = Report(op=op, environment=environment)
    for line in log.read_text().splitlines():
        fields = line.replace("|", " ").split()
        if not fields or fields[0] != op:
            continue
        _, dtype, direction, workload = fields[:4]
        rows, cols = map(int, workload.split("x"))
        tensors = TENSORS[op][0 if direction == "forward" else 1]
        bytes_moved = rows * cols * BYTES[dtype] * tensors
        gbps = {fields[i]: float(fields[i + 1]) for i in range(4, len(fields) - 1) if fields[i] in ("opgen", "eager", "copy")}
        for name, value in gbps.items():
            median_ms = bytes_moved / (value * 1e9) * 1e3
            measurement = Measurement(
                op=op, direction="forward+backward" if direction == "fwd+bwd" else direction, contender=name,
                workload=workload, dtype=dtype, device="cuda", numel=rows * cols, bytes_moved=bytes_moved,
                median_ms=median_ms, gbps=value, percent_of_copy=100 * value / gbps["copy"],
                speedup_vs_eager=value / gbps["eager"] if "eager" in gbps else None,
            )  # fmt: skip
            result.measurements.append(measurement)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(result, out_dir / f"{op}.json")
    (out_dir / f"{op}.md").write_text(markdown_table(result))
    plot(result, out_dir / f"{op}.png")


def main() -> None:
    if sys.argv[1] == "--report":
        import json

        environment = json.loads(Path(sys.argv[5]).read_text()) if len(sys.argv) > 5 else {}
        report(Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), environment)
        return
    workspace, ops = Path(sys.argv[1]).resolve(), sys.argv[2:]
    sys.path.insert(0, str(workspace.parent))
    package = workspace.name
    for op in ops:
        bench = importlib.import_module(f"{package}.{op}.bench_{op}")
        for dtype in (torch.bfloat16, torch.float32):
            for label, tensors, grad, fn, eager in (
                ("forward", bench.FORWARD_TENSORS, False, bench.forward, bench.reference),
                ("fwd+bwd", bench.TRAINING_STEP_TENSORS, True, bench.step_of(bench.forward), bench.step_of(bench.reference)),
            ):
                for workload in bench.workloads_of(tensors, grad)(dtype, "cuda", 0, 0):
                    inputs = workload.make_inputs()
                    medians = time_side_by_side(
                        {
                            "opgen": lambda fn=fn, inputs=inputs: fn(*inputs),
                            "eager": lambda eager=eager, inputs=inputs: eager(*inputs),
                            "copy": _copy_contender(inputs, workload.bytes_moved),
                        },
                        "cuda",
                        warmup=3,
                        repetitions=10,
                    )
                    gbps = {name: workload.bytes_moved / (ms * 1e-3) / 1e9 for name, ms in medians.items()}
                    print(
                        f"{op:14s} {str(dtype)[6:]:9s} {label:8s} {workload.label:>14s} "
                        f"opgen {gbps['opgen']:5.0f} GB/s {100 * gbps['opgen'] / gbps['copy']:5.1f}% | "
                        f"eager {gbps['eager']:5.0f} GB/s {100 * gbps['eager'] / gbps['copy']:5.1f}% | copy {gbps['copy']:5.0f} GB/s",
                        flush=True,
                    )
                    del inputs


if __name__ == "__main__":
    main()

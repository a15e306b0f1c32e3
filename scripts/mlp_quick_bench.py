"""A quick look at the fused MLP ops on a GPU, for iterating on their kernels between full runs.

`opgen bench` is the measurement that counts (every batch, torch.compile, the report files); this
times only a few batches against eager PyTorch, with opgen.bench's timing (CUDA events, L2
flushed, medians), and breaks one training step down kernel by kernel with torch.profiler.

    python3 scripts/mlp_quick_bench.py WORKSPACE/generated_ops OP... [--rows 1048576 4194304]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from opgen.bench import mlp_flops, mlp_workload, time_side_by_side, with_gradients


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workspace", type=Path, help="the generated_ops folder")
    parser.add_argument("ops", nargs="+")
    parser.add_argument("--rows", type=int, nargs="+", default=[32, 2**16, 2**20, 2**22])
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    parser.add_argument("--profile-rows", type=int, default=2**22, help="0: no training-step profile")
    parser.add_argument("--forward-only", action="store_true", help="time the forward alone")
    parser.add_argument(
        "--floor",
        type=int,
        nargs="*",
        metavar="ROWS",
        help="where a forward's time goes at these batches (default: --rows; see forward_floor)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(args.workspace.resolve().parent))
    torch.backends.cuda.matmul.allow_tf32 = True
    for name in args.ops:
        module = importlib.import_module(f"generated_ops.{name}")
        reference = getattr(importlib.import_module(f"generated_ops.{name}.reference"), f"reference_{name}")
        op = getattr(module, name)
        for dtype_name in args.dtypes:
            dtype = getattr(torch, dtype_name)
            for rows in args.rows:
                for backward in (False,) if args.forward_only else (False, True):
                    work = mlp_workload(rows, module.WIDTHS, dtype, "cuda", backward=backward, bias=module.BIAS)
                    inputs = work.make_inputs()
                    fused = with_gradients(op) if backward else op
                    eager = with_gradients(reference) if backward else reference
                    ms = time_side_by_side(
                        {"fused": functools.partial(fused, *inputs), "eager": functools.partial(eager, *inputs)},
                        "cuda",
                        repetitions=20,
                    )
                    flops = mlp_flops(rows, module.WIDTHS, backward=backward)
                    print(
                        f"{name} {dtype_name:8} {'fwd+bwd' if backward else 'forward':7} rows={rows:>8}: "
                        f"fused {ms['fused'] * 1e3:9.1f} us {flops / ms['fused'] / 1e9:6.1f} TFLOP/s, "
                        f"eager {ms['eager'] * 1e3:9.1f} us, ratio {ms['eager'] / ms['fused']:5.2f}x",
                        flush=True,
                    )
            if args.floor is not None:
                for rows in args.floor or args.rows:
                    forward_floor(name, dtype_name, rows, op, reference, module)
            if args.profile_rows == 0:
                continue
            work = mlp_workload(args.profile_rows, module.WIDTHS, dtype, "cuda", backward=True, bias=module.BIAS)
            inputs = work.make_inputs()
            step = with_gradients(op)
            for _ in range(3):
                step(*inputs)
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    step(*inputs)
                torch.cuda.synchronize()
            print(f"== {name} {dtype_name} training step at {args.profile_rows} rows, 5 steps:")
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70))


def _kernel_us(fn: Callable[[], object], calls: int = 20) -> float:
    """Device time of the kernels one call of ``fn`` launches, in us (torch.profiler, mean)."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return sum(e.self_device_time_total for e in prof.key_averages()) / calls


def _host_us(fn: Callable[[], object], calls: int = 200) -> float:
    """Wall time of one call of ``fn`` when the host is the bottleneck (tiny device work), in us."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - began) / calls * 1e6


def _back_to_back_us(fn: Callable[[], object], calls: int = 50) -> float:
    """Event time of ``calls`` calls queued back to back (no L2 flush between), per call, in us."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls * 1e3


def forward_floor(name: str, dtype_name: str, rows: int, op: Any, reference: Any, module: Any) -> None:
    """Print where a forward's time goes at a batch, for the op and for eager.

    The kernels alone (profiler), the call as opgen.bench times it (CUDA events, L2 flushed), calls
    back to back, and the host's cost of one call (at 32 rows, where the device work is negligible).
    """
    dtype = getattr(torch, dtype_name)
    inputs = mlp_workload(rows, module.WIDTHS, dtype, "cuda", backward=False, bias=module.BIAS).make_inputs()
    tiny = mlp_workload(32, module.WIDTHS, dtype, "cuda", backward=False, bias=module.BIAS).make_inputs()
    for label, fn in (("fused", op), ("eager", reference)):
        call = functools.partial(fn, *inputs)
        timed = time_side_by_side({label: call}, "cuda", repetitions=20)[label] * 1e3
        print(
            f"{name} {dtype_name:8} floor   rows={rows:>8}: {label} kernels {_kernel_us(call):7.1f} us, "
            f"event-timed call {timed:7.1f} us, back to back {_back_to_back_us(call):7.1f} us, "
            f"host per call (32 rows) {_host_us(functools.partial(fn, *tiny)):7.1f} us",
            flush=True,
        )


if __name__ == "__main__":
    main()

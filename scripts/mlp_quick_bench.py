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
from pathlib import Path

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


if __name__ == "__main__":
    main()

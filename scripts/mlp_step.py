"""A few training steps (forward keeping activations, then every gradient) of one fused MLP op.

With --forward-only: a few inference forwards instead (no gradient: the kernel that keeps nothing).

For a profiler that times or reads the counters of its kernels (ncu, compute-sanitizer), e.g.

    ncu --clock-control none -k regex:backward_kernel -s 2 -c 1 --section SpeedOfLight \
        python3 scripts/mlp_step.py WORKSPACE/generated_ops mlp_64x4 --rows 4194304
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import torch

from opgen.bench import mlp_workload, with_gradients


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workspace", type=Path, help="the generated_ops folder")
    parser.add_argument("op")
    parser.add_argument("--rows", type=int, default=2**22)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--forward-only", action="store_true", help="inference: the forward alone")
    args = parser.parse_args()
    sys.path.insert(0, str(args.workspace.resolve().parent))
    torch.backends.cuda.matmul.allow_tf32 = True
    module = importlib.import_module(f"generated_ops.{args.op}")
    training = not args.forward_only
    work = mlp_workload(
        args.rows, module.WIDTHS, getattr(torch, args.dtype), "cuda", backward=training, bias=module.BIAS
    )
    inputs = work.make_inputs()
    step = with_gradients(getattr(module, args.op)) if training else getattr(module, args.op)
    for _ in range(args.steps):
        step(*inputs)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()

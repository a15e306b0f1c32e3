"""One training step of a norm op per shape, for Nsight Compute to read its kernels' counters.

    ncu --clock-control none -k regex:'rows_kernel|slices_kernel|long_kernel|sum_partials' \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        python3 scripts/norm_profile.py WORKSPACE OP DTYPE ROWSxCOLS [ROWSxCOLS ...]

Each shape's step runs once (ncu replays each kernel itself); inputs as the generated bench makes
them (make_inputs), so the kernels are those `opgen bench` times.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import torch


def main() -> None:
    workspace, op, dtype_name = Path(sys.argv[1]).resolve(), sys.argv[2], sys.argv[3]
    sys.path.insert(0, str(workspace.parent))
    bench = importlib.import_module(f"{workspace.name}.{op}.bench_{op}")
    dtype = getattr(torch, dtype_name)
    step = bench.step_of(bench.forward)
    for shape in sys.argv[4:]:
        rows, cols = map(int, shape.split("x"))
        inputs = bench.make_inputs((rows, cols), dtype, "cuda", True)
        print(f"== {op} {dtype_name} {shape}", flush=True)
        step(*inputs)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()

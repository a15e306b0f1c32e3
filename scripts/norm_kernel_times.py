r"""A norm op's training step kernel by kernel on a GPU: each kernel's device time (torch.profiler).

    python3 scripts/norm_kernel_times.py WORKSPACE OP DTYPE ROWSxCOLS [ROWSxCOLS ...] [DTYPE ROWSxCOLS ...]

(a dtype's name applies to the shapes after it). Inputs as the generated bench makes them (make_inputs); the step (forward, then every gradient)
runs 3 times to warm up and 5 times profiled; each kernel's mean time a step, in microseconds,
and the step's total against the copy time of the bytes the bench counts for it.

    ncu --clock-control none -k regex:'rows_kernel|slices_kernel|long_kernel|sum_partials' \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        python3 scripts/norm_kernel_times.py --once WORKSPACE OP DTYPE ROWSxCOLS [ROWSxCOLS ...]

`--once`: each shape's step runs once, unprofiled, for Nsight Compute to read its kernels'
counters (ncu replays each kernel itself); the kernels are those `opgen bench` times.
"""

from __future__ import annotations

import importlib
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile


def profile_step(step: Callable[..., Any], inputs: tuple[Any, ...], nbytes: int, label: str) -> None:
    """Each kernel's mean device time a step, and the step's against a copy of nbytes."""
    steps = 5
    for _ in range(3):
        step(*inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step(*inputs)
        torch.cuda.synchronize()
    times: dict[str, float] = defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            times[event.name[:90]] += event.device_time / steps
    copy_src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    copy_dst = torch.empty_like(copy_src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    copy_dst.copy_(copy_src)
    start.record()
    for _ in range(steps):
        copy_dst.copy_(copy_src)
    end.record()
    torch.cuda.synchronize()
    copy_us = start.elapsed_time(end) * 1e3 / steps
    total = sum(times.values())
    print(f"== {label}: kernels {total:.1f} us a step, copy of its bytes {copy_us:.1f} us"
          f" ({100 * copy_us / total:.1f}% of copy counting kernel time only)", flush=True)  # fmt: skip
    for name, us in sorted(times.items(), key=lambda kv: -kv[1]):
        print(f"   {us:9.1f} us  {name}")


def main() -> None:
    args = sys.argv[1:]
    once = "--once" in args
    if once:
        args.remove("--once")
    workspace, op, dtype_name = Path(args[0]).resolve(), args[1], args[2]
    sys.path.insert(0, str(workspace.parent))
    bench = importlib.import_module(f"{workspace.name}.{op}.bench_{op}")
    step = bench.step_of(bench.forward)
    for shape in args[3:]:
        if "x" not in shape:
            dtype_name = shape
            continue
        dtype = getattr(torch, dtype_name)
        rows, cols = map(int, shape.split("x"))
        inputs = bench.make_inputs((rows, cols), dtype, "cuda", True)
        label = f"{op} {dtype_name} {shape}"
        if once:
            print(f"== {label}", flush=True)
            step(*inputs)
            torch.cuda.synchronize()
        else:
            nbytes = inputs[0].numel() * inputs[0].element_size() * bench.TRAINING_STEP_TENSORS
            profile_step(step, inputs, nbytes, label)
        del inputs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

"""A norm op's training step kernel by kernel on a GPU: each kernel's device time (torch.profiler).

    python3 scripts/norm_kernel_times.py WORKSPACE OP DTYPE ROWSxCOLS [ROWSxCOLS ...]

Inputs as the generated bench makes them (make_inputs); the step (forward, then every gradient)
runs 3 times to warm up and 5 times profiled; each kernel's mean time a step, in microseconds,
and the step's total against the copy time of the bytes the bench counts for it.
"""

from __future__ import annotations

import importlib
import sys
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile


def main() -> None:
    workspace, op, dtype_name = Path(sys.argv[1]).resolve(), sys.argv[2], sys.argv[3]
    sys.path.insert(0, str(workspace.parent))
    bench = importlib.import_module(f"{workspace.name}.{op}.bench_{op}")
    dtype = getattr(torch, dtype_name)
    step = bench.step_of(bench.forward)
    steps = 5
    for shape in sys.argv[4:]:
        rows, cols = map(int, shape.split("x"))
        inputs = bench.make_inputs((rows, cols), dtype, "cuda", True)
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
        nbytes = inputs[0].numel() * inputs[0].element_size() * bench.TRAINING_STEP_TENSORS
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
        print(f"== {op} {dtype_name} {shape}: kernels {total:.1f} us a step, copy of its bytes {copy_us:.1f} us"
              f" ({100 * copy_us / total:.1f}% of copy counting kernel time only)", flush=True)
        for name, us in sorted(times.items(), key=lambda kv: -kv[1]):
            print(f"   {us:9.1f} us  {name}")
        del inputs, copy_src, copy_dst
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

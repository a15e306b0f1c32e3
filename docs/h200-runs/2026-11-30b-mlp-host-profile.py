"""Issue 23 (2026-11-30b): where the fused MLP's small training step spends the host's time.

mlp_seed's step (forward, then torch.autograd.grad of every input) and eager's, by the host's
clock (back to back, one synchronize at the end), then torch.profiler of 20 steps: every CPU-side
op and CUDA runtime call by self time. Information only: no kernel is timed for a claim here.

    python3 2026-11-30b-mlp-host-profile.py WORKSPACE  (holding mlp_seed, built)
"""

import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, sys.argv[1])
from generated_ops.mlp_seed import mlp_seed  # noqa: E402
from generated_ops.mlp_seed.reference import reference_mlp_seed  # noqa: E402

from opgen.bench import mlp_workload, with_gradients  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = True
ops = torch.ops.generated_ops


def host_us(fn, n=200):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - began) / n * 1e6


for rows, dtype in ((32, torch.bfloat16), (65536, torch.bfloat16), (65536, torch.float32), (262144, torch.bfloat16)):
    inputs = mlp_workload(rows, (100, 128, 64, 10), dtype, "cuda", backward=True).make_inputs()
    plain = [t.detach() for t in inputs]
    with torch.no_grad():
        y, saved = ops.mlp_seed.default(*plain, True)
    dy = torch.ones_like(y)
    step, eager = with_gradients(mlp_seed), with_gradients(reference_mlp_seed)
    with torch.no_grad():
        backward = host_us(lambda: ops.mlp_seed_backward.default(dy, *plain, y, saved))
    print(f"== {rows} {dtype}: opgen step {host_us(lambda: step(*inputs)):.1f} us, eager step"
          f" {host_us(lambda: eager(*inputs)):.1f}, backward op straight {backward:.1f}", flush=True)
    for name, fn in (("opgen step", lambda: step(*inputs)), ("eager step", lambda: eager(*inputs))):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
        print(f"-- {name}, {rows} {dtype}, 20 steps", flush=True)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=28, max_name_column_width=60))

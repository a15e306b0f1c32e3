#!/bin/bash
# Issue 23 (2026-11-29b): where a training step's host time goes at small batches. The seed
# network's step took 471 us in bfloat16 and 302 us in float32 at 32 rows in 60a411b's
# `opgen bench` (host time: the kernels take a few us), 505 / 263 us at 2^16. Builds mlp_seed,
# then times the step, the forward and the backward by the host's clock (steps back to back, one
# synchronize at the end) and profiles 20 steps (torch.profiler, CPU and CUDA).
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
repo=$PWD
work=/tmp/opgen-host; mkdir -p $work; cd $work
[ -d generated_ops/mlp_seed ] || opgen new mlp_seed --kind mlp --widths 100,128,64,10 --activation relu > /dev/null
opgen build -j 16 mlp_seed 2>&1 | tail -2
python3 - "${ROUNDS:-3}" <<'PY' 2>&1 | grep -v Warning
import sys, time, torch
from collections import defaultdict
from torch.profiler import profile, ProfilerActivity
from generated_ops.mlp_seed import mlp_seed
from generated_ops.mlp_seed.reference import reference_mlp_seed
from opgen.bench import mlp_workload, with_gradients
torch.backends.cuda.matmul.allow_tf32 = True

def host_us(fn, n=300):
    for _ in range(30): fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n): fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6

for rows in (32, 65536):
    for dtype in (torch.bfloat16, torch.float32):
        inputs = mlp_workload(rows, (100, 128, 64, 10), dtype, "cuda", backward=True).make_inputs()
        step, eager = with_gradients(mlp_seed), with_gradients(reference_mlp_seed)
        grad = torch.ones_like(mlp_seed(*inputs))
        wanted = [t for t in inputs if t.requires_grad]
        def fwd(): return mlp_seed(*inputs)
        def bwd(): return torch.autograd.grad(mlp_seed(*inputs), wanted, grad)
        for r in range(int(sys.argv[1])):  # the contenders by turns: a first-measured one is not favoured
            print(f"== {rows} {dtype} round {r}: step {host_us(lambda: step(*inputs)):.1f} us,"
                  f" forward+grad(given dy) {host_us(bwd):.1f}, forward {host_us(fwd):.1f},"
                  f" eager step {host_us(lambda: eager(*inputs)):.1f}", flush=True)
        # The GPU's time a step: each kernel's device time (torch.profiler, CUDA only).
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20): step(*inputs)
            torch.cuda.synchronize()
        times = defaultdict(float)
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA: times[e.name[:70]] += e.device_time / 20
        print(f"   device time a step {sum(times.values()):.1f} us: " + "; ".join(f"{v:.1f} {k}" for k, v in sorted(times.items(), key=lambda kv: -kv[1])), flush=True)
PY

#!/bin/bash
# Issue 23 (2026-11-29b): the training step's host time split. mlp_seed's forward and backward
# ops called straight (torch.ops, no autograd) against the step through autograd, by the host's
# clock (300 calls back to back, one synchronize at the end), three rounds by turns; and a few
# ATen calls for scale (an allocation, a launch, a small mm).
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
work=/tmp/opgen-host; mkdir -p $work; cd $work
[ -d generated_ops/mlp_seed ] || opgen new mlp_seed --kind mlp --widths 100,128,64,10 --activation relu > /dev/null
opgen build -j 16 mlp_seed 2>&1 | tail -1
python3 - <<'PY' 2>&1 | grep -v Warning
import time, torch
from generated_ops.mlp_seed import mlp_seed
from opgen.bench import mlp_workload, with_gradients
torch.backends.cuda.matmul.allow_tf32 = True
ops = torch.ops.generated_ops

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
        plain = [t.detach() for t in inputs]
        with torch.no_grad():
            y, saved = ops.mlp_seed.default(*plain, True)
        dy = torch.ones_like(y)
        step = with_gradients(mlp_seed)
        a = torch.randn(rows, 64, device="cuda", dtype=dtype); g = torch.randn(rows, 10, device="cuda", dtype=dtype)
        for r in range(3):
            with torch.no_grad():
                fwd = host_us(lambda: ops.mlp_seed.default(*plain, True))
                bwd = host_us(lambda: ops.mlp_seed_backward.default(dy, *plain, y, saved))
                empty = host_us(lambda: torch.empty(rows, 128, device="cuda", dtype=dtype))
                fill = host_us(lambda: dy.fill_(1))
                mm = host_us(lambda: torch.mm(g.t(), a))
            print(f"== {rows} {dtype} round {r}: step {host_us(lambda: step(*inputs)):.1f} us; ops straight:"
                  f" forward {fwd:.1f}, backward {bwd:.1f}; torch.empty {empty:.1f}, fill_ {fill:.1f},"
                  f" mm (10 x {rows} x 64) {mm:.1f}", flush=True)
PY

#!/usr/bin/env bash
# The quick sweep of the four norm ops (eager and torch.compile side by side, 512 MiB inputs) on
# 9aa24e8 (the forward's staged bias and weight ahead, 2026-11-29i; the wide clusters by pushes and
# RMSNorm's weight ahead, 2026-11-29h).
#   timeout 575 bash docs/h200-runs/2026-11-29i-norm-sweep-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
QUICK_WARM=8 QUICK_WARM_TIMEOUT=150 QUICK_ARGS="--compile-budget 150" \
  timeout 560 bash scripts/gpu_session.sh quick layernorm rmsnorm add_layernorm add_rmsnorm
echo "== session exit $?"

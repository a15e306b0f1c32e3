#!/usr/bin/env bash
# The tree with the backward's cluster pushes (kBackwardClusterPushes) and the forward on its
# barriers (kForwardClusterPushes = false, main's forward): every CUDA test of the four norm ops,
# then the quick sweep (eager and torch.compile side by side, 512 MiB inputs).
#   timeout 575 bash docs/h200-runs/2026-11-29f-norm-pushes-final-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  QUICK_WARM=8 QUICK_WARM_TIMEOUT=150 QUICK_ARGS="--compile-budget 150" \
  timeout 560 bash scripts/gpu_session.sh test,quick layernorm rmsnorm add_layernorm add_rmsnorm
echo "== session exit $?"

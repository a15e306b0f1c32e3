#!/usr/bin/env bash
# The quick sweep of the four norm ops (eager and torch.compile side by side, 512 MiB inputs) on
# the tree with the backward's clusters of 16 wide blocks (08d5f47) and deep clusters (float32
# rows of 262144 but add_layernorm's).
#   timeout 575 bash docs/h200-runs/2026-11-29g-norm-sweep-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
QUICK_WARM=8 QUICK_WARM_TIMEOUT=150 QUICK_ARGS="--compile-budget 150" \
  timeout 560 bash scripts/gpu_session.sh quick layernorm rmsnorm add_layernorm add_rmsnorm
echo "== session exit $?"

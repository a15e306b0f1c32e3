#!/usr/bin/env bash
# The quick sweep of the four norm ops (eager and torch.compile side by side, 512 MiB inputs) at
# df0d368: the first sweep with the forward clusters' equal-halves merge (56a2e55, 480c4e8) and
# the backward's wide clusters (df0d368); where issue 21's cells stand now.
#   timeout 560 bash docs/h200-runs/2026-11-29e-norm-sweep-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
QUICK_WARM=8 QUICK_WARM_TIMEOUT=150 QUICK_ARGS="--compile-budget 150" \
  timeout 540 bash scripts/gpu_session.sh quick layernorm rmsnorm add_layernorm add_rmsnorm
echo "== session exit $?"

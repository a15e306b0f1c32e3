#!/usr/bin/env bash
# Which part of staging the MLP's weights costs the forward: two timing-only variants of
# mlp_hopper.cuh (untracked; their results are wrong): .variants/noload (no global loads, zeros
# staged: the stores and the barrier) and .variants/nostore (the loads, their chunks folded into
# one value: the round trip to memory), timed with the tree (both) in one call, the kernels alone
# and event-timed (--floor), seed and 64x4, at 1 pass's rows, 2^16 and 2^18.
#   timeout 540 bash docs/h200-runs/2026-11-29-mlp-staging-parts-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
MLPQUICK_VARIANTS=".variants/noload .variants/nostore" \
  MLPQUICK_ARGS="--rows 25344 65536 262144 --forward-only --profile-rows 0 --floor" \
  timeout 520 bash scripts/gpu_session.sh mlpquick mlp_seed mlp_64x4

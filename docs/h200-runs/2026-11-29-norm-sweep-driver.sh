#!/usr/bin/env bash
# The quick sweep of the four norm ops (eager and torch.compile side by side, 512 MiB inputs) on
# merged main after the C++ autograd formulas and 7c654f1 (16-bit residual rows of 16384-32768 on
# 4-pack clusters of 2), which no sweep had timed: where issue 21's cells stand now.
#   timeout 540 bash docs/h200-runs/2026-11-29-norm-sweep-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
QUICK_WARM=8 QUICK_WARM_TIMEOUT=150 QUICK_ARGS="--compile-budget 150" \
  timeout 520 bash scripts/gpu_session.sh quick layernorm rmsnorm add_layernorm add_rmsnorm

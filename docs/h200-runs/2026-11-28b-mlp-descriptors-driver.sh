#!/usr/bin/env bash
# The Hopper MLP forward's wgmma descriptors advanced by one add from a descriptor made once
# (tc::advance_descriptor) instead of built afresh per MMA: the CUDA tests and memcheck of the two
# networks that take the Hopper forward, and the forward and training step in bfloat16 and float32
# (TF32) against the previous headers (.variants/base: mlp_hopper.cuh and tensor_core.cuh of the
# commit before, untracked), then the previous headers' forward again.
#   timeout 580 bash docs/h200-runs/2026-11-28b-mlp-descriptors-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
TEST_K=cuda TEST_SPLIT=1 SANITIZE_OPS="mlp_seed mlp_64x4" SANITIZE_TOOLS="memcheck" SANITIZE_TIMEOUT=150 \
  MLPQUICK_VARIANTS=".variants/base" MLPQUICK_ARGS="--rows 65536 262144 1048576 --profile-rows 0" \
  timeout 500 bash scripts/gpu_session.sh test,sanitize,mlpquick mlp_seed mlp_64x4
v=$GPU_WORK-variant-base
PYTHONPATH="$v${PYTHONPATH:+:$PYTHONPATH}" timeout 60 python3 scripts/mlp_quick_bench.py "$v/generated_ops" \
  mlp_seed mlp_64x4 --rows 65536 262144 1048576 --forward-only --profile-rows 0 \
  2>&1 | sed 's/^/base again: /' | tee -a "$OUT/mlpquick.log"

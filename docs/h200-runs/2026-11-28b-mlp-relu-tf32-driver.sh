#!/usr/bin/env bash
# ReLU outputs to tf32 in one instruction (tc::to_tf32_not_nan: the same bits to the tensor cores
# as cvt.rna's two): the CUDA tests and memcheck of the two ReLU networks whose kernels changed,
# and the float32 (TF32) forward and training step against the previous headers (.variants/base:
# mlp.cuh and tensor_core.cuh of the commit before, untracked) in the same call.
#   timeout 580 bash docs/h200-runs/2026-11-28b-mlp-relu-tf32-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
TEST_K=cuda TEST_SPLIT=1 SANITIZE_OPS="mlp_seed mlp_64x4" SANITIZE_TOOLS="memcheck" SANITIZE_TIMEOUT=150 \
  MLPQUICK_VARIANTS=".variants/base" \
  MLPQUICK_ARGS="--rows 65536 262144 1048576 --profile-rows 0 --dtypes float32" \
  timeout 500 bash scripts/gpu_session.sh test,sanitize,mlpquick mlp_seed mlp_64x4
# The previous headers timed again after the tree (the spread within one call).
v=$GPU_WORK-variant-base
PYTHONPATH="$v${PYTHONPATH:+:$PYTHONPATH}" timeout 60 python3 scripts/mlp_quick_bench.py "$v/generated_ops" \
  mlp_seed mlp_64x4 --rows 65536 262144 1048576 --forward-only --profile-rows 0 --dtypes float32 \
  2>&1 | sed 's/^/base again: /' | tee -a "$OUT/mlpquick.log"

#!/usr/bin/env bash
# The MLP's TF32 operands truncated (tc::tf32_truncated) instead of rounded: every CUDA test of the
# four MLP ops and linear_gelu (tensor_core.cuh changed), memcheck of mlp_seed and mlp_64x4, how
# PyTorch's own GEMMs read TF32 operands here, and the quick timing (forward and training step).
#   timeout 580 bash docs/h200-runs/2026-11-28b-mlp-trunc-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
mkdir -p "$OUT"
python3 docs/h200-runs/2026-11-28b-cublas-tf32.py 2>&1 | tee "$OUT/cublas-tf32.log"
TEST_K=cuda TEST_SPLIT=1 SANITIZE_OPS="mlp_seed mlp_64x4" SANITIZE_TOOLS="memcheck" SANITIZE_TIMEOUT=150 \
  MLPQUICK_OPS="mlp_seed mlp_64x4" MLPQUICK_ARGS="--rows 65536 262144 1048576 --profile-rows 0" \
  timeout 480 bash scripts/gpu_session.sh test,sanitize,mlpquick mlp_seed mlp_64x4 mlp_two mlp_deep linear_gelu

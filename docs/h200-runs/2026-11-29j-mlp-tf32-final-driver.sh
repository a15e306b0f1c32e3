#!/usr/bin/env bash
# Issue 23, the second call of 2026-11-29j: the tree as committed after -mlp-tf32-rn-driver.sh
# (to_tf32 by cvt.rn.tf32.f32; ReLU's outputs keep to_tf32_not_nan's integer add, the timing
# variant "mixed" of that call), its CUDA tests and memcheck for the two ReLU networks (the only
# ops whose sm_90 code differs from the first call's tested tree), then `opgen bench` of both.
#   timeout 590 bash docs/h200-runs/2026-11-29j-mlp-tf32-final-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
TEST_K=cuda TEST_SPLIT=1 SANITIZE_OPS="mlp_seed mlp_64x4" SANITIZE_TOOLS="memcheck" SANITIZE_TIMEOUT=120 \
  BENCH_OPS="mlp_seed mlp_64x4" BENCH_BUDGET_S=420 \
  timeout 580 bash scripts/gpu_session.sh test,sanitize,bench mlp_seed mlp_64x4
echo "== exit $? at $SECONDS s"

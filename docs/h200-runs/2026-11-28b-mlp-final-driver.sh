#!/usr/bin/env bash
# The session's last MLP tree (60a411b: ReLU outputs to tf32 in one add, descriptors by one add,
# operands not zeroed): every CUDA test and memcheck of the two networks that take the Hopper
# forward, then `opgen bench` of both (the acceptance files of docs/benchmarks/mlp).
#   timeout 580 bash docs/h200-runs/2026-11-28b-mlp-final-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
TEST_K=cuda TEST_SPLIT=1 SANITIZE_OPS="mlp_seed mlp_64x4" SANITIZE_TOOLS="memcheck" SANITIZE_TIMEOUT=150 \
  BENCH_OPS="mlp_seed mlp_64x4" BENCH_BUDGET_S=470 \
  timeout 560 bash scripts/gpu_session.sh test,sanitize,bench mlp_seed mlp_64x4

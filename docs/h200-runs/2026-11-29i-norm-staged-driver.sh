#!/usr/bin/env bash
# 2026-11-29i: the forward over clusters keeps its weight (and, where both fit two blocks an SM,
# its bias) in shared memory for all its rows (forward_staged_params), instead of reading them
# from L2 every row after a cluster barrier has invalidated L1; and the backward adds its column
# sums beside dx, a vector at a time (no spills left in the mixed-precision small blocks). Every
# CUDA test of the four norm ops; memcheck and racecheck of layernorm's and add_layernorm's mid
# and long pieces (clusters: staged weight, and both parameters in add_layernorm's 16-bit
# clusters of 2); then the training step kernel by kernel with the previous commit's norm.cuh
# (`-norm-staged-main-variant.diff`) beside the tree.
#   timeout 575 bash docs/h200-runs/2026-11-29i-norm-staged-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  SANITIZE_OPS="layernorm add_layernorm" SANITIZE_TOOLS="memcheck racecheck" \
  SANITIZE_PIECES="mid_float32 mid_bfloat16 long_float32" SANITIZE_TIMEOUT=150 \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29i-norm-staged-main-variant.diff" \
  NORMTIMES_SHAPES="float32 8192x4096 4096x32768 2048x65536 1024x131072 512x262144 bfloat16 4096x65536 2048x131072 1024x262144" \
  timeout 565 bash scripts/gpu_session.sh test,sanitize,normtimes layernorm rmsnorm add_layernorm add_rmsnorm
echo "== session exit $? at $SECONDS s"

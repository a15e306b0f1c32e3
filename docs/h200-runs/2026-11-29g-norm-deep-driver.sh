#!/usr/bin/env bash
# The tree at the backward's wide clusters of 16 (08d5f47) plus the deep clusters
# (kDeepBackwardClusters: float32 rows past 131072 on clusters of 16 blocks of 1024 threads, 16
# values a thread, no row loaded ahead, in place of the slices kernel): every CUDA test of the
# four norm ops; memcheck and racecheck of layernorm's and add_rmsnorm's long pieces (clusters,
# wide clusters, deep clusters and the slices kernel; rows to 262152); then the training step
# kernel by kernel with the deep clusters off (the slices kernel, built beside the tree) and on.
#   timeout 575 bash docs/h200-runs/2026-11-29g-norm-deep-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  SANITIZE_OPS="layernorm add_rmsnorm" SANITIZE_TOOLS="memcheck racecheck" \
  SANITIZE_PIECES="long_bfloat16 long_float32" SANITIZE_TIMEOUT=240 \
  NORMTIMES_OPS="layernorm rmsnorm add_layernorm add_rmsnorm" \
  NORMTIMES_VARIANTS="kDeepBackwardClusters=false" NORMTIMES_REPEAT=1 \
  NORMTIMES_SHAPES="float32 512x262144 1024x131072" \
  timeout 565 bash scripts/gpu_session.sh test,sanitize,normtimes layernorm rmsnorm add_layernorm add_rmsnorm
echo "== session exit $?"

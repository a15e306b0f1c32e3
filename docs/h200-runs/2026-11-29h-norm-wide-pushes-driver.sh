#!/usr/bin/env bash
# 2026-11-29h: the forward's wide clusters (kWideClusterThreads, float32 rows past 8 blocks of
# 512 threads) reduce by pushes (kForwardWideClusterPushes), the other clusters by barriers as
# before. Every CUDA test of the four norm ops; memcheck and racecheck of layernorm's and
# add_rmsnorm's long_float32 pieces (rows to 262152: the wide clusters and their boundaries);
# then the forward with main's norm.cuh (`-norm-wide-pushes-main-variant.diff`, built beside the tree)
# and the tree.
#   timeout 575 bash docs/h200-runs/2026-11-29h-norm-wide-pushes-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  SANITIZE_OPS="layernorm add_rmsnorm" SANITIZE_TOOLS="memcheck racecheck" \
  SANITIZE_PIECES="long_float32" SANITIZE_TIMEOUT=200 \
  NORMTIMES_FORWARD=1 NORMTIMES_EACH_S=60 \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29h-norm-wide-pushes-main-variant.diff" \
  NORMTIMES_SHAPES="float32 512x262144 1024x131072 bfloat16 8192x32768" \
  timeout 565 bash scripts/gpu_session.sh test,sanitize,normtimes layernorm rmsnorm add_layernorm add_rmsnorm
echo "== session exit $? at $SECONDS s"

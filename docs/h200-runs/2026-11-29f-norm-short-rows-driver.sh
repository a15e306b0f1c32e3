#!/usr/bin/env bash
# The backward's pushes only in blocks of one row (kRowsPerBlock == 1: the only ones that run in
# clusters); blocks of several rows keep the barriers' code. The training step kernel by kernel at
# rows of 1024-8192 (where the sweep's cells moved down by up to 3.6 points with no clusters
# there), the backward on barriers (kBackwardClusterPushes=false) built beside the tree and timed
# before it; then every CUDA test of layernorm and add_layernorm.
#   timeout 575 bash docs/h200-runs/2026-11-29f-norm-short-rows-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  NORMTIMES_OPS="layernorm add_layernorm rmsnorm" NORMTIMES_VARIANTS="kBackwardClusterPushes=false" NORMTIMES_REPEAT=1 \
  NORMTIMES_SHAPES="float32 131072x1024 16384x8192 bfloat16 262144x1024 65536x4096 32768x8192" \
  timeout 560 bash scripts/gpu_session.sh normtimes,test layernorm add_layernorm rmsnorm
echo "== session exit $?"

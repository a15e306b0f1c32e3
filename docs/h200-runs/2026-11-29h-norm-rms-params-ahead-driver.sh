#!/usr/bin/env bash
# 2026-11-29h: RMSNorm's forward loads its weight one pack ahead of its stores
# (forward_params_ahead: weight in x's dtype, rows of a block of 512 threads or more; no spills,
# nvcc 13.0 sm_90a; LayerNorm's and the residual forms' kernels unchanged, the same SASS). Every
# CUDA test of rmsnorm; memcheck of its mid and long pieces (a change of load order in registers:
# no shared memory touched, so no racecheck); then the forward with the
# previous commit's norm.cuh (`-norm-rms-params-ahead-main-variant.diff`) beside the tree.
#   timeout 420 bash docs/h200-runs/2026-11-29h-norm-rms-params-ahead-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_K="cuda and not 2_31" \
  SANITIZE_OPS="rmsnorm" SANITIZE_TOOLS="memcheck" \
  SANITIZE_PIECES="mid_float32 long_float32 mid_bfloat16 long_bfloat16" SANITIZE_TIMEOUT=150 \
  NORMTIMES_FORWARD=1 NORMTIMES_EACH_S=60 \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29h-norm-rms-params-ahead-main-variant.diff" \
  NORMTIMES_SHAPES="bfloat16 8192x32768 4096x65536 2048x131072 1024x262144 float32 8192x16384 4096x32768 2048x65536 1024x131072 512x262144" \
  timeout 410 bash scripts/gpu_session.sh test,sanitize,normtimes rmsnorm
echo "== session exit $? at $SECONDS s"

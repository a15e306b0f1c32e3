#!/usr/bin/env bash
# 2026-11-29i: the residual forms take c0e7a83's parameter rules too: add_rmsnorm loads its weight a
# pack ahead (every dtype whose weight is x's), add_layernorm's float32 rows keep the bias in
# shared memory and load the weight a pack ahead (no new spills: nvcc 13.0 sm_90a). Every CUDA test
# of add_layernorm and add_rmsnorm; memcheck of their long_float32 and mid_bfloat16 pieces and of
# layernorm's long_float32 (c0e7a83's wide clusters with the staged bias, not sanitized in its
# own call); then the forward with c0e7a83's norm.cuh (`-norm-residual-ahead-main-variant.diff`)
# beside the tree, timed before and after it.
#   timeout 575 bash docs/h200-runs/2026-11-29i-norm-residual-ahead-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  SANITIZE_OPS="add_layernorm add_rmsnorm layernorm" SANITIZE_TOOLS="memcheck" \
  SANITIZE_PIECES="long_float32 mid_bfloat16" SANITIZE_TIMEOUT=150 \
  NORMTIMES_FORWARD=1 NORMTIMES_EACH_S=90 NORMTIMES_REPEAT=1 NORMTIMES_OPS="add_layernorm add_rmsnorm" \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29i-norm-residual-ahead-main-variant.diff" \
  NORMTIMES_SHAPES="float32 4096x32768 2048x65536 1024x131072 512x262144 bfloat16 4096x65536 2048x131072 1024x262144" \
  timeout 565 bash scripts/gpu_session.sh test,sanitize,normtimes add_layernorm add_rmsnorm layernorm
echo "== session exit $? at $SECONDS s"

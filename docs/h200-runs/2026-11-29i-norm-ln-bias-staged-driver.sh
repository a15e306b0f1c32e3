#!/usr/bin/env bash
# 2026-11-29i: LayerNorm's forward over clusters keeps its bias in shared memory for all its rows
# (forward_staged_bias) and loads its weight a pack ahead as RMSNorm's (forward_params_ahead), so
# that neither parameter is an L2 round trip in each pack's chain. Every CUDA test of layernorm;
# memcheck and racecheck of its mid pieces (float32, bfloat16: clusters of 2-8 blocks of 512);
# then the forward of the tree against two variants built beside it: kStagedForwardBias=false
# (HEAD's forward) and kForwardParamsAhead=0 (the bias staged, the weight at its use), the first
# timed again after the tree.
#   timeout 575 bash docs/h200-runs/2026-11-29i-norm-ln-bias-staged-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_K="cuda and not 2_31" \
  SANITIZE_OPS="layernorm" SANITIZE_TOOLS="memcheck racecheck" \
  SANITIZE_PIECES="mid_float32 mid_bfloat16" SANITIZE_TIMEOUT=150 \
  NORMTIMES_FORWARD=1 NORMTIMES_EACH_S=90 NORMTIMES_REPEAT=1 \
  NORMTIMES_VARIANTS="kStagedForwardBias=false kForwardParamsAhead=0" \
  NORMTIMES_SHAPES="float32 4096x32768 2048x65536 1024x131072 512x262144 bfloat16 4096x65536 2048x131072 1024x262144" \
  timeout 565 bash scripts/gpu_session.sh test,sanitize,normtimes layernorm
echo "== session exit $? at $SECONDS s"

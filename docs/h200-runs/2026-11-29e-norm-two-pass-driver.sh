#!/bin/bash
# (Not kept: the kernel is in 2026-11-29e-norm-two-pass-variant.diff, against df0d368's
# generated_ops/include; the call ran df0d368 with that diff applied.)
# The forward's two-pass kernel (norm.cuh's forward_two_pass_kernel: a block a row, the second
# read from L2) for every row past one block's registers (kTwoPassRowBytes = 1 GiB), against the
# clusters (kTwoPassRowBytes=0) built beside it: every CUDA test of the four norm ops on the tree,
# compute-sanitizer memcheck and racecheck of layernorm's mid_float32 and add_layernorm's
# long_bfloat16, then the forward alone at rows of 32768-262144.
export PYTHONUNBUFFERED=1
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  SANITIZE_OPS="layernorm add_layernorm" SANITIZE_TOOLS="memcheck racecheck" \
  SANITIZE_PIECES="mid_float32 long_bfloat16" SANITIZE_TIMEOUT=100 \
  NORMTIMES_FORWARD=1 NORMTIMES_VARIANTS="kTwoPassRowBytes=0" \
  NORMTIMES_SHAPES="float32 4096x32768 2048x65536 1024x131072 512x262144 bfloat16 4096x65536 2048x131072 1024x262144" \
  bash scripts/gpu_session.sh test,sanitize,normtimes layernorm add_layernorm rmsnorm add_rmsnorm
echo "== session exit $?"

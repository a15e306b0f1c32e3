#!/bin/bash
# LayerNorm's forward statistics merged as EqualMoments (mean and variance of equal halves: no
# count, no division) wherever a block's threads all hold whole packs (norm.cuh,
# kEqualCountMoments): the CUDA tests of layernorm, add_layernorm and rmsnorm; compute-sanitizer
# memcheck and racecheck of layernorm's forward and backward pieces (short_float32, mid_float32,
# mid_bfloat16); then the forward alone, main's merge (kEqualCountMoments=false, built beside)
# against the tree, at rows of 1024-262144.
export PYTHONUNBUFFERED=1
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  SANITIZE_OPS=layernorm SANITIZE_TOOLS="memcheck racecheck" \
  SANITIZE_PIECES="short_float32 mid_float32 mid_bfloat16" SANITIZE_TIMEOUT=150 \
  NORMTIMES_FORWARD=1 NORMTIMES_OPS="layernorm rmsnorm" NORMTIMES_VARIANTS="kEqualCountMoments=false" \
  NORMTIMES_SHAPES="float32 131072x1024 32768x4096 8192x16384 4096x32768 2048x65536 1024x131072 512x262144 bfloat16 131072x2048 8192x32768 4096x65536 2048x131072 1024x262144" \
  bash scripts/gpu_session.sh test,sanitize,normtimes layernorm add_layernorm rmsnorm
echo "== session exit $?"

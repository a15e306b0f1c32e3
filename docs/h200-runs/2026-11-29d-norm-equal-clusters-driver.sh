#!/bin/bash
# The second form of 2026-11-29d-norm-equal-moments-driver.sh's change: clusters whose blocks
# are all full merge their blocks' EqualMoments too (cluster_allreduce reads the blocks again in
# the lanes past them, row_engine.cuh's Idempotent, instead of merging Moments with an identity).
# The CUDA tests of layernorm, add_layernorm, rmsnorm and softmax (row_engine.cuh's other user);
# compute-sanitizer memcheck and racecheck of layernorm's pieces (short_float32, mid_float32,
# mid_bfloat16, long_bfloat16); then the forward alone, main's merge (kEqualCountMoments=false)
# against the tree.
export PYTHONUNBUFFERED=1
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  SANITIZE_OPS=layernorm SANITIZE_TOOLS="memcheck racecheck" \
  SANITIZE_PIECES="short_float32 mid_float32 mid_bfloat16 long_bfloat16" SANITIZE_TIMEOUT=150 \
  NORMTIMES_FORWARD=1 NORMTIMES_OPS="layernorm rmsnorm" NORMTIMES_VARIANTS="kEqualCountMoments=false" \
  NORMTIMES_SHAPES="float32 131072x1024 8192x16384 4096x32768 2048x65536 1024x131072 512x262144 bfloat16 8192x32768 4096x65536 2048x131072 1024x262144" \
  bash scripts/gpu_session.sh test,sanitize,normtimes layernorm add_layernorm rmsnorm softmax
echo "== session exit $?"

#!/bin/bash
# The first call's rule kept (kWideBackwardClusterThreads = 1024 where clusters of 16 blocks of 512
# threads would run; the slices kernel again past them): compute-sanitizer memcheck and racecheck
# of layernorm's pieces mid_float32 and long_bfloat16 (float32 rows of 65536 and bfloat16 131072
# take the wide clusters); then the training step kernel by kernel for the four norm ops, the tree
# against wide clusters from 4 blocks (float32 rows of 16384 and 32768 too) and against none.
export PYTHONUNBUFFERED=1
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
SANITIZE_OPS=layernorm SANITIZE_TOOLS="memcheck racecheck" \
  SANITIZE_PIECES="mid_float32 long_bfloat16" SANITIZE_TIMEOUT=150 \
  NORMTIMES_VARIANTS="kWideBackwardClusterFrom=4 kWideBackwardClusterThreads=0" \
  NORMTIMES_SHAPES="float32 8192x16384 4096x32768 2048x65536 1024x131072 bfloat16 8192x32768 4096x65536 2048x131072" \
  bash scripts/gpu_session.sh sanitize,normtimes layernorm add_layernorm rmsnorm add_rmsnorm
echo "== session exit $?"

#!/bin/bash
# The backward's register clusters of 1024-thread blocks (norm.cuh's kWideBackwardClusterThreads):
# rows that clusters of 16 blocks of 512 threads took (float32 65536, bfloat16 131072) and rows
# that the slices kernel took (float32 131072, bfloat16 262144). The training step kernel by
# kernel, main's plan (kWideBackwardClusterThreads=0) built beside the tree and timed before and
# after it; then every CUDA test of the four norm ops (the tree also carries 480c4e8's forward,
# not yet run on a GPU).
export PYTHONUNBUFFERED=1
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  NORMTIMES_OPS="layernorm rmsnorm" NORMTIMES_VARIANTS="kWideBackwardClusterThreads=0" NORMTIMES_REPEAT=1 \
  NORMTIMES_SHAPES="float32 4096x32768 2048x65536 1024x131072 512x262144 bfloat16 4096x65536 2048x131072 1024x262144" \
  bash scripts/gpu_session.sh normtimes,test layernorm add_layernorm rmsnorm add_rmsnorm
echo "== session exit $?"

#!/bin/bash
# Issue 21 (2026-11-29f): the cluster reductions by st.async pushes onto mbarriers
# (norm.cuh's kClusterPushes) in place of two cluster barriers a row, whose release arrive is a
# MEMBAR.ALL.GPU in every thread (waiting for the next row's loads). The training step kernel by
# kernel, main's barriers (kClusterPushes=false) built beside the tree and timed before it; then
# every CUDA test of the four norm ops on the tree.
export PYTHONUNBUFFERED=1
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
export GPU_WORK=/tmp/opgen-gpu21p
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  NORMTIMES_OPS="layernorm rmsnorm add_layernorm add_rmsnorm" NORMTIMES_VARIANTS="kClusterPushes=false" NORMTIMES_REPEAT=1 \
  NORMTIMES_SHAPES="float32 8192x16384 4096x32768 2048x65536 1024x131072 512x262144 bfloat16 8192x32768 4096x65536 2048x131072 1024x262144" \
  bash scripts/gpu_session.sh normtimes,test layernorm add_layernorm rmsnorm add_rmsnorm
echo "== session exit $?"

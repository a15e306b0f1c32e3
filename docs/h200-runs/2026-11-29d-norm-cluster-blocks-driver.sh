#!/bin/bash
# The plain forward clusters with smaller blocks (norm.cuh's kClusterBlockThreads, 512 on main):
# 256 and 128 threads a block, so an SM holds 4 or 8 of them and one block's reduction overlaps
# more other blocks' loads; twice or four times the blocks a cluster. The forward alone against
# eager and a copy (scripts/norm_forward_times.py), each variant built beside the tree.
export PYTHONUNBUFFERED=1
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
NORMTIMES_FORWARD=1 NORMTIMES_OPS="layernorm rmsnorm" \
  NORMTIMES_VARIANTS="kClusterBlockThreads=256 kClusterBlockThreads=128" \
  NORMTIMES_SHAPES="float32 4096x32768 2048x65536 1024x131072 bfloat16 4096x65536 2048x131072 1024x262144" \
  bash scripts/gpu_session.sh normtimes layernorm rmsnorm
echo "== session exit $?"

#!/usr/bin/env bash
# main at b95eba5, first run on a GPU of 3e5d25b (opgen/mbarrier.cuh, the one owner of the
# mbarrier helpers) and 4da1150 (row_engine.cuh's combine_cluster_blocks): every CUDA test of the
# four norm ops, matmul and mlp_seed (one process an op, side by side); then 2026-11-29f's
# prepared timing: the slices kernel's rows on clusters of 16 blocks of 1024 threads
# (`2026-11-29f-norm-wide16-backward-variant.diff`), built beside the tree and timed before it.
#   timeout 575 bash docs/h200-runs/2026-11-29g-verify-wide16-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  NORMTIMES_OPS="layernorm rmsnorm add_layernorm add_rmsnorm" \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29f-norm-wide16-backward-variant.diff" NORMTIMES_REPEAT=1 \
  NORMTIMES_SHAPES="float32 2048x65536 1024x131072 512x262144 bfloat16 2048x131072 1024x262144" \
  timeout 565 bash scripts/gpu_session.sh test,normtimes layernorm rmsnorm add_layernorm add_rmsnorm matmul mlp_seed
echo "== session exit $?"

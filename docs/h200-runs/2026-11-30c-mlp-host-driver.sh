#!/usr/bin/env bash
# Issue 23 (2026-11-30c): the MLP backward's host path (one allocation for its scratch, views in
# one call each, the weight GEMM's cuBLASLt/ATen choice by the cost of a call in a loop, host
# included) against HEAD aa4aae1, then the tree's CUDA tests (lin_relu's too: linear_cublaslt.h's
# choice changed for the linear ops) and memcheck of the two networks.
# The base: .variants/mlp-host-base (untracked, travels with the tree): HEAD's
# include/opgen/{mlp.cuh,linear_cublaslt.h} (git show aa4aae1:generated_ops/include/opgen/...) and
# its mlp_seed_cuda_gemm.cpp (aa4aae1:tests/golden/mlp_seed/csrc/...; mlp_64x4's by renaming).
#   timeout 590 bash docs/h200-runs/2026-11-30c-mlp-host-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
mkdir -p "$OUT"
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
repo=$PWD; base=/tmp/opgen-base
rm -rf $base && mkdir -p $base && cd $base
opgen new mlp_seed --kind mlp --widths 100,128,64,10 --activation relu > /dev/null
opgen new mlp_64x4 --kind mlp --widths 64,64,64,64,16 --activation relu > /dev/null
cp -r $repo/.variants/mlp-host-base/* generated_ops/
( opgen build -j 8 mlp_seed mlp_64x4 > "$OUT/build-base.log" 2>&1 ) &
basebuild=$!
cd $repo
# The tree: rendered and built by gpu_session (no mode named: it only builds), beside the base.
timeout 560 bash scripts/gpu_session.sh build-only mlp_seed mlp_64x4 lin_relu > "$OUT/build-tree.log" 2>&1 || true
wait $basebuild
echo "== builds done at $SECONDS s"; tail -1 "$OUT/build-base.log"; tail -1 "$OUT/build-tree.log"
for round in 1 2; do
  for which in base tree; do
    w=$base; [ $which = tree ] && w=$GPU_WORK
    echo "== $which, round $round" | tee -a "$OUT/host-times.log"
    timeout 100 python3 $repo/docs/h200-runs/2026-11-30c-mlp-host-times.py $w mlp_seed mlp_64x4 2>&1 | grep -v Warn | tee -a "$OUT/host-times.log"
  done
done
echo "== timing done at $SECONDS s"
TEST_K=cuda TEST_SPLIT=1 SANITIZE_OPS="mlp_seed mlp_64x4" SANITIZE_TOOLS="memcheck" SANITIZE_TIMEOUT=120 \
  timeout $((585 - SECONDS)) bash scripts/gpu_session.sh test,sanitize mlp_seed mlp_64x4 lin_relu
echo "== exit $? at $SECONDS s"

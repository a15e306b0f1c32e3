#!/usr/bin/env bash
# Prepared in 2026-11-29i, not run (no device time left). Issue 23: the Hopper MLP forward fetches
# the next tile's x once its first layer's MMAs are issued instead of before
# (`-mlp-fetch-late-variant.diff`, on template/workspace/include/opgen/mlp{,_hopper}.cuh). In the
# SASS listing of mlp_seed's inference kernel (nvcc 13.0, sm_90a) the first HGMMA of a tile moves
# from 389 instructions after the tile's wait for x to 61 (bfloat16, shared x: the fetch's swizzled
# cp.async addresses) and from 521 to 265 (TF32, x through registers; the training kernels 412 ->
# 56 and 551 -> 258). Those are listing distances: they include the partial and unaligned tiles'
# branches, so a full tile's chain loses fewer executed instructions (the full-tile path is about
# 10 a cp.async, 13 of them a lane in bfloat16); no spills, no wgmma serialization warning; registers a thread, bfloat16
# training 154 -> 166, inference 166 -> 160, TF32 165/166 -> 167/167 (3 warpgroups allow 168).
# Untimed, untested. Before the call, on the tree:
#   git apply docs/h200-runs/2026-11-29i-mlp-fetch-late-variant.diff
#   mkdir -p .variants/base && for f in mlp.cuh mlp_hopper.cuh; do
#     git show HEAD:template/workspace/include/opgen/$f > .variants/base/$f; done
# (.variants/ untracked, so it travels with the tree). Every CUDA test of mlp_seed and mlp_64x4,
# memcheck, then the forward and the training step against HEAD's headers in the same call,
# HEAD's forward timed again last (the spread within one call).
#   timeout 590 bash docs/h200-runs/2026-11-29i-mlp-fetch-late-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
[ -f .variants/base/mlp_hopper.cuh ] || { echo "make .variants/base first (see the header)"; exit 2; }
TEST_K=cuda TEST_SPLIT=1 SANITIZE_OPS="mlp_seed mlp_64x4" SANITIZE_TOOLS="memcheck" SANITIZE_TIMEOUT=120 \
  MLPQUICK_VARIANTS=".variants/base" MLPQUICK_ARGS="--rows 65536 262144 1048576 --profile-rows 0" \
  timeout 450 bash scripts/gpu_session.sh test,sanitize,mlpquick mlp_seed mlp_64x4
v=$GPU_WORK-variant-base
PYTHONPATH="$v${PYTHONPATH:+:$PYTHONPATH}" timeout 60 python3 scripts/mlp_quick_bench.py "$v/generated_ops" \
  mlp_seed mlp_64x4 --rows 65536 262144 1048576 --forward-only --profile-rows 0 \
  2>&1 | sed 's/^/base again: /' | tee -a "$OUT/mlpquick.log"
echo "== exit at $SECONDS s"

#!/usr/bin/env bash
# Prepared in 2026-11-29j, run in 2026-11-30a (`2026-11-30a-norm-f32-pushes-*.log`). Issue 21: the forward's narrow
# float32 clusters (2-8 blocks of 512 threads) reducing by pushes onto their own mbarriers instead
# of cluster barriers (`-norm-f32-pushes-variant.diff`: kForwardClusterPushes per dtype, true for
# float32; 16-bit and one-block rows keep their kernels). One timing-only call of 2026-11-29j
# (`-norm-narrow-pushes-normtimes.log`, every dtype on pushes) measured LayerNorm float32 7-8%
# faster (rows of 32768 297.0 -> 274.4 us, 131072 311.2 -> 288.0) and bfloat16 5-7% slower.
# nvcc 13.0, sm_90a: none of the four ops' float32 pushes kernels spills.
# Before the call, put the change in the tree (both copies of norm.cuh):
#   git apply docs/h200-runs/2026-11-29j-norm-f32-pushes-variant.diff
#   sed 's#generated_ops/include#template/workspace/include#g' \
#     docs/h200-runs/2026-11-29j-norm-f32-pushes-variant.diff | git apply
# Then, in one call (about 350 s): every CUDA test of the four norm ops; memcheck and racecheck
# of the four ops' mid_float32 pieces (rows of 16385-65544: the narrow float32 clusters of 2 and 4
# blocks, the same kernels that clusters of 8 run at rows of 131072; racecheck of long_float32
# takes some 300 s alone, 2026-11-29j); the forward of the four ops with HEAD's norm.cuh
# (`-norm-f32-pushes-main-variant.diff`, the change reversed) timed before and after the tree,
# bfloat16's row of 65536 as the control. Keep it only if the tests pass, the sanitizer is clean
# and the float32 cells are faster than both HEAD timings.
#   timeout 580 bash docs/h200-runs/2026-11-29j-norm-f32-pushes-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
grep -q "constexpr bool kForwardClusterPushes = sizeof(T) == 4;" template/workspace/include/opgen/norm.cuh \
  || { echo "apply the variant to the tree first (see the header)"; exit 2; }
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  SANITIZE_TOOLS="memcheck racecheck" SANITIZE_PIECES="mid_float32" SANITIZE_TIMEOUT=200 \
  NORMTIMES_FORWARD=1 NORMTIMES_EACH_S=90 NORMTIMES_REPEAT=1 \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29j-norm-f32-pushes-main-variant.diff" \
  NORMTIMES_SHAPES="float32 4096x32768 2048x65536 1024x131072 bfloat16 4096x65536" \
  timeout 570 bash scripts/gpu_session.sh test,sanitize,normtimes layernorm rmsnorm add_layernorm add_rmsnorm
echo "== session exit $? at $SECONDS s"

#!/usr/bin/env bash
# Prepared in 2026-11-29j, not run (its device time was spent). Issue 21, timing: the forward's
# narrow float32 clusters reducing by pushes (`-norm-f32-pushes-variant.diff`: kForwardClusterPushes
# per dtype, true for float32; 16-bit rows and one-block rows keep their kernels), which one
# timing-only call of 2026-11-29j (`-norm-narrow-pushes-normtimes.log`, every dtype on pushes)
# measured 7-8% faster for LayerNorm float32 (rows of 32768 297.0 -> 274.4 us, 131072 311.2 ->
# 288.0) and slower for bfloat16. Here for all four norm ops, the variant timed before and after
# the tree; bfloat16's row of 65536 as the control (the same kernels on both sides). nvcc 13.0,
# sm_90a: the float32 pushes kernel of each of the four ops spills nothing (layernorm's: 64
# registers).
# If it holds: `git apply` the diff to generated_ops and the same hunks to
# template/workspace/include/opgen/norm.cuh, then every CUDA test of the four ops and
# compute-sanitizer (memcheck and racecheck, pieces mid_float32 and long_float32) before it lands.
#   timeout 420 bash docs/h200-runs/2026-11-29j-norm-f32-pushes-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
NORMTIMES_FORWARD=1 NORMTIMES_EACH_S=90 NORMTIMES_REPEAT=1 \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29j-norm-f32-pushes-variant.diff" \
  NORMTIMES_SHAPES="float32 4096x32768 2048x65536 1024x131072 bfloat16 4096x65536" \
  timeout 410 bash scripts/gpu_session.sh normtimes layernorm rmsnorm add_layernorm add_rmsnorm
echo "== session exit $? at $SECONDS s"

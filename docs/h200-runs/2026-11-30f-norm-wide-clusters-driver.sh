#!/usr/bin/env bash
# Prepared in 2026-11-30 (no device time left to run it). Issue 21, timing only: 2026-11-30e kept
# one block of 1024 threads for the forward's rows a cluster of 2 took, where that cluster waits at
# barriers (kForwardWideBlock: RMSNorm's forms, LayerNorm's 16-bit rows; 3-4% faster). This asks
# whether the longer rows gain the same way: every row a cluster holds, in clusters of wide blocks
# (half as many blocks, each with twice the threads), for the same ops, reducing by pushes
# (`-norm-wide-clusters-pushes-variant.diff`: the wide clusters' kernels, none new) or by
# barriers (`-barriers-variant.diff`: new kernels, the wide ones without pushes; nvcc 13.0, sm_90a:
# none spills with parameters in x's dtype, LayerNorm's 16-bit rows with float32 ones 12 bytes).
# Rows touched:
# float32 from 32769 and 16-bit from 65537 (to 524288 / 1048576), of rmsnorm, add_rmsnorm (float32)
# and layernorm (16-bit); float32 rows of 262144 already take wide clusters (of 8, by pushes).
# The tree is HEAD; the first variant is timed again after it. Keep a variant only where it beats
# both HEAD timings, then test it (every CUDA test, the long pieces under memcheck and racecheck).
# First, every CUDA test of the changed norm ops and of the two ReLU networks at HEAD: 564ad05's
# review mend (host launch code only: active_clusters' one-block clusters, the MLP backward's
# scratch layout) has not run on a GPU yet.
#   timeout 580 bash docs/h200-runs/2026-11-30f-norm-wide-clusters-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
TEST_SPLIT=1 TEST_K="cuda" NORMTIMES_OPS="layernorm rmsnorm add_rmsnorm" \
  NORMTIMES_FORWARD=1 NORMTIMES_EACH_S=120 NORMTIMES_REPEAT=1 \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-30f-norm-wide-clusters-pushes-variant.diff docs/h200-runs/2026-11-30f-norm-wide-clusters-barriers-variant.diff" \
  NORMTIMES_SHAPES="float32 2048x65536 1024x131072 512x262144 bfloat16 4096x65536 2048x131072 1024x262144" \
  timeout 570 bash scripts/gpu_session.sh test,normtimes layernorm rmsnorm add_rmsnorm mlp_seed mlp_64x4
echo "== session exit $? at $SECONDS s"

#!/usr/bin/env bash
# Issue 21, timing only, on the last minutes of 2026-11-29j's device time: the forward's narrow
# clusters (2-8 blocks of 512 threads) reducing by pushes (kForwardClusterPushes=true) instead of
# cluster barriers, whose wait (an acquire) invalidates L1 every row, so each row's weight and
# bias packs come from L2 again (2026-11-29h). Pushes complete on the block's own mbarrier. Last
# timed in 2026-11-25d, before the clusters looped over rows and the parameters' changes of
# 2026-11-29h/i; nvcc 13.0 spills 4-24 bytes a thread in 15 of layernorm's 97 forward kernels
# with it (local ptxas; the base's not compared). Not tested: if faster, every CUDA test and the
# sanitizer first.
#   timeout 175 bash docs/h200-runs/2026-11-29j-norm-narrow-pushes-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
NORMTIMES_FORWARD=1 NORMTIMES_VARIANTS="kForwardClusterPushes=true" \
  NORMTIMES_SHAPES="bfloat16 4096x65536 2048x131072 float32 4096x32768 1024x131072" \
  timeout 170 bash scripts/gpu_session.sh normtimes layernorm add_layernorm
echo "== session exit $? at $SECONDS s"

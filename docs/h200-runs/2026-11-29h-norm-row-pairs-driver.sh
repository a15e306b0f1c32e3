#!/usr/bin/env bash
# 2026-11-29h, after `-norm-forward-params-driver.sh`: the forward without reading its parameters
# ran the clusters at 84-94% of copy with pushes (LayerNorm bfloat16 262144 76 -> 94), so each
# row's second read of the weight and bias from L2 is most of the clusters' gap. The tree now
# holds kForwardClusterRows rows at once over clusters (each thread the same columns of each, the
# parameters' packs loaded once for both; cluster blocks twice as many), 1 as built here.
# Variants built beside the tree, timed before it, the forward only:
#   0 kForwardClusterRows=2 with pushes (no L1 invalidation: the halved parameters may stay there);
#   1 kForwardClusterRows=2 under the cluster barriers;
#   2 pushes alone;
#   3 a diff back to main's norm.cuh (the tree at 1 row must time the same); the tree and that diff
#     were not kept (the change was reverted after this call), so this driver does not rerun.
#   timeout 575 bash docs/h200-runs/2026-11-29h-norm-row-pairs-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
NORMTIMES_FORWARD=1 NORMTIMES_EACH_S=100 \
  NORMTIMES_VARIANTS="kForwardClusterRows=2,kForwardClusterPushes=true kForwardClusterRows=2 kForwardClusterPushes=true docs/h200-runs/2026-11-29h-norm-forward-main-variant.diff" \
  NORMTIMES_SHAPES="bfloat16 262144x1024 131072x2048 8192x32768 4096x65536 2048x131072 1024x262144 float32 8192x16384 4096x32768 2048x65536 1024x131072 512x262144" \
  timeout 565 bash scripts/gpu_session.sh normtimes layernorm rmsnorm add_layernorm
echo "== session exit $? at $SECONDS s"

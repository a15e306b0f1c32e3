#!/usr/bin/env bash
# 2026-11-29h. The forward over clusters writes its row pack by pack, each pack's weight and bias
# loaded from L2 after the previous pack's store (8 round trips in series a row): the cluster
# barrier's wait is an acquire that invalidates L1 (CCTL.IVALL in the SASS, twice a row), and its
# arrive a release (MEMBAR.ALL.GPU), so the parameters never stay in L1 across rows.
# Variants, built beside the tree and timed before it, the forward only (NORMTIMES_FORWARD=1):
#   0 `-norm-params-l1-prefetch-variant.diff`: every parameter pack of the row prefetched into L1
#     (prefetch.global.L1) as the output loop starts, after the barrier's wait;
#   1 the same at the row's start, with the reductions by pushes (kForwardClusterPushes: mbarrier
#     waits, no L1 invalidation, no GPU-wide fence);
#   2 as 1, with the rows' loads through L2 only (`2026-11-29g-norm-forward-ldcg-variant.diff`);
#   3 pushes alone;
#   4 as 0, with the rows' loads through L2 only.
# NORMTIMES_REPEAT=1: variant 0 timed again after the tree.
#   timeout 575 bash docs/h200-runs/2026-11-29h-norm-forward-l1-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
pf=docs/h200-runs/2026-11-29h-norm-params-l1-prefetch-variant.diff
cg=docs/h200-runs/2026-11-29g-norm-forward-ldcg-variant.diff
NORMTIMES_FORWARD=1 NORMTIMES_REPEAT=1 NORMTIMES_EACH_S=120 \
  NORMTIMES_VARIANTS="$pf $pf,kForwardClusterPushes=true,kOptParamsPrefetchAtRowStart=1 $pf,$cg,kForwardClusterPushes=true,kOptParamsPrefetchAtRowStart=1 kForwardClusterPushes=true $pf,$cg" \
  NORMTIMES_SHAPES="bfloat16 8192x32768 4096x65536 2048x131072 1024x262144 float32 4096x32768 2048x65536 1024x131072 512x262144" \
  timeout 565 bash scripts/gpu_session.sh normtimes layernorm rmsnorm
echo "== session exit $?"

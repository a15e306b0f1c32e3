#!/usr/bin/env bash
# Issue 21 (2026-11-30d), timing only (run; kept in part as kForwardWideBlock, see 2026-11-30e):
# rows a cluster of 2 blocks of 512 threads took in the
# forward (float32 16385-32768, bfloat16 32769-65536; float32 with a residual from 8193) in one
# block of kWideClusterThreads (1024) instead, no cluster (`-norm-wide-block-variant.diff`: the
# kernels are the wide clusters' own, launched as clusters of 1; none new). The tree holds the
# change (put it there first: git apply the variant diff, and the same with
# s#generated_ops/include#template/workspace/include#); HEAD's norm.cuh is the reversed diff
# (`-main-variant.diff`), timed before and after the tree. The forward of the four ops:
#   timeout 580 bash docs/h200-runs/2026-11-30d-norm-wide-block-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
grep -q "Rows a cluster of 2 would take: one wider block" template/workspace/include/opgen/norm.cuh \
  || { echo "apply the variant to the tree first (see the header)"; exit 2; }
NORMTIMES_FORWARD=1 NORMTIMES_EACH_S=100 NORMTIMES_REPEAT=1 \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-30d-norm-wide-block-main-variant.diff" \
  NORMTIMES_SHAPES="float32 4096x32768 8192x16384 2048x65536 bfloat16 4096x65536" \
  timeout 570 bash scripts/gpu_session.sh normtimes layernorm rmsnorm add_layernorm add_rmsnorm
echo "== session exit $? at $SECONDS s"

#!/usr/bin/env bash
# 2026-11-29h, after `-norm-forward-l1-driver.sh` (prefetching the parameters into L1 did not help).
# Part 1, the forward only (NORMTIMES_FORWARD=1), variants built beside the tree, timed before it:
#   0 `-norm-forward-noparams-probe.diff` (timing only, results wrong): rows written without
#     reading the weight and bias. How much of the clusters' gap to the one-block rows' 96% is
#     the parameters' loads?
#   1 the same with the reductions by pushes (kForwardClusterPushes=true);
#   2 `2026-11-29g-norm-forward-params-ahead-variant.diff`: each pack's parameters loaded one
#     pack ahead of the stores (spills 56-72 bytes a thread in float32, nvcc 13.0).
# Part 2, `2026-11-29g-norm-l1-driver.sh` as prepared there (the training step kernel by kernel):
# the largest shared-memory carveout, and the backward's row loads through L2 only.
#   timeout 575 bash docs/h200-runs/2026-11-29h-norm-forward-params-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
np=docs/h200-runs/2026-11-29h-norm-forward-noparams-probe.diff
NORMTIMES_FORWARD=1 NORMTIMES_EACH_S=100 \
  NORMTIMES_VARIANTS="$np $np,kForwardClusterPushes=true docs/h200-runs/2026-11-29g-norm-forward-params-ahead-variant.diff" \
  NORMTIMES_SHAPES="bfloat16 8192x32768 4096x65536 2048x131072 1024x262144 float32 8192x16384 4096x32768 2048x65536 1024x131072 512x262144" \
  timeout 250 bash scripts/gpu_session.sh normtimes layernorm rmsnorm
echo "== part 1 exit $? at $SECONDS s"
mv "$OUT/normtimes.log" "$OUT/normtimes-forward.log"
timeout $((565 - SECONDS)) bash docs/h200-runs/2026-11-29g-norm-l1-driver.sh
echo "== part 2 exit $? at $SECONDS s"

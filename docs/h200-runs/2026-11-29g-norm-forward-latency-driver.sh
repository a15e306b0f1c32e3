#!/usr/bin/env bash
# Prepared in 2026-11-29g, not run. The forward at rows of 32768-262144 (61-89% of copy) writes
# its row pack by pack: nvcc issues each pack's weight (and bias) loads only after the previous
# pack's store (volatile assembly with a memory clobber), so a thread makes 8 L2 round trips in
# series a row while no row's loads are in flight (SASS of forward_rows_kernel<float, float,
# true, false, 4, 32, 1024>: LDG w, LDG b, STG y, LDG w, ...). Two variants, built beside the
# tree and timed before it, the forward only (NORMTIMES_FORWARD=1):
#   `-norm-forward-params-ahead-variant.diff` (kOptParamsAhead=1): each pack's parameters loaded
#     one pack ahead of the stores; nvcc 13.0 spills 56-72 bytes a thread in the float32 kernels,
#     28-40 in bfloat16's, 308-320 with float32 parameters of bfloat16 rows;
#   `-norm-forward-ldcg-variant.diff`: the rows' loads through L2 only (ld.global.cg), so the
#     weight and bias a block reads every row may stay in L1 (no spills, as the tree).
#   timeout 575 bash docs/h200-runs/2026-11-29g-norm-forward-latency-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
NORMTIMES_FORWARD=1 \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29g-norm-forward-params-ahead-variant.diff docs/h200-runs/2026-11-29g-norm-forward-ldcg-variant.diff" \
  NORMTIMES_SHAPES="bfloat16 8192x32768 4096x65536 2048x131072 1024x262144 float32 4096x32768 2048x65536 1024x131072 512x262144" \
  timeout 565 bash scripts/gpu_session.sh normtimes layernorm rmsnorm
echo "== session exit $?"

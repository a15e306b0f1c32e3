#!/usr/bin/env bash
# Prepared in 2026-11-29g, not run. Is L1's size what LayerNorm's backward loses to RMSNorm's?
# LayerNorm's column sums take twice RMSNorm's shared memory (bfloat16 blocks of 512: 80 against
# 48 KB, two an SM): if the driver picks the smallest carveout that holds two blocks, that leaves
# it less L1 (about 92 against 156 KB), where the rows' loads land; dropping the bias sums' adds
# but not their memory cost it only 1-10% (`-norm-ln-nobias-sums-probe-normtimes.log`). Two
# variants, built beside the tree and timed before it (the training step kernel by kernel):
#   `-norm-carveout-max-variant.diff`: every kernel asks for the largest carveout (smallest L1):
#     RMSNorm slowing to LayerNorm's times says L1 matters;
#   `-norm-backward-ldcg-variant.diff`: the backward's row loads through L2 only (ld.global.cg,
#     SASS LDG.E.128.STRONG.GPU; registers and spills as the tree's, nvcc 13.0 sm_90a), no L1
#     line allocated: LayerNorm nearing RMSNorm says it helps.
#   timeout 575 bash docs/h200-runs/2026-11-29g-norm-l1-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29g-norm-carveout-max-variant.diff docs/h200-runs/2026-11-29g-norm-backward-ldcg-variant.diff" \
  NORMTIMES_SHAPES="bfloat16 65536x4096 32768x8192 8192x32768 float32 16384x8192" \
  timeout 565 bash scripts/gpu_session.sh normtimes layernorm rmsnorm
echo "== session exit $?"

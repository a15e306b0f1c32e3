#!/usr/bin/env bash
# The Hopper MLP forward against three variants of its headers (.variants/, untracked while tried):
#   handoff: warpgroup g > 0 starts its first tile's MMAs only after warpgroup g - 1 finished its
#            first tile's first layer (a named barrier, once a kernel: the warpgroups run their
#            phases out of step from then on, as a fixed start delay did in 2026-11-25d);
#   trunc:   float32 (TF32) activations handed to the next layer as they are, for the tensor cores
#            to truncate, instead of cvt.rna rounding (2 instructions a value) -- a timing probe;
#   both.
#   timeout 560 bash docs/h200-runs/2026-11-28b-mlp-variants-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
MLPQUICK_VARIANTS=".variants/handoff .variants/trunc .variants/both" \
  MLPQUICK_ARGS="--rows 65536 262144 1048576 --forward-only --profile-rows 0" \
  MLPQUICK_ARGS_trunc="--rows 65536 262144 1048576 --forward-only --profile-rows 0 --dtypes float32" \
  MLPQUICK_ARGS_both="--rows 65536 262144 1048576 --forward-only --profile-rows 0 --dtypes float32" \
  timeout 400 bash scripts/gpu_session.sh mlpquick mlp_seed mlp_64x4
# The tree's first timing again, after the variants (run-to-run spread within one call).
PYTHONPATH="$GPU_WORK${PYTHONPATH:+:$PYTHONPATH}" timeout 60 python3 scripts/mlp_quick_bench.py \
  "$GPU_WORK/generated_ops" mlp_seed mlp_64x4 --rows 65536 262144 1048576 --forward-only --profile-rows 0 \
  2>&1 | tee -a "$OUT/mlpquick.log"

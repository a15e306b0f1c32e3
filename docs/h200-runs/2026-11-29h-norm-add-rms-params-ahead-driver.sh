#!/usr/bin/env bash
# Prepared in 2026-11-29h, not run (218 s of device time left, too few to start a machine).
# Timing only: add_rmsnorm's forward with
# its weight a pack ahead as RMSNorm's (`-norm-add-rms-params-ahead-variant.diff`: the residual
# form admitted by forward_params_ahead; no spills, nvcc 13.0 sm_90a), built beside the tree and
# timed before it. Not tested: a lead for the next session.
#   timeout 200 bash docs/h200-runs/2026-11-29h-norm-add-rms-params-ahead-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
NORMTIMES_FORWARD=1 NORMTIMES_EACH_S=40 \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29h-norm-add-rms-params-ahead-variant.diff" \
  NORMTIMES_SHAPES="bfloat16 8192x32768 4096x65536 1024x262144 float32 4096x32768 2048x65536 1024x131072 512x262144" \
  timeout 195 bash scripts/gpu_session.sh normtimes add_rmsnorm
echo "== session exit $? at $SECONDS s"

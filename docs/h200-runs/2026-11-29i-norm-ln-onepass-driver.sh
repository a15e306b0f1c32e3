#!/usr/bin/env bash
# Prepared in 2026-11-29i, not run (226 s of device time left). Timing only: LayerNorm's per-thread
# statistics in one pass (`-norm-ln-onepass-variant.diff`: the sum and squared deviations of a
# thread's values from its first value, then its mean and m2; one widening and one pass a value
# fewer, 56 instructions fewer in the bfloat16 cluster kernel's SASS, no spills, nvcc 13.0 sm_90a)
# built beside the tree and timed before and after it, at rows of a block and over clusters.
# Not tested: if it is faster, apply it and run every CUDA test of the norm ops (the constant-row,
# huge/tiny and one-column cases above all) before keeping it. Its cost in accuracy, by a float32
# emulation of one thread's 64 values (`-norm-ln-onepass-numerics.py`, worst of 300 rows each):
# the squared deviations' relative error 3.3e-6 against two-pass 4.1e-7 for normal values, 4.3e-5
# against 5.2e-7 where the thread's first value is an outlier (1e3 among N(0, 1)); better, 2.3e-6
# against 1.8e-5, for values offset by 1e4. Weigh that against the time it saves.
#   timeout 400 bash docs/h200-runs/2026-11-29i-norm-ln-onepass-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
NORMTIMES_FORWARD=1 NORMTIMES_EACH_S=90 NORMTIMES_REPEAT=1 \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29i-norm-ln-onepass-variant.diff" \
  NORMTIMES_SHAPES="bfloat16 65536x4096 16384x16384 4096x65536 2048x131072 1024x262144 float32 32768x8192 4096x32768 1024x131072" \
  timeout 390 bash scripts/gpu_session.sh normtimes layernorm add_layernorm
echo "== session exit $? at $SECONDS s"

#!/bin/bash
# Where LayerNorm's forward loses to RMSNorm's at the same shapes (2026-11-29d: 5-12 points of
# copy): two timing-only variants of norm.cuh (their results are wrong; the diffs beside this
# file), each built beside the tree: -nobias.diff (LayerNorm's output loop without the bias's
# load and add) and -sums.diff (the row's statistics by two plain sums in place of the Moments
# merge). The forward alone against eager and a copy (scripts/norm_forward_times.py).
export PYTHONUNBUFFERED=1
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
NORMTIMES_FORWARD=1 NORMTIMES_OPS="layernorm rmsnorm" \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29d-norm-ln-parts-nobias.diff docs/h200-runs/2026-11-29d-norm-ln-parts-sums.diff" \
  NORMTIMES_SHAPES="float32 8192x16384 4096x32768 2048x65536 bfloat16 8192x32768 4096x65536 2048x131072" \
  bash scripts/gpu_session.sh normtimes layernorm rmsnorm
echo "== session exit $?"

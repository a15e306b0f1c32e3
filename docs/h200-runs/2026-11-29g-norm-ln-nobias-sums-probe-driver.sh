#!/usr/bin/env bash
# A timing-only probe (its dbias is wrong): LayerNorm's backward without the bias column sums in
# shared memory (`-norm-ln-nobias-sums-probe.diff`), against the tree, bfloat16 rows of 8192 and
# 32768, where LayerNorm's backward is 10-20% slower than RMSNorm's (which has no bias sums).
#   timeout 575 bash docs/h200-runs/2026-11-29g-norm-ln-nobias-sums-probe-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29g-norm-ln-nobias-sums-probe.diff" NORMTIMES_REPEAT=1 \
  NORMTIMES_SHAPES="bfloat16 32768x8192 8192x32768" \
  timeout 560 bash scripts/gpu_session.sh normtimes layernorm
echo "== session exit $?"

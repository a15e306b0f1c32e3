#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck of the backward's cluster pushes: layernorm and
# add_rmsnorm, pieces mid_float32 (clusters of 4-8 and wide clusters), long_bfloat16 (clusters and
# the slices kernel) and long_float32 (the slices kernel).
#   timeout 575 bash docs/h200-runs/2026-11-29f-norm-pushes-sanitize-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
SANITIZE_OPS="layernorm add_rmsnorm" SANITIZE_TOOLS="memcheck racecheck" \
  SANITIZE_PIECES="mid_float32 long_bfloat16 long_float32" SANITIZE_TIMEOUT=240 \
  timeout 560 bash scripts/gpu_session.sh sanitize layernorm add_rmsnorm
echo "== session exit $?"

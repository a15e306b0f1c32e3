#!/usr/bin/env bash
# Prepared for the next session (not run: this session's device time was spent). The slices
# kernel's rows (float32 131072, bfloat16 262144) on clusters of 16 blocks of 1024 threads
# (`-norm-wide16-backward-variant.diff`), now that the backward's cluster reductions push onto
# mbarriers: in 2026-11-29e, under cluster barriers, those clusters went both ways. The training
# step kernel by kernel, the variant built beside the tree and timed before it. The variant
# compiles (nvcc 13.0, sm_90a, here); were it kept, every CUDA test and the sanitizer pieces
# long_float32 and long_bfloat16 of the four ops come next.
#   timeout 575 bash docs/h200-runs/2026-11-29f-norm-wide16-backward-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
NORMTIMES_OPS="layernorm rmsnorm add_layernorm add_rmsnorm" \
  NORMTIMES_VARIANTS="docs/h200-runs/2026-11-29f-norm-wide16-backward-variant.diff" NORMTIMES_REPEAT=1 \
  NORMTIMES_SHAPES="float32 2048x65536 1024x131072 bfloat16 2048x131072 1024x262144" \
  timeout 560 bash scripts/gpu_session.sh normtimes layernorm rmsnorm add_layernorm add_rmsnorm
echo "== session exit $?"

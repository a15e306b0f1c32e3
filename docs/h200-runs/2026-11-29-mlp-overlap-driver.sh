#!/usr/bin/env bash
# The Hopper MLP forward with the next layer's early k steps multiplying during a layer's second
# epilogue (where the registers allow it: Plan::overlaps): every CUDA test and memcheck of the two
# networks that take the Hopper forward, the forward and the training step against the previous
# mlp_hopper.cuh (.variants/base, untracked) in the same call, then the previous header's forward
# again (the spread within one call). Last, opgen build's precompiled torch headers with this
# machine's GCC and torch (three CPU ops, one job: 6 C++ files, at the threshold of 5 a job).
#   timeout 590 bash docs/h200-runs/2026-11-29-mlp-overlap-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
TEST_K=cuda TEST_SPLIT=1 SANITIZE_OPS="mlp_seed mlp_64x4" SANITIZE_TOOLS="memcheck" SANITIZE_TIMEOUT=120 \
  MLPQUICK_VARIANTS=".variants/base" MLPQUICK_ARGS="--rows 65536 262144 1048576 --profile-rows 0" \
  timeout 450 bash scripts/gpu_session.sh test,sanitize,mlpquick mlp_seed mlp_64x4
v=$GPU_WORK-variant-base
PYTHONPATH="$v${PYTHONPATH:+:$PYTHONPATH}" timeout 50 python3 scripts/mlp_quick_bench.py "$v/generated_ops" \
  mlp_seed mlp_64x4 --rows 65536 262144 1048576 --forward-only --profile-rows 0 \
  2>&1 | sed 's/^/base again: /' | tee -a "$OUT/mlpquick.log"
pch=/tmp/opgen-pch; rm -rf "$pch"; mkdir -p "$pch"
( cd "$pch" && opgen new relu && opgen new layernorm && opgen new mish --formula "x*tanh(log(1+exp(x)))" \
  && timeout 70 opgen build --cpu-only -j 1 -v relu layernorm mish \
  && ls -la generated_ops/build/pch/* && python3 -c "import generated_ops as g; print('built', g.built_ops)" ) \
  > "$OUT/pch.log" 2>&1
echo "pch check: exit $?" | tee -a "$OUT/pch.log"

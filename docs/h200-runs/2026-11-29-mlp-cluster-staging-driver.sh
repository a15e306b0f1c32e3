#!/usr/bin/env bash
# The Hopper MLP forward staging its weights in clusters of two blocks (each reads half of them
# from L2 and writes it into both blocks' shared memory): every CUDA test, memcheck and racecheck
# of the two networks that take the Hopper forward, the forward and the training step against the
# previous mlp_hopper.cuh (.variants/base, untracked) in the same call, then the previous header's
# forward again (the spread within one call). Last, opgen build's precompiled torch headers with
# this machine's GCC and torch 2.11 (three CPU ops, one job), now with torch's own -std.
#   timeout 590 bash docs/h200-runs/2026-11-29-mlp-cluster-staging-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
TEST_K=cuda TEST_SPLIT=1 SANITIZE_OPS="mlp_seed mlp_64x4" SANITIZE_TOOLS="memcheck racecheck" SANITIZE_TIMEOUT=100 \
  MLPQUICK_VARIANTS=".variants/base" MLPQUICK_ARGS="--rows 65536 262144 1048576 --profile-rows 0" \
  timeout 450 bash scripts/gpu_session.sh test,sanitize,mlpquick mlp_seed mlp_64x4
v=$GPU_WORK-variant-base
PYTHONPATH="$v${PYTHONPATH:+:$PYTHONPATH}" timeout 50 python3 scripts/mlp_quick_bench.py "$v/generated_ops" \
  mlp_seed mlp_64x4 --rows 65536 262144 1048576 --forward-only --profile-rows 0 \
  2>&1 | sed 's/^/base again: /' | tee -a "$OUT/mlpquick.log"
python3 -c "import copier" 2>/dev/null || export PYTHONPATH=/tmp/site  # gpu_session.sh installed it there
pch=/tmp/opgen-pch; rm -rf "$pch"; mkdir -p "$pch"
( cd "$pch" && opgen new relu && opgen new layernorm && opgen new mish --formula "x*tanh(log(1+exp(x)))" \
  && timeout 100 opgen build --cpu-only -j 1 -v relu layernorm mish \
  && ls -la generated_ops/build/pch/* && (cd generated_ops/build/ops/layernorm && ninja -t deps | grep -c "torch/library.h") ; \
  python3 -c "import generated_ops as g, torch; print('built', g.built_ops); print(g.relu(torch.tensor([-1.0, 2.0])))" ) \
  > "$OUT/pch.log" 2>&1
echo "pch check: exit $?" | tee -a "$OUT/pch.log"

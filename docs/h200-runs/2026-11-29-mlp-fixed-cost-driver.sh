#!/usr/bin/env bash
# Where the Hopper MLP forward's fixed cost goes (the small batches' cells of issue 23): the
# forward alone (profiler), event-timed and back to back at 1, 3 and 7.8 passes' rows and at 2^18,
# of the tree and of a timing-only variant that does not stage the weights (.variants/nostage,
# untracked: wrong results, the staging's cost by difference). Then opgen build's precompiled torch
# headers with this machine's GCC and torch (three CPU ops, one job: 6 C++ files, past the 5 a job).
#   timeout 590 bash docs/h200-runs/2026-11-29-mlp-fixed-cost-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
MLPQUICK_VARIANTS=".variants/nostage" \
  MLPQUICK_ARGS="--rows 8448 25344 65536 262144 --forward-only --profile-rows 0 --floor" \
  timeout 420 bash scripts/gpu_session.sh mlpquick mlp_seed mlp_64x4
python3 -c "import copier" 2>/dev/null || export PYTHONPATH=/tmp/site  # gpu_session.sh installed it there
pch=/tmp/opgen-pch; rm -rf "$pch"; mkdir -p "$pch"
( cd "$pch" && opgen new relu && opgen new layernorm && opgen new mish --formula "x*tanh(log(1+exp(x)))" \
  && timeout 100 opgen build --cpu-only -j 1 -v relu layernorm mish \
  && ls -la generated_ops/build/pch/* && (cd generated_ops/build/ops/layernorm && ninja -t deps | grep -c "torch/library.h") ; \
  python3 -c "import generated_ops as g, torch; print('built', g.built_ops); print(g.relu(torch.tensor([-1.0, 2.0])))" ) \
  > "$OUT/pch.log" 2>&1
echo "pch check: exit $?" | tee -a "$OUT/pch.log"

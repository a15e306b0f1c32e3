#!/usr/bin/env bash
# One GPU-machine session: install opgen, render every recipe into a fresh workspace, build,
# run every generated test (none may skip for want of a GPU), then benchmark. Device time is
# scarce, so everything runs in one call; logs and results land in $OUT.
#
#   bash scripts/gpu_session.sh [test|bench|all] [OPS...]      (default: all softmax relu gelu my_op row_op)
set -uo pipefail
mode=${1:-all}; shift || true
ops=("$@"); [ ${#ops[@]} -eq 0 ] && ops=(softmax relu gelu my_op row_op)
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
repo=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONUNBUFFERED=1

# The GPU machine has no network: copier and its dependencies travel as wheels in .whl/.
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site "$repo"/.whl/*.whl && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e "$repo" >/dev/null
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } | tee "$OUT/build.log"

work=$(mktemp -d); cd "$work"
for op in "${ops[@]}"; do
  case $op in
    row_op) opgen new "$op" --kind rowwise ;;
    mish) opgen new mish --formula "x*tanh(log(1+exp(x)))" ;;
    relu_scale) opgen new relu_scale --formula "max(x, 0)*alpha" --param alpha=1.5 ;;
    *) opgen new "$op" ;;
  esac || exit 1
done
opgen build -j 16 "${ops[@]}" 2>&1 | tee -a "$OUT/build.log" || exit 1

status=0
if [ "$mode" != bench ]; then
  opgen test "${ops[@]}" 2>&1 | tee "$OUT/test.log" | tail -40
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  if grep -q "no CUDA GPU found" "$OUT/test.log"; then echo "CUDA tests were skipped on a GPU machine"; status=1; fi
fi
if [ "$mode" != test ]; then
  for op in "${ops[@]}"; do
    case $op in softmax|relu|gelu|mish|relu_scale) ;; *) continue ;; esac
    mkdir -p "$OUT/benchmarks/$op"
    opgen bench "$op" --json "$OUT/benchmarks/$op/$op.json" --plot "$OUT/benchmarks/$op/$op.png" \
      --markdown "$OUT/benchmarks/$op/$op.md" >> "$OUT/bench.log" 2>&1
  done
  # One file back instead of three per op (the device returns at most eight).
  tar -czf "$OUT/benchmarks.tar.gz" -C "$OUT" benchmarks && rm -rf "$OUT/benchmarks"
fi
exit $status

#!/usr/bin/env bash
# Where the fused MLP's Hopper forward spends a small batch: Nsight Compute (full set) of the
# inference forward kernel of mlp_seed (bfloat16 at 2^16 rows, float32/TF32 at 2^16 and 2^18) and
# mlp_64x4 (float32/TF32 at 2^16), after the quick timing of both against eager.
#   timeout 560 bash docs/h200-runs/2026-11-28b-mlp-ncu-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
MLPQUICK_ARGS="--rows 65536 262144 --forward-only --profile-rows 0" \
  bash scripts/gpu_session.sh mlpquick mlp_seed mlp_64x4
ws=$GPU_WORK/generated_ops
profile() {  # op dtype rows
  timeout 120 ncu --clock-control none --set full -k regex:forward_kernel -s 2 -c 1 \
    python3 scripts/mlp_step.py "$ws" "$1" --dtype "$2" --rows "$3" --forward-only --steps 3 \
    > "$OUT/ncu-$1-$2-$3.log" 2>&1
  echo "ncu $1 $2 $3: exit $?"
}
profile mlp_seed bfloat16 65536
profile mlp_seed float32 262144
profile mlp_seed float32 65536
profile mlp_64x4 float32 65536

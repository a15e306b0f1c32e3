#!/usr/bin/env bash
# compute-sanitizer racecheck of what no racecheck had covered: the Hopper MLP forward fetching
# the next tile's x after its first MMAs (0525ad4: mlp_seed and mlp_64x4, every kernel path of
# their test modules), and the norm forward's wide float32 clusters keeping the bias in shared
# memory (c0e7a83, 9aa24e8: layernorm and add_layernorm, pieces long_float32 and long_bfloat16,
# rows of 65545-262152, whose racecheck 2026-11-29i cut at 150 s). Nothing else runs beside them.
#   timeout 590 bash docs/h200-runs/2026-11-29j-racecheck-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
SANITIZE_TOOLS="racecheck" SANITIZE_PIECES="long_float32 long_bfloat16" SANITIZE_TIMEOUT=440 \
  timeout 580 bash scripts/gpu_session.sh sanitize mlp_seed mlp_64x4 layernorm add_layernorm
echo "== exit $? at $SECONDS s"

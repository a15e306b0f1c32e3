#!/usr/bin/env bash
# Issue 21 (2026-11-30e), on the tree with kForwardWideBlock (2026-11-30d's lead, kept where it
# measured faster: rows a cluster of 2 would take in the forward, in one block of 1024 threads
# where those clusters reduce by barriers; the kernels are the wide clusters' own, so the sm_90a
# cubins hold the same bodies as HEAD's): every CUDA test of the four norm ops, memcheck and
# racecheck of the changed ops' mid pieces (rows of 16392-65544), then the quick sweep.
#   timeout 590 bash docs/h200-runs/2026-11-30e-norm-wide-block-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
TEST_SPLIT=1 TEST_K="cuda" SANITIZE_OPS="layernorm rmsnorm add_rmsnorm" \
  SANITIZE_TOOLS="memcheck racecheck" SANITIZE_PIECES="mid_float32 mid_bfloat16" SANITIZE_TIMEOUT=150 \
  timeout 400 bash scripts/gpu_session.sh test,sanitize layernorm rmsnorm add_layernorm add_rmsnorm
echo "== tests and sanitizer exit $? at $SECONDS s"
mkdir -p "$OUT/t" && mv "$OUT"/*.log "$OUT/t/"
timeout $((585 - SECONDS)) bash docs/h200-runs/2026-11-29i-norm-sweep-driver.sh > "$OUT/sweep-driver.log" 2>&1
echo "== sweep exit $? at $SECONDS s"

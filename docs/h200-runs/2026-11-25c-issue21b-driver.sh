#!/bin/bash
# Issue 21's backward experiment (branch issue-21-bwd, 2026-11-25c), one H200 call: LayerNorm's
# training step kernel by kernel with kBackwardSumsFirst off (main's backward) and on (this tree),
# then every CUDA test of layernorm and add_rmsnorm and compute-sanitizer racecheck and memcheck
# of the pieces holding the changed kernels (blocks of 512 threads: rows of 4097-8200 in one block,
# 16384-65544 over clusters). Ran at d9e86b3, where norm.cuh had the constant kBackwardSumsFirst;
# it was removed afterwards (the path it switched on kept), so this variant no longer builds.
export OMP_NUM_THREADS=2 GPU_WORK=/tmp/opgen-gpu21b
began=$SECONDS
NORMTIMES_OPS=layernorm NORMTIMES_VARIANTS="kBackwardSumsFirst=false" \
  NORMTIMES_SHAPES="bfloat16 32768x8192 8192x32768 4096x65536 2048x131072 float32 32768x4096 4096x32768 2048x65536" \
  timeout "${TIMES_S:-170}" bash scripts/gpu_session.sh normtimes layernorm add_rmsnorm > "$OUT/session.log" 2>&1
echo "== normtimes exit $? at $((SECONDS - began)) s" | tee -a "$OUT/session.log"
grep -E "^== |rows_kernel" "$OUT/normtimes.log" | cut -c1-130
TEST_K=cuda TEST_SPLIT=1 SANITIZE_OPS="layernorm add_rmsnorm" SANITIZE_TOOLS="racecheck memcheck" \
  SANITIZE_PIECES="short_bfloat16 mid_bfloat16 mid_float32" SANITIZE_JOBS=6 SANITIZE_TIMEOUT=60 \
  bash scripts/gpu_session.sh test,sanitize layernorm add_rmsnorm >> "$OUT/session.log" 2>&1
echo "== test,sanitize exit $? at $((SECONDS - began)) s" | tee -a "$OUT/session.log"
grep -E "^== (test|sanitize)" "$OUT/session.log"

#!/bin/bash
# Issue 21's backward at long rows (branch issue-21-bwd2, 2026-11-25d), one H200 call at 6c434a3
# (kClusterPrefetch was removed afterwards: this first variant no longer builds; see
# docs/benchmarks/layernorm for the command that times the kept change):
# 1. LayerNorm's training step kernel by kernel (normtimes) with main's backward (variant 0: no L2
#    prefetch, the slices kernel's row-sum pass loading 2 packs ahead, no cluster prefetch), with
#    the slices kernel prefetching by lines from every thread (variant 1), and this tree (bulk
#    prefetch of the next row's slice, 4 packs ahead in the row-sum pass, the cluster backward
#    prefetching the row after the one it loads ahead).
# 2. Nsight Compute of the backward kernels, main's (variant 0) and this tree's.
# 3. Every CUDA test of layernorm and add_rmsnorm; compute-sanitizer memcheck and racecheck of the
#    pieces long_bfloat16 and long_float32 (the slices backward, clusters of 16), and memcheck of
#    steps with more rows than resident clusters (the prefetches run only there).
export OMP_NUM_THREADS=2 GPU_WORK=/tmp/opgen-gpu21b2
work=$GPU_WORK
began=$SECONDS
NORMTIMES_OPS=layernorm NORMTIMES_VARIANTS="kSlicePrefetch=0,kSliceSumsBatch=2,kClusterPrefetch=false kSlicePrefetch=1" \
  NORMTIMES_SHAPES="bfloat16 4096x65536 2048x131072 1024x262144 float32 2048x65536 1024x131072 512x262144" \
  timeout "${TIMES_S:-200}" bash scripts/gpu_session.sh normtimes layernorm add_rmsnorm > "$OUT/session.log" 2>&1
echo "== normtimes exit $? at $((SECONDS - began)) s" | tee -a "$OUT/session.log"
grep -E "^== |_kernel" "$OUT/normtimes.log" | cut -c1-140
export PYTHONPATH=/tmp/site
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for tree in "$work-norm-variant-0" "$work"; do
  echo "== ncu $tree" >> "$OUT/ncu.log"
  timeout "${NCU_S:-35}" "$ncu" --clock-control none -k regex:backward --launch-count 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section WarpStateStats --section LaunchStats \
    python3 scripts/norm_kernel_times.py --once "$tree/generated_ops" layernorm bfloat16 1024x262144 2048x131072 \
    >> "$OUT/ncu.log" 2>&1
  echo "exit $? at $((SECONDS - began)) s" >> "$OUT/ncu.log"
done
grep -E "^== ncu|^exit|backward_|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|L2 Hit" "$OUT/ncu.log" | cut -c1-140
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for op in layernorm add_rmsnorm; do
  ( PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "${MANY_S:-120}" "$sanitizer" --tool memcheck --error-exitcode 7 --print-limit 20 \
      python3 scripts/norm_kernel_times.py --once "$work/generated_ops" "$op" \
      bfloat16 200x32768 64x131072 40x262144 float32 200x32768 64x131072 40x262144 > "$work/many-$op.log" 2>&1
    echo "exit $? after $((SECONDS - began)) s" >> "$work/many-$op.log" ) &
done
TEST_K=cuda TEST_SPLIT=1 SANITIZE_OPS="layernorm add_rmsnorm" SANITIZE_TOOLS="racecheck memcheck" \
  SANITIZE_PIECES="long_bfloat16 long_float32" SANITIZE_JOBS=8 SANITIZE_TIMEOUT="${SAN_S:-90}" \
  bash scripts/gpu_session.sh test,sanitize layernorm add_rmsnorm >> "$OUT/session.log" 2>&1
echo "== test,sanitize exit $? at $((SECONDS - began)) s" | tee -a "$OUT/session.log"
wait
for op in layernorm add_rmsnorm; do
  { echo "== memcheck many rows $op"; cat "$work/many-$op.log"; } >> "$OUT/sanitize-pieces.log"
  echo "== memcheck many rows $op: $(grep -E 'ERROR SUMMARY' "$work/many-$op.log" | tail -1) $(tail -1 "$work/many-$op.log")"
done
grep -E "^== (test|sanitize)" "$OUT/session.log"

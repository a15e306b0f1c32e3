#!/bin/bash
# Issue 21 (2026-11-29b): the backward's column sums made in the row-sum pass
# (kRowPassSumsMinThreads, norm.cuh) against main's order (variant 0: 1024, i.e. off: blocks of
# 512 threads make them after the reduction, kSumsFirst) and against every block of 128 threads or
# more making them there (variant 1: 128). A training step kernel by kernel, the first variant timed
# again after the tree; then Nsight Compute's instruction counts of LayerNorm's bfloat16 backward
# at rows of 8192 for variant 0 and the tree.
export OMP_NUM_THREADS=2 GPU_WORK=/tmp/opgen-gpu21r
work=$GPU_WORK
began=$SECONDS
NORMTIMES_OPS="layernorm rmsnorm" NORMTIMES_REPEAT=1 \
  NORMTIMES_VARIANTS="kRowPassSumsMinThreads=1024 kRowPassSumsMinThreads=128" \
  NORMTIMES_SHAPES="bfloat16 262144x1024 65536x4096 32768x8192 8192x32768 float32 131072x1024 32768x4096 4096x32768" \
  timeout "${TIMES_S:-330}" bash scripts/gpu_session.sh normtimes layernorm rmsnorm > "$OUT/session.log" 2>&1
echo "== normtimes exit $? at $((SECONDS - began)) s" | tee -a "$OUT/session.log"
grep -E "^== |backward_rows" "$OUT/normtimes.log" | cut -c1-110
export PYTHONPATH=/tmp/site
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for tree in "$work-norm-variant-0" "$work"; do
  echo "== ncu $tree" >> "$OUT/ncu.log"
  timeout "${NCU_S:-40}" "$ncu" --clock-control none -k regex:backward --launch-count 1 \
    --section SpeedOfLight --section InstructionStats --section WarpStateStats --section SchedulerStats \
    python3 scripts/norm_kernel_times.py --once "$tree/generated_ops" layernorm bfloat16 32768x8192 \
    >> "$OUT/ncu.log" 2>&1
  echo "exit $? at $((SECONDS - began)) s" >> "$OUT/ncu.log"
done
grep -E "^== ncu|^exit|Duration|DRAM Throughput|Executed Instructions  |Issue Slots Busy|Issued Warp Per|Warp Cycles Per Issued" "$OUT/ncu.log" | cut -c1-150

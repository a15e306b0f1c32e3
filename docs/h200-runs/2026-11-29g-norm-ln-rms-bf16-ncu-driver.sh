#!/bin/bash
# Issue 21 (prepared in 2026-11-29g, not run): why LayerNorm's bfloat16 backward over clusters of 4
# (rows of 32768) runs 10-20% slower than RMSNorm's though the bias sums cost it 6-10% only
# (2026-11-29g-norm-ln-nobias-sums-probe), and where it stands at one block a row (8192).
# 1. normtimes of both ops at bfloat16 rows of 8192 (a block of 512 a row) and 32768 (clusters
#    of 4), the tree's kernels.
# 2. Nsight Compute of each op's backward at both shapes: speed of light, scheduler, warp
#    states, instruction mix, and the average stall a warp spends per issue, by reason.
export OMP_NUM_THREADS=2 GPU_WORK=/tmp/opgen-gpu
work=$GPU_WORK
began=$SECONDS
NORMTIMES_OPS="layernorm rmsnorm" NORMTIMES_SHAPES="bfloat16 32768x8192 8192x32768" \
  timeout "${TIMES_S:-240}" bash scripts/gpu_session.sh normtimes layernorm rmsnorm > "$OUT/session.log" 2>&1
echo "== normtimes exit $? at $((SECONDS - began)) s" | tee -a "$OUT/session.log"
grep -E "^== |us  " "$OUT/normtimes.log" | cut -c1-150
export PYTHONPATH=/tmp/site
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
for op in layernorm rmsnorm; do
  for shape in 8192x32768 32768x8192; do
    echo "== ncu $op bfloat16 $shape" >> "$OUT/ncu.log"
    timeout "${NCU_S:-90}" "$ncu" --clock-control base -k regex:backward_rows --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
      --section WarpStateStats --section LaunchStats --section SchedulerStats \
      --section InstructionStats --section ComputeWorkloadAnalysis --metrics "$stalls" \
      python3 scripts/norm_kernel_times.py --once "$work/generated_ops" $op bfloat16 $shape \
      >> "$OUT/ncu.log" 2>&1
    echo "exit $? at $((SECONDS - began)) s" >> "$OUT/ncu.log"
  done
done
grep -E "^== ncu|^exit|Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A|No Eligible|Eligible Warps|Executed Instructions  " "$OUT/ncu.log" | cut -c1-150

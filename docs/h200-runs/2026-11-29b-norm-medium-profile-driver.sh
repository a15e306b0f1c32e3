#!/bin/bash
# Issue 21, rows of 1024-8192 (2026-11-29b): where the training step's last 5-7% goes.
# 1. LayerNorm's and RMSNorm's training step kernel by kernel (normtimes) at rows of 1024, 4096
#    and 8192, 512 MiB inputs, the tree's kernels.
# 2. Nsight Compute of LayerNorm's backward (and its forward, for comparison) at bfloat16 rows of
#    8192 and 1024 and float32 rows of 4096: throughputs, occupancy, warp stalls.
export OMP_NUM_THREADS=2 GPU_WORK=/tmp/opgen-gpu21m
work=$GPU_WORK
began=$SECONDS
NORMTIMES_OPS="layernorm rmsnorm" \
  NORMTIMES_SHAPES="bfloat16 262144x1024 65536x4096 32768x8192 float32 131072x1024 32768x4096 16384x8192" \
  timeout "${TIMES_S:-240}" bash scripts/gpu_session.sh normtimes layernorm rmsnorm > "$OUT/session.log" 2>&1
echo "== normtimes exit $? at $((SECONDS - began)) s" | tee -a "$OUT/session.log"
grep -E "^== |us  " "$OUT/normtimes.log" | cut -c1-150
export PYTHONPATH=/tmp/site
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for spec in "bfloat16 32768x8192" "float32 32768x4096" "bfloat16 262144x1024"; do
  echo "== ncu layernorm $spec" >> "$OUT/ncu.log"
  timeout "${NCU_S:-60}" "$ncu" --clock-control none -k regex:'backward|forward' --launch-count 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section WarpStateStats --section LaunchStats --section SchedulerStats \
    python3 scripts/norm_kernel_times.py --once "$work/generated_ops" layernorm $spec \
    >> "$OUT/ncu.log" 2>&1
  echo "exit $? at $((SECONDS - began)) s" >> "$OUT/ncu.log"
done
grep -E "^== ncu|^exit|_kernel|Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Eligible Warps" "$OUT/ncu.log" | cut -c1-150

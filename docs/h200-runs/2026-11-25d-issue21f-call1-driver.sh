#!/bin/bash
# Issue 21's forward over clusters (branch issue-21-fwd, 2026-11-25d), H200 call 1: the forward of
# layernorm, add_layernorm and add_rmsnorm at long rows, timed for main's constants
# (kClusterResidualPacks=4) and three forms of the cluster kernel built beside this tree (norm.cuh's
# constants), then the tree (kClusterResidualPacks=8), then main's again; then Nsight Compute of
# main's cluster forward (the tree's layernorm kernels are main's).
export OMP_NUM_THREADS=2 GPU_WORK=/tmp/opgen-gpu
repo=$(pwd)
began=$SECONDS
NORMTIMES_FORWARD=1 NORMTIMES_REPEAT=1 NORMTIMES_EACH_S=45 NORMTIMES_OPS="layernorm add_layernorm add_rmsnorm" \
  NORMTIMES_VARIANTS="kClusterResidualPacks=4 kClusterPush=true kClusterPush=true,kClusterPrefetchPacks=4 kClusterThreads=1024" \
  NORMTIMES_SHAPES="float32 4096x32768 2048x65536 1024x131072 512x262144 bfloat16 4096x65536 2048x131072 1024x262144" \
  timeout "${TIMES_S:-220}" bash scripts/gpu_session.sh normtimes layernorm add_layernorm add_rmsnorm > "$OUT/session.log" 2>&1
echo "== normtimes exit $? at $((SECONDS - began)) s" | tee -a "$OUT/session.log"
grep -E "^== |^fwd" "$OUT/normtimes.log" | cut -c1-120
grep -iE "spill|error" "$OUT/build.log" | head -5
cd "$GPU_WORK" || exit 1
timeout "${NCU_S:-70}" ncu --clock-control none -k regex:forward_rows --launch-count 3 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
  --section WarpStateStats --section LaunchStats \
  python3 "$repo/scripts/norm_kernel_times.py" --once generated_ops layernorm float32 4096x32768 512x262144 bfloat16 2048x131072 \
  > "$OUT/ncu.log" 2>&1
echo "== ncu exit $? at $((SECONDS - began)) s"
grep -E "forward_rows_kernel|DRAM Throughput|Memory Throughput|Duration|Registers Per|Achieved Occupancy|Cluster|Warp Cycles Per Issued|Stall|One or More|No Eligible" "$OUT/ncu.log" | cut -c1-150 | head -80

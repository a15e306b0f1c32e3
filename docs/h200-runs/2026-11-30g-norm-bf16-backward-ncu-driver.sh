#!/usr/bin/env bash
# Prepared in 2026-11-30 (not run: no device time left). Issue 21, information only, no kernel
# change. LayerNorm's bfloat16 training step over clusters is its worst family after 2026-11-30e's
# sweep (80 / 80 / 76 / 71% of copy at rows of 32768-262144, where RMSNorm's reads 91 / 90 / 88 /
# 84 and LayerNorm float32's 91 / 93 / 91 / 65), while LayerNorm bfloat16's forward at 32768 reads
# 96: its backward over clusters is the gap. Nsight Compute at base clocks, one launch each, the
# backward kernel of a cluster of 4 blocks of 512 threads (8192x32768 bfloat16: LayerNorm against
# RMSNorm; 8192x16384 float32, the same bytes a row, LayerNorm): speed of light, memory (L1 hit
# rate and throughput: LayerNorm's column sums take 32 KB a block more shared memory, so less L1,
# 2026-11-29h's untried lead), occupancy, scheduler, warp states, instruction mix, stalls per issue.
#   timeout 575 bash docs/h200-runs/2026-11-30g-norm-bf16-backward-ncu-driver.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
began=$SECONDS
# Build only: a test selection that matches nothing (pytest exit 5).
TEST_K="no_such_test" timeout 200 bash scripts/gpu_session.sh test layernorm rmsnorm > "$OUT/session.log" 2>&1
echo "== build exit $? at $((SECONDS - began)) s" | tee -a "$OUT/session.log"
export PYTHONPATH=/tmp/site
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
run_ncu() {  # kernel-regex op dtype shape
  echo "== ncu $2 $3 $4 $1" >> "$OUT/ncu.log"
  timeout "${NCU_S:-90}" "$ncu" --clock-control base -k "regex:$1" --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats \
    --section InstructionStats --metrics "$stalls" \
    python3 scripts/norm_kernel_times.py --once "$GPU_WORK/generated_ops" "$2" "$3" "$4" \
    >> "$OUT/ncu.log" 2>&1
  echo "exit $? at $((SECONDS - began)) s" >> "$OUT/ncu.log"
}
for op in layernorm rmsnorm; do run_ncu backward_rows $op bfloat16 8192x32768; done
run_ncu backward_rows layernorm float32 8192x16384
grep -E "^== ncu|^exit|Duration|DRAM Throughput|L1/TEX Hit|L1/TEX Cache Throughput|L2 Cache Throughput|Shared Memory Configuration|Dynamic Shared|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issue Slots Busy|Eligible Warps|Executed Instructions  " "$OUT/ncu.log" | cut -c1-150

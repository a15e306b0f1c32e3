#!/usr/bin/env bash
# 2026-11-29i (issue 21, information only, no kernel change): where LayerNorm's bfloat16 kernels
# lose to RMSNorm's at 9aa24e8, the two gaps left after the sweep: the forward over clusters
# (2048x131072: LayerNorm 79% of copy, RMSNorm 85) and the backward of one block a row
# (32768x8192: the training step 88 against 94). Nsight Compute at base clocks, one launch each:
# speed of light, memory, scheduler, warp states, instruction mix, and the average stall a warp
# spends per issue by reason.
#   timeout 575 bash docs/h200-runs/2026-11-29i-norm-bf16-ncu-driver.sh
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
run_ncu() {  # kernel-regex op shape
  echo "== ncu $2 bfloat16 $3 $1" >> "$OUT/ncu.log"
  timeout "${NCU_S:-80}" "$ncu" --clock-control base -k "regex:$1" --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section WarpStateStats --section LaunchStats --section SchedulerStats \
    --section InstructionStats --metrics "$stalls" \
    python3 scripts/norm_kernel_times.py --once "$GPU_WORK/generated_ops" "$2" bfloat16 "$3" \
    >> "$OUT/ncu.log" 2>&1
  echo "exit $? at $((SECONDS - began)) s" >> "$OUT/ncu.log"
}
for op in layernorm rmsnorm; do run_ncu forward_rows $op 2048x131072; done
for op in layernorm rmsnorm; do run_ncu backward_rows $op 32768x8192; done
grep -E "^== ncu|^exit|Duration|DRAM Throughput|L2 Cache Throughput|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Eligible Warps|Executed Instructions  " "$OUT/ncu.log" | cut -c1-150

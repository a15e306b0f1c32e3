#!/bin/bash
# Issue 21 (2026-11-29b): the backward's row reduction with one block barrier a row instead of
# two (kOneBarrierMinRowThreads = 256, norm.cuh; reduce.cuh's group_allreduce_alternating)
# against main's two (variant 0: 1024, i.e. off). A training step kernel by kernel (variant,
# tree, variant again), then Nsight Compute's durations of the backward at base clocks
# (--clock-control base: steadier between builds than the free-running clocks) for both.
export OMP_NUM_THREADS=2 GPU_WORK=/tmp/opgen-gpu21b
work=$GPU_WORK
began=$SECONDS
NORMTIMES_OPS="layernorm rmsnorm" NORMTIMES_REPEAT=1 NORMTIMES_VARIANTS="kOneBarrierMinRowThreads=1024" \
  NORMTIMES_SHAPES="bfloat16 65536x4096 32768x8192 8192x32768 float32 65536x2048 32768x4096 4096x32768" \
  timeout "${TIMES_S:-250}" bash scripts/gpu_session.sh normtimes layernorm rmsnorm > "$OUT/session.log" 2>&1
echo "== normtimes exit $? at $((SECONDS - began)) s" | tee -a "$OUT/session.log"
grep -E "^== |backward_rows" "$OUT/normtimes.log" | cut -c1-100
export PYTHONPATH=/tmp/site
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for round in 1 2; do
  for tree in "$work-norm-variant-0" "$work"; do
    for spec in "layernorm bfloat16 65536x4096 32768x8192" "layernorm float32 32768x4096" "rmsnorm bfloat16 32768x8192"; do
      echo "== ncu round $round $tree $spec" >> "$OUT/ncu.log"
      timeout 40 "$ncu" --clock-control base -k regex:backward_rows --section SpeedOfLight \
        python3 scripts/norm_kernel_times.py --once "$tree/generated_ops" $spec >> "$OUT/ncu.log" 2>&1
    done
  done
done
echo "== ncu done at $((SECONDS - began)) s" >> "$OUT/ncu.log"
grep -E "^== ncu|backward_rows|Duration" "$OUT/ncu.log" | cut -c1-120

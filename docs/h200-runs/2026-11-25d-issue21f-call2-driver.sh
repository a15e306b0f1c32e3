#!/bin/bash
# Issue 21's forward over clusters (branch issue-21-fwd, 2026-11-25d), H200 call 2: this tree
# (kClusterResidualPacks=8, kWideClusterThreads=1024) against main's constants built beside it
# (kClusterResidualPacks=4, kWideClusterThreads=0: main's kernels): every CUDA test of three
# norm ops, the forward timed (main, then the tree), then compute-sanitizer memcheck and racecheck of
# the forward at the shapes that take the changed launches (scripts/norm_forward_check.py).
export OMP_NUM_THREADS=2 GPU_WORK=/tmp/opgen-gpu
repo=$(pwd)
began=$SECONDS
TEST_K=cuda TEST_SPLIT=1 NORMTIMES_FORWARD=1 NORMTIMES_EACH_S=40 \
  NORMTIMES_OPS="layernorm add_layernorm add_rmsnorm" \
  NORMTIMES_VARIANTS="kClusterResidualPacks=4,kWideClusterThreads=0" \
  NORMTIMES_SHAPES="float32 2048x65536 1024x131072 512x262144 bfloat16 1024x262144 512x524288" \
  timeout "${TIMES_S:-200}" bash scripts/gpu_session.sh test,normtimes layernorm add_layernorm add_rmsnorm > "$OUT/session.log" 2>&1
echo "== test,normtimes exit $? at $((SECONDS - began)) s" | tee -a "$OUT/session.log"
grep -E "^== test" "$OUT/session.log"
grep -E "^== |^fwd" "$OUT/normtimes.log" | cut -c1-150
cd "$GPU_WORK" || exit 1
shapes="float32 3x131080 40x131080 2x200004 2x262144 bfloat16 2x300000 3x524288"
for tool in memcheck racecheck; do
  ( PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "${SANITIZE_S:-60}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
      python3 "$repo/scripts/norm_forward_check.py" generated_ops layernorm,add_rmsnorm,add_layernorm $shapes \
      > "$OUT/sanitize-forward-$tool.log" 2>&1; echo "exit $?" >> "$OUT/sanitize-forward-$tool.log" ) &
done
wait
echo "== sanitize at $((SECONDS - began)) s"
for tool in memcheck racecheck; do echo "== $tool"; grep -E "check |SUMMARY|^exit" "$OUT/sanitize-forward-$tool.log"; done

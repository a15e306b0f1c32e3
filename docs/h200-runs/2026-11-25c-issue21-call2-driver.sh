#!/bin/bash
# Call 2 of issue 21 (2026-11-25c), the branch's final tree: build the four norm ops (and, beside
# them, layernorm and add_rmsnorm with main's kernels: ab/base, kForwardStages 0 and
# kStagedBackward false); every CUDA test of the four ops (2^31 ones one op at a time);
# compute-sanitizer memcheck and racecheck of the pieces holding the changed paths; the training
# step kernel by kernel, main's kernels against the branch's; the quick sweep of layernorm
# without torch.compile, as far as the time allows.
R=$PWD; W=/tmp/opgen-gpu21; export GPU_WORK=$W
began=$SECONDS
( sleep 25; export PYTHONPATH=/tmp/site
  mkdir -p /tmp/base && cd /tmp/base && opgen new layernorm && opgen new add_rmsnorm --recipe rmsnorm --residual &&
  cp $R/ab/base/norm.cuh generated_ops/include/opgen/norm.cuh && opgen build -j 4 layernorm add_rmsnorm
  echo "exit $?" ) > $OUT/build-base.log 2>&1 &
base=$!
TEST_K=cuda TEST_SPLIT=1 SANITIZE_OPS="layernorm add_rmsnorm" SANITIZE_TOOLS="memcheck racecheck" \
  SANITIZE_PIECES="short_bfloat16 mid_bfloat16 mid_float32 long_bfloat16 long_float32" \
  SANITIZE_TIMEOUT=${SAN_S:-90} SANITIZE_JOBS=20 \
  bash scripts/gpu_session.sh test,sanitize layernorm rmsnorm add_layernorm add_rmsnorm > $OUT/session.log 2>&1
echo "== session exit $? at $((SECONDS - began)) s"
grep -E "^== (test|sanitize)" $OUT/session.log
wait $base; tail -1 $OUT/build-base.log
export PYTHONPATH=/tmp/site
{
for ws in /tmp/base $W; do
  echo "######## $ws"
  python3 scripts/norm_kernel_times.py $ws/generated_ops layernorm bfloat16 8192x32768 4096x65536 2048x131072 1024x262144 float32 4096x32768 2048x65536 512x262144
  python3 scripts/norm_kernel_times.py $ws/generated_ops add_rmsnorm bfloat16 4096x65536 float32 2048x65536
done
} > $OUT/times.log 2>&1
echo "== times done at $((SECONDS - began)) s"
grep -E "^(==|####)|rows_kernel" $OUT/times.log | cut -c1-150
left=$(( ${END_S:-325} - (SECONDS - began) ))
echo "== quick sweep: $left s left"
[ $left -gt 20 ] && timeout $left python3 scripts/norm_quick_bench.py $W/generated_ops layernorm --no-compile > $OUT/quick.log 2>&1
echo "== all done at $((SECONDS - began)) s"
tail -5 $OUT/quick.log

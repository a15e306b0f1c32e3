#!/bin/bash
# Call 1 of issue 21 (2026-11-25b): build the branch's norm ops and two kernel variants, time the
# training step kernel by kernel (base, x1, x2 in turn), then racecheck every sanitizer piece of
# layernorm and add_rmsnorm (a process each) with a time limit, to see where racecheck's time goes.
R=$PWD; W=/tmp/opgen-gpu21; export GPU_WORK=$W
began=$SECONDS
GPU_WORK=$W bash scripts/gpu_session.sh none layernorm rmsnorm add_layernorm add_rmsnorm > $OUT/base-build.log 2>&1 &
base=$!
sleep 25
export PYTHONPATH=/tmp/site
for v in x1 x2; do
  ( mkdir -p /tmp/$v && cd /tmp/$v && opgen new layernorm && opgen new add_rmsnorm --recipe rmsnorm --residual &&
    cp $R/ab/$v/norm.cuh generated_ops/include/opgen/norm.cuh && opgen build -j 6 layernorm add_rmsnorm
    echo "exit $?" ) > $OUT/build-$v.log 2>&1 &
done
wait
echo "== builds done at $((SECONDS - began)) s"; tail -3 $OUT/base-build.log $OUT/build-x*.log
{
for ws in $W x1 x2 $W; do
  [ $ws = $W ] || ws=/tmp/$ws
  echo "######## $ws"
  python3 scripts/norm_kernel_times.py $ws/generated_ops layernorm bfloat16 262144x1024 32768x8192 8192x32768 2048x131072 float32 32768x4096 4096x32768 2048x65536
  python3 scripts/norm_kernel_times.py $ws/generated_ops add_rmsnorm bfloat16 262144x1024 32768x8192 8192x32768 float32 32768x4096 4096x32768
done
} > $OUT/times.log 2>&1
echo "== times done at $((SECONDS - began)) s"
grep "^==" $OUT/times.log
SANITIZE_PIECES=all SANITIZE_TOOLS=racecheck SANITIZE_OPS="layernorm add_rmsnorm" SANITIZE_TIMEOUT=${PROBE_S:-100} \
  bash scripts/gpu_session.sh sanitize layernorm rmsnorm add_layernorm add_rmsnorm 2>&1 | grep -v "^Requirement" | tail -20
echo "== all done at $((SECONDS - began)) s"
grep -h "rows of" $OUT/sanitize.log | tail -3

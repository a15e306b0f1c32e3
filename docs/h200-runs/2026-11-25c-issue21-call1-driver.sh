#!/bin/bash
# Call 1 of issue 21 (2026-11-25c): build layernorm with the branch's kernels (v1: forward over
# clusters through one cp.async stage, backward's 512-thread blocks staging their next row) and
# three variants (base: both off, as main; v2, v3: two or three forward stages, one block an SM),
# run v1's CUDA tests of layernorm (not the 2^31 ones) while the variants build, then time a
# training step kernel by kernel on the long rows: base, v1, v2, v3.
# Run as `OMP_NUM_THREADS=2 timeout 330 bash ab/call1.sh`, the variants' norm.cuh in ab/{base,v2,v3}
# (at 2ef93cd: kForwardStages 0 and kStageBackward false; kForwardStages 2; kForwardStages 3).
R=$PWD; W=/tmp/opgen-gpu21; export GPU_WORK=$W
began=$SECONDS
( bash scripts/gpu_session.sh none layernorm > $OUT/build-v1.log 2>&1
  echo "== v1 built at $((SECONDS - began)) s"
  export PYTHONPATH=/tmp/site; cd $W && timeout 120 opgen test layernorm -k "cuda and not 2_31" > $OUT/test-v1.log 2>&1; echo "exit $?" >> $OUT/test-v1.log
  echo "== v1 tested at $((SECONDS - began)) s" ) &
sleep 20
export PYTHONPATH=/tmp/site
for v in base v2 v3; do
  ( mkdir -p /tmp/$v && cd /tmp/$v && opgen new layernorm &&
    cp $R/ab/$v/norm.cuh generated_ops/include/opgen/norm.cuh && opgen build -j 4 layernorm
    echo "exit $?" ) > $OUT/build-$v.log 2>&1 &
done
wait
echo "== builds and tests done at $((SECONDS - began)) s"; tail -2 $OUT/build-*.log; tail -3 $OUT/test-v1.log
{
for ws in /tmp/base $W /tmp/v2 /tmp/v3; do
  echo "######## $ws"
  python3 scripts/norm_kernel_times.py $ws/generated_ops layernorm bfloat16 8192x32768 4096x65536 2048x131072 1024x262144 float32 4096x32768 2048x65536 512x262144
done
} > $OUT/times.log 2>&1
echo "== times done at $((SECONDS - began)) s"
grep -E "^(==|####)|rows_kernel" $OUT/times.log | cut -c1-130

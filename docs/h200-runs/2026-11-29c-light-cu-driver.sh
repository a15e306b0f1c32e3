#!/bin/bash
# The elementwise and rowwise ops after f16b79f and 002413c (their CUDA kernels in .cu files that
# include no torch tensor or dispatcher header, their checks and registration in
# <op>_cuda_binding.cpp): every generated test on the H200 (CUDA included; the 2^31-element ones
# one op at a time), compute-sanitizer's three tools on four of them, and gelu's and relu's
# `opgen bench` against the files in docs/benchmarks (the kernels' code is unchanged; their host
# path is new).
export PYTHONUNBUFFERED=1
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_SPLIT=1 SANITIZE_OPS="my_op swish_gate relu_scale row_op" SANITIZE_TIMEOUT=240 \
  BENCH_OPS="gelu relu" BENCH_BUDGET_S=380 \
  bash scripts/gpu_session.sh test,sanitize,bench relu gelu my_op row_op mish swish_gate relu_scale lin_silu
echo "== session exit $?"

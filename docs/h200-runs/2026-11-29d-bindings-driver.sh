#!/bin/bash
# The signature, norm and MLP kinds with their CUDA registration moved out of <op>_cuda.cu into
# <op>_cuda_binding.cpp (so nvcc never parses torch/library.h): every CUDA test of an op of each
# form (a rich signature, one with no backward, bitonic_sort, matmul, LayerNorm, RMSNorm with a
# residual, an MLP without bias), built from this tree. No kernel changed; the 2^31-element tests
# are left out.
export PYTHONUNBUFFERED=1
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
TEST_SPLIT=1 TEST_K="cuda and not 2_31" \
  bash scripts/gpu_session.sh test sig_op sig_nograd bitonic_sort matmul layernorm add_rmsnorm mlp_two
echo "== session exit $?"

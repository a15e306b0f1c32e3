#!/bin/bash
# The elementwise CUDA files of the form before f16b79f (kernels and registration in one
# <op>_cuda.cu, through opgen::OnCuda: d178b0f's renders of gelu and swish_gate, in
# 2026-11-29c-old-form/) built against the current shared headers (b70eec4's compatibility path:
# elementwise_cuda.h's OnCuda::launch) in ops otherwise rendered now, and their
# generated CUDA tests run: what an op left at the earlier form meets after `opgen update` of
# another op updated the workspace's headers.
export PYTHONUNBUFFERED=1
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
repo=$PWD; work=$(mktemp -d); cd "$work"
opgen new gelu > /dev/null && opgen new swish_gate --formula "x*sigmoid(y)" > /dev/null
for op in gelu swish_gate; do
  rm generated_ops/$op/csrc/${op}_cuda.h generated_ops/$op/csrc/${op}_cuda_binding.cpp
  cp "$repo/docs/h200-runs/2026-11-29c-old-form/${op}_cuda.cu" generated_ops/$op/csrc/
done
ls generated_ops/gelu/csrc generated_ops/swish_gate/csrc
opgen build gelu swish_gate 2>&1 | tail -5
opgen test gelu swish_gate -k "cuda and not 2_31" 2>&1 | tail -4
echo "== test exit ${PIPESTATUS[0]}"

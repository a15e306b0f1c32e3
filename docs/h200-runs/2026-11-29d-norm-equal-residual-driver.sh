#!/bin/bash
# The residual form after 56a2e55 (LayerNorm's forward statistics merged as equal halves):
# add_layernorm's forward alone, main's merge (kEqualCountMoments=false, built beside) against
# the tree, at the residual clusters' row lengths.
export PYTHONUNBUFFERED=1
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
NORMTIMES_FORWARD=1 NORMTIMES_OPS="add_layernorm" NORMTIMES_VARIANTS="kEqualCountMoments=false" \
  NORMTIMES_SHAPES="float32 4096x32768 2048x65536 1024x131072 512x262144 bfloat16 8192x32768 4096x65536 2048x131072 1024x262144" \
  bash scripts/gpu_session.sh normtimes add_layernorm
echo "== session exit $?"

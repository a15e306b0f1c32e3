#!/bin/bash
# opgen build on the H200 machine (torch 2.11, its GCC) after f089080's setup.py change (the
# precompiled header's folder worked out once a build, torch's -std read once): three ops built
# CPU-only with one job (6 C++ files: the rule precompiles), their ninja files checked for the
# -include, no -Winvalid-pch warning, and the ops' generated CPU tests run.
export PYTHONUNBUFFERED=1
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
python3 -c "import torch; print('torch', torch.__version__)"
work=$(mktemp -d); cd "$work"
for op in relu gelu; do opgen new $op > /dev/null; done
opgen new my_op --kind elementwise > /dev/null
opgen build --cpu-only -j 1 -v relu gelu my_op > build.log 2>&1; echo "== build exit $?"
grep -E "precompil|Winvalid-pch|ready" build.log | cut -c1-160
for op in relu gelu my_op; do
  echo "$op: $(grep -c -- '-include .*torch_headers.h' generated_ops/build/ops/$op/build.ninja) ninja lines with -include"
done
opgen test relu gelu my_op -k "not cuda" > test.log 2>&1; echo "== test exit $?"; tail -3 test.log

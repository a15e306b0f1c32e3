#!/usr/bin/env bash
# Issue 23 (2026-11-30b): the small training step's host time, op by op (information only):
#   timeout 580 bash docs/h200-runs/2026-11-30b-mlp-host-profile-driver.sh
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 OUT=${OUT:-/tmp/opgen-out}
if ! python3 -c "import copier" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
repo=$PWD; work=/tmp/opgen-host; mkdir -p $work; cd $work
[ -d generated_ops/mlp_seed ] || opgen new mlp_seed --kind mlp --widths 100,128,64,10 --activation relu > /dev/null
opgen build -j 16 mlp_seed 2>&1 | tail -1
python3 $repo/docs/h200-runs/2026-11-30b-mlp-host-profile.py $work 2>&1 | grep -v Warning | tee $OUT/mlp-host-profile.log

#!/usr/bin/env bash
# Issue 23: tensor_core.cuh's to_tf32 as sm_90's one-instruction cvt.rn.tf32.f32 (ties to even)
# in place of cvt.rna's emulation (a finiteness test, an add, a mask): the seed TF32 inference
# kernel's SASS 2720 -> 2360 instructions (nvcc 13.0, sm_90a; 167 registers, no spills), and
# opgen.testing.tf32's emulation rounding ties to even with it. One call:
#   1. the emulation against the GPU's cvt.rn.tf32.f32, bit for bit (-tf32-rn-check.py);
#   2. every CUDA test of the MLP ops (ReLU, SiLU, GELU-tanh networks) and matmul (to_tf32 in its
#      prologue and fragments), memcheck of mlp_seed and mlp_64x4;
#   3. the forward and training step against HEAD's tensor_core.cuh (.variants/base) and a
#      timing-only mix (.variants/mixed: ReLU's outputs by the old integer add, ties away), the
#      tree, then base's forward again (the spread within one call).
# Before the call: mkdir -p .variants/base && git show HEAD:template/workspace/include/opgen/tensor_core.cuh
#   > .variants/base/tensor_core.cuh (and .variants/mixed as described; untracked, so it travels).
#   timeout 590 bash docs/h200-runs/2026-11-29j-mlp-tf32-rn-driver.sh
set -uo pipefail
export OMP_NUM_THREADS=2 GPU_WORK=${GPU_WORK:-/tmp/opgen-gpu} OUT=${OUT:-/tmp/opgen-out}
[ -f .variants/base/tensor_core.cuh ] || { echo "make .variants/base first (see the header)"; exit 2; }
mkdir -p "$OUT"
PYTHONPATH=$PWD timeout 60 python3 docs/h200-runs/2026-11-29j-tf32-rn-check.py 2>&1 | tee "$OUT/tf32-rn-check.log"
TEST_K=cuda TEST_SPLIT=1 SANITIZE_OPS="mlp_seed mlp_64x4" SANITIZE_TOOLS="memcheck" SANITIZE_TIMEOUT=120 \
  MLPQUICK_OPS="mlp_seed mlp_64x4" MLPQUICK_VARIANTS=".variants/base .variants/mixed" \
  MLPQUICK_ARGS="--rows 65536 262144 1048576 --profile-rows 0" \
  timeout 480 bash scripts/gpu_session.sh test,sanitize,mlpquick mlp_seed mlp_64x4 mlp_two mlp_deep matmul
v=$GPU_WORK-variant-base
PYTHONPATH="$v${PYTHONPATH:+:$PYTHONPATH}" timeout 45 python3 scripts/mlp_quick_bench.py "$v/generated_ops" \
  mlp_seed mlp_64x4 --rows 65536 262144 1048576 --forward-only --profile-rows 0 \
  2>&1 | sed 's/^/base again: /' | tee -a "$OUT/mlpquick.log"
echo "== exit at $SECONDS s"

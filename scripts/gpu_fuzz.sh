#!/usr/bin/env bash
# The H200 fuzz run (docs/fuzz): scripts/fuzz_formulas.py over a pre-drawn list, in one workspace
# (/tmp/fuzz), build with -j 16, each op's tests in parallel processes on the one GPU, then the
# tests of 2^31 elements one op at a time (each needs most of the GPU's memory). A call does one
# chunk of the list (START:STOP), so every call stands alone within the 10-minute limit:
#   bash scripts/gpu_fuzz.sh render,build,test,large docs/fuzz/formulas-seed0-200.txt "cuda and not 2_31" 0:50
# FUZZ_TIMEOUT (seconds, default 560) stops the fuzz script early enough to pack the logs.
set -uo pipefail
steps=$1; list=$(realpath "$2"); selection=${3:-cuda}; part=${4:-:}
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
repo=$(cd "$(dirname "$0")/.." && pwd)
if ! python3 -c "import copier" 2>/dev/null; then
  [ -d /tmp/site/copier ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site "$repo"/.whl/*.whl
  export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e "$repo" >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/machine.log"
# Many test processes share the machine: one CPU thread and one inductor compile worker each, or
# every process spreads its small CPU-side checks over all cores and they spin against each other
# (measured: ~10 s per op's CUDA tests with 12 processes at the defaults, MPS no better).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-1}  # one compile worker per test process
mkdir -p /tmp/fuzz && cd /tmp/fuzz
timeout "${FUZZ_TIMEOUT:-560}" python3 "$repo/scripts/fuzz_formulas.py" --from-list "$list" --slice "$part" \
  --steps "$steps" --workspace /tmp/fuzz/generated_ops -j 16 --parallel "${PARALLEL:-12}" -k "$selection" --logs "$OUT/logs" 2>&1 | tee -a "$OUT/fuzz.log" | tail -40
status=${PIPESTATUS[0]}
if [ -d "$OUT/logs" ]; then
  grep -h -E "^=+ .*(passed|failed).* =+$" "$OUT"/logs/*.log | sort | uniq -c | sort -rn > "$OUT/counts.log"
  tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
fi
exit "$status"

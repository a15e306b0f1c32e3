#!/usr/bin/env bash
# H200 fuzz run: render the formulas of LIST (lines "NAME FORMULA [PARAM=DEFAULT ...]", as
# `scripts/fuzz_formulas.py --list` prints them), build them with -j 16 in one workspace, run each
# op's CUDA tests (-k SELECTION) in 8 parallel processes on the one GPU. Logs in $OUT.
#   bash scripts/gpu_fuzz.sh docs/fuzz/formulas-seed0-48.txt "cuda and not 2_31"
set -uo pipefail
list=$(realpath "$1"); selection=${2:-cuda}
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
repo=$(cd "$(dirname "$0")/.." && pwd)
if ! python3 -c "import copier" 2>/dev/null; then
  [ -d /tmp/site/copier ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site "$repo"/.whl/*.whl
  export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e "$repo" >/dev/null 2>&1
mkdir -p /tmp/fuzz && cd /tmp/fuzz
start=$(date +%s)
python3 - "$list" <<'PY' > "$OUT/render.log" 2>&1
import re
import sys
from opgen.render import new_op
from opgen.workspace import Workspace
workspace = Workspace.locate("/tmp/fuzz/generated_ops")
for line in open(sys.argv[1]):
    name, _, rest = line.rstrip("\n").partition(" ")
    words, params = rest.split(" "), []
    while words and (not words[-1] or re.fullmatch(r"(alpha|beta)=[0-9.]+", words[-1])):
        word = words.pop()
        if word:
            params.insert(0, word)
    formula = " ".join(words)
    new_op(name, workspace=workspace, formula=formula, params=params)
    print(name, "rendered", flush=True)
PY
echo "render $(( $(date +%s) - start )) s" | tee -a "$OUT/times.log"
ops=$(cut -d' ' -f1 "$list")
opgen build -j 16 $ops --workspace /tmp/fuzz/generated_ops > "$OUT/build.log" 2>&1
echo "build $(( $(date +%s) - start )) s" | tee -a "$OUT/times.log"
tail -5 "$OUT/build.log"
mkdir -p "$OUT/tests"
printf '%s\n' $ops | xargs -P 8 -I{} sh -c "opgen test {} --workspace /tmp/fuzz/generated_ops -k '$selection' > $OUT/tests/{}.log 2>&1; echo {} \$? >> $OUT/status.log"
echo "tests $(( $(date +%s) - start )) s" | tee -a "$OUT/times.log"
sort "$OUT/status.log" | awk '{n++; if ($2 != 0) {f++; print "FAILED", $1}} END {print n - f, "of", n, "ops pass"}' | tee "$OUT/summary.log"
grep -h -E "passed|failed" "$OUT"/tests/*.log | tail -n +1 > "$OUT/counts.log"
tar czf "$OUT/tests.tar.gz" -C "$OUT" tests && rm -rf "$OUT/tests"

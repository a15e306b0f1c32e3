#!/usr/bin/env bash
# One GPU-machine session: install opgen, render the ops into a workspace, build, then any of:
#   test      every generated test (none may skip for want of a GPU; multi-GPU ones need two GPUs)
#   sanitize  `opgen test --sanitize`, one op per process, all at once (SANITIZE_PIECES: norm ops
#             in pieces, a process each; see below)
#   multi     only the multi-GPU tests (inputs on cuda:1, different GPUs refused, DDP over NCCL)
#   bench     `opgen bench` of the named recipes, results tarred into $OUT/benchmarks.tar.gz
#   quick     the norm ops against eager, torch.compile and a device copy, every row length
#             (scripts/norm_quick_bench.py; its compile contender's caches are filled by QUICK_WARM
#             processes, default 8, that start right after the build and overlap the tests;
#             QUICK_ARGS: more options of the sweep, e.g. --compile-budget 200 or --no-compile)
#   profile   the linear ops' training step, kernel by kernel against eager (scripts/linear_profile.py)
#   mlpquick  the mlp ops against eager at a few batches, and a training step kernel by kernel
#             (scripts/mlp_quick_bench.py; MLPQUICK_ARGS: more options, e.g. --rows 1048576;
#             MLPQUICK_VARIANTS: other headers to time first, see below)
#   normtimes the norm ops' training step kernel by kernel (scripts/norm_kernel_times.py) on
#             NORMTIMES_SHAPES (default: long rows, a dtype's name before its shapes), for each of
#             NORMTIMES_VARIANTS first (see below), then for this tree (NORMTIMES_FORWARD=1: the
#             forward only, against eager and a copy, scripts/norm_forward_times.py)
# Device time is scarce, so one call does it all; logs and results land in $OUT. The workspace
# lives in $GPU_WORK (default /tmp/opgen-gpu), so a second call on a warm machine rebuilds only
# what the tree changed (its shared headers are refreshed from template/workspace/include).
#
#   bash scripts/gpu_session.sh MODES [OPS...]     (MODES: comma-separated, e.g. test,sanitize;
#                                                  default OPS: softmax relu gelu my_op row_op)
set -uo pipefail
modes=${1:-test}; shift || true
ops=("$@"); [ ${#ops[@]} -eq 0 ] && ops=(softmax relu gelu my_op row_op)
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${GPU_WORK:-/tmp/opgen-gpu}; mkdir -p "$work"
export PYTHONUNBUFFERED=1
has_mode() { [[ ",$modes," == *",$1,"* ]]; }

# The GPU machine has no network: copier and its dependencies travel as wheels in .whl/.
if ! python3 -c "import copier" 2>/dev/null; then
  wheels=$repo/.whl; [ -d "$wheels" ] || wheels=$(git -C "$repo" rev-parse --show-toplevel 2>/dev/null)/.whl
  [ -d /tmp/site/copier ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site "$wheels"/*.whl
  export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e "$repo" >/dev/null 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  echo "compute-sanitizer: $(python3 -c 'from opgen.testing.sanitizer import find_compute_sanitizer as f; print(f())')"
} | tee "$OUT/machine.log"

cd "$work"
# A warm machine's workspace keeps its rendered ops, so its shared headers are refreshed from the
# tree here: a second call once built nothing and measured the previous call's norm.cuh
# (2026-11-29g). Only the headers that differ are copied (a copy is a new mtime, which would
# rebuild every op), so changed ones rebuild what includes them. An op's own rendered files are
# kept as they are: after a change to an op's template, start from an empty $GPU_WORK.
if [ -d generated_ops/include/opgen ]; then
  for header in "$repo"/template/workspace/include/opgen/*; do
    cmp -s "$header" "generated_ops/include/opgen/${header##*/}" || cp "$header" generated_ops/include/opgen/
  done
fi
for op in "${ops[@]}"; do
  [ -d "generated_ops/$op" ] && continue
  case $op in
    row_op) opgen new "$op" --kind rowwise ;;
    mish) opgen new mish --formula "x*tanh(log(1+exp(x)))" ;;
    relu_scale) opgen new relu_scale --formula "max(x, 0)*alpha" --param alpha=1.5 ;;
    silu) opgen new silu --formula "x*sigmoid(x)" ;;
    softplus) opgen new softplus --formula "log1p(exp(x))" ;;
    gelu_tanh) opgen new gelu_tanh --formula "0.5*x*(1+tanh(0.7978845608028654*(x+0.044715*x**3)))" ;;
    swish_gate) opgen new swish_gate --formula "x*sigmoid(y)" ;;
    sig_op) opgen new sig_op --signature "(Tensor x, Tensor? weight, int k, float eps=1e-5, bool largest=True, int[] dims=[0, 1], *, float? scale=None) -> (Tensor values, Tensor indices)" ;;
    sig_plain) opgen new sig_plain --signature "(Tensor x, Tensor y) -> Tensor" ;;
    sig_nograd) opgen new sig_nograd --signature "(Tensor x, float alpha=2.0) -> (Tensor a, Tensor b)" --no-grad ;;
    lin_relu) opgen new lin_relu --kind linear --activation relu ;;
    geglu) opgen new geglu --formula "x*0.5*(1+erf(y/sqrt(2)))" ;;
    textbook) opgen new textbook --formula "log(1 + x*x) + (exp(x) - 1) + 1/(1 + exp(-x)) + log(sigmoid(y)) + sqrt(x*x + y*y) + log(exp(x) + exp(y))" ;;
    lin_gelu_exact) opgen new lin_gelu_exact --kind linear --activation gelu ;;
    lin_plain) opgen new lin_plain --kind linear --no-bias ;;
    lin_silu) opgen new lin_silu --kind linear --activation "x*sigmoid(1.702*x)" ;;
    add_rmsnorm) opgen new add_rmsnorm --recipe rmsnorm --residual ;;
    add_layernorm) opgen new add_layernorm --recipe layernorm --residual ;;
    mlp_seed) opgen new mlp_seed --kind mlp --widths 100,128,64,10 --activation relu ;;
    mlp_64x4) opgen new mlp_64x4 --kind mlp --widths 64,64,64,64,16 --activation relu ;;
    mlp_deep) opgen new mlp_deep --kind mlp --widths 17,128,33,128,64,128,128,100,5 --activation gelu_tanh --output-activation silu ;;
    mlp_two) opgen new mlp_two --kind mlp --widths 10,20,3 --activation silu --no-bias ;;
    *) opgen new "$op" ;;
  esac || exit 1
done
# MLPQUICK_VARIANTS (mlpquick): folders (relative to the repo) of replacement headers, e.g. a
# baseline's include/opgen/*.cuh; each is copied over a copy of the workspace and built there
# beside the main build, then timed before it, in the same process order (compare ratios to eager
# within one call).
# MLPQUICK_OPS: the ops mlpquick times (default: all named). A variant's own ops and options:
# MLPQUICK_OPS_<folder's name> and MLPQUICK_ARGS_<folder's name> (default: MLPQUICK_OPS, _ARGS).
read -r -a quick_ops <<< "${MLPQUICK_OPS:-${ops[*]}}"
variants=(); variant_builds=()
if has_mode mlpquick && [ -n "${MLPQUICK_VARIANTS:-}" ]; then
  read -r -a variants <<< "$MLPQUICK_VARIANTS"
  for v in "${variants[@]}"; do
    vwork="$work-variant-$(basename "$v")"; rm -rf "$vwork"; mkdir -p "$vwork"
    cp -r generated_ops "$vwork/" && cp "$repo/$v"/*.cuh "$vwork/generated_ops/include/opgen/" || exit 1
    vops_name="MLPQUICK_OPS_$(basename "$v")"; read -r -a vops <<< "${!vops_name:-${quick_ops[*]}}"
    ( cd "$vwork" && opgen build -j 6 "${vops[@]}" > "$OUT/build-variant-$(basename "$v").log" 2>&1 ) &
    variant_builds+=($!)
  done
fi
# NORMTIMES_VARIANTS (normtimes): norm.cuh with some of its constants changed, a variant a word,
# its assignments separated by commas (e.g. "kSliceBatch=4 kLongRowThreads=256,kSliceBatch=4"),
# any of which may instead name a diff (relative to the repo, of generated_ops/include/...,
# ending in .diff) applied to the copy first (e.g. "v.diff,kOptX=4"); each is built beside the
# main build in a copy of the workspace and timed before it.
# NORMTIMES_OPS: the ops timed (and built in the variants' copies); default: all named.
read -r -a norm_variants <<< "${NORMTIMES_VARIANTS:-}"
read -r -a norm_timed <<< "${NORMTIMES_OPS:-${ops[*]}}"
has_mode normtimes || norm_variants=()
for i in "${!norm_variants[@]}"; do
  vwork="$work-norm-variant-$i"; rm -rf "$vwork"; mkdir -p "$vwork"
  cp -r generated_ops "$vwork/" || exit 1
  header="$vwork/generated_ops/include/opgen/norm.cuh"
  for part in ${norm_variants[$i]//,/ }; do
    [[ $part == *.diff ]] || continue
    ( cd "$vwork" && git apply "$repo/$part" ) || { echo "$part does not apply"; exit 2; }
  done
  for assignment in ${norm_variants[$i]//,/ }; do
    [[ $assignment == *.diff ]] && continue
    name=${assignment%%=*}
    grep -qE "^constexpr [a-z0-9_]+ $name = " "$header" || { echo "norm.cuh has no constant $name"; exit 2; }
    sed -i -E "s/^constexpr ([a-z0-9_]+) $name = .*;/constexpr \1 $name = ${assignment#*=};/" "$header"
  done
  ( cd "$vwork" && opgen build -j 6 "${norm_timed[@]}" > "$OUT/build-norm-variant-$i.log" 2>&1 ) &
  variant_builds+=($!)
done
opgen build -j 16 "${ops[@]}" 2>&1 | tee -a "$OUT/build.log" | tail -15 || exit 1

status=0
warming=()
if has_mode quick && [[ " ${QUICK_ARGS:-} " != *" --no-compile "* ]]; then
  # The sweep's torch.compile contenders, compiled in the background (one share a process, two
  # compile workers each) while the tests run; the sweep then loads them from inductor's cache.
  # QUICK_WARM_TIMEOUT (seconds): stop a warm-up process (what it left uncompiled, the sweep compiles).
  shares=${QUICK_WARM:-8}
  for ((share = 0; share < shares; share++)); do
    TORCHINDUCTOR_COMPILE_THREADS=2 timeout "${QUICK_WARM_TIMEOUT:-0}" \
      python3 "$repo/scripts/norm_quick_bench.py" --warm "$share/$shares" \
      "$work/generated_ops" "${ops[@]}" > "$OUT/warm-$share.log" 2>&1 &
    warming+=($!)
  done
fi
# SANITIZE_OPS: the ops to sanitize (default: all named). SANITIZE_TOOLS: the compute-sanitizer
# tools to run (default: all three, one process an op), each in a process of its own (e.g.
# "racecheck initcheck": two processes an op, at once).
read -r -a sanitized <<< "${SANITIZE_OPS:-${ops[*]}}"
read -r -a tools <<< "${SANITIZE_TOOLS:-all}"
# SANITIZE_PIECES (norm ops): run each op's sanitizer pieces (opgen.testing.norm_suite's
# SANITIZER_PIECES, e.g. "short_float32 long_bfloat16", or "all") a process each, all at once,
# for the tools in SANITIZE_PIECE_TOOLS (default: every tool named; the others run every piece in
# one process, "whole"): the command its generated test runs (opgen.testing.sanitizer's
# sanitizer_command), with its output (each row length's seconds) streamed to the log, so a run
# cut off by SANITIZE_TIMEOUT still says where its time went. Clean: exit 0 and a summary of 0
# errors or hazards.
read -r -a pieces <<< "${SANITIZE_PIECES:-}"
[ "${pieces[*]:-}" = all ] && read -r -a pieces <<< "$(python3 -c 'from opgen.testing.norm_suite import SANITIZER_PIECES as p; print(*p)')"
in_pieces() { [ ${#pieces[@]} -gt 0 ]; }
# Whether op's sanitizer run takes pieces (the norm ops' test modules; the others would ignore
# them and run their whole workload once a piece).
takes_pieces() { grep -q "exercise_kernel_paths(\*sys.argv" "$work/generated_ops/$1/test_$1.py" 2>/dev/null; }
pieces_of() {  # tool: its pieces
  if [[ " ${SANITIZE_PIECE_TOOLS:-${tools[*]}} " == *" $1 "* ]]; then echo "${pieces[*]}"; else echo whole; fi
}
sanitizer_line() {  # tool op piece: the sanitizer's command line for one piece ("whole": all)
  python3 -c 'import shlex, sys; from opgen.testing.sanitizer import find_compute_sanitizer, sanitizer_command
tool, op, piece = sys.argv[1:]
module = f"generated_ops.{op}.test_{op}"
print(shlex.join(sanitizer_command(find_compute_sanitizer(), tool, module, [] if piece == "whole" else [piece])))' "$@"
}
sanitizing=()
piece_logs="$work/sanitize-pieces"; rm -rf "$piece_logs"; mkdir -p "$piece_logs"
start_sanitizers() {  # in the background
  for op in "${sanitized[@]}"; do
    for tool in "${tools[@]}"; do
      if in_pieces && takes_pieces "$op"; then
        for piece in $(pieces_of "$tool"); do
          # SANITIZE_JOBS: at most this many pieces at once (default 16).
          while [ "$(jobs -rp | wc -l)" -ge "${SANITIZE_JOBS:-16}" ]; do wait -n; done
          # A piece's log is written beside the workspace and appended to $OUT/sanitize-pieces.log
          # when the piece ends: a call cut off by its limit still returns every finished piece
          # (32 logs of their own under $OUT were more files than a call brings back).
          log="$piece_logs/$op-$tool-$piece.log"
          line=$(sanitizer_line "$tool" "$op" "$piece")
          ( began=$SECONDS
            export PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONPATH="$work${PYTHONPATH:+:$PYTHONPATH}"
            eval "timeout ${SANITIZE_TIMEOUT:-0} $line" > "$log" 2>&1
            echo "exit $? after $((SECONDS - began)) s" >> "$log"
            { echo "== $op $tool $piece"; cat "$log"; } | flock "$OUT/sanitize-pieces.log" tee -a "$OUT/sanitize-pieces.log" > /dev/null ) &
          sanitizing+=($!)
        done
        continue
      fi
      # SANITIZE_TIMEOUT (seconds): stop a sanitizer run that would leave no time for what follows.
      log="$OUT/sanitize-$op-$tool.log"
      ( if [ "$tool" = all ]; then timeout "${SANITIZE_TIMEOUT:-0}" opgen test "$op" --sanitize
        else timeout "${SANITIZE_TIMEOUT:-0}" opgen test "$op" --sanitize -k "$tool"; fi > "$log" 2>&1
        echo "exit $?" >> "$log" ) &
      sanitizing+=($!)
    done
  done
}
# Whole-op sanitizer runs overlap the plain tests. Pieces start after them: 34 sanitizer
# processes beside the tests starved them on the H200 (2026-11-25: 6 tests an op in ~140 s).
if has_mode sanitize && ! { in_pieces && has_mode test; }; then start_sanitizers; fi
if has_mode test; then
  # TEST_K: a pytest -k expression (e.g. cuda) to run only part of the tests. TEST_SPLIT=1: one
  # `opgen test` process an op, all at once (the GPU machine's cores run them side by side), then
  # the 2^31-element tests one op at a time: each needs most of the GPU's memory (side by side,
  # one ran out of memory on 2026-11-25).
  if [ "${TEST_SPLIT:-0}" = 1 ]; then
    testing=()
    for op in "${ops[@]}"; do
      ( opgen test "$op" -k "(${TEST_K:-cuda or cpu}) and not 2_31" > "$OUT/test-$op.log" 2>&1
        echo "exit $?" >> "$OUT/test-$op.log" ) &
      testing+=($!)
    done
    wait "${testing[@]}"
    for op in "${ops[@]}"; do
      log="$OUT/test-$op-2_31.log"
      opgen test "$op" -k "(${TEST_K:-cuda or cpu}) and 2_31" > "$log" 2>&1
      echo "exit $?" >> "$log"
      # pytest's exit code 5, nothing selected: TEST_K left the 2^31-element tests out
      grep -q "pytest exit code 5" "$log" && echo "exit 0 (no 2^31-element test selected)" > "$log"
    done
    for op in "${ops[@]}"; do
      for log in "$OUT/test-$op.log" "$OUT/test-$op-2_31.log"; do
        summary=$(grep -E '^=+ .*(passed|failed|error)' "$log" | tail -1)
        echo "== test $op$([[ $log == *2_31* ]] && echo ' (2^31)'): ${summary:-$(tail -1 "$log")}"
        grep -q "^exit 0" "$log" || status=1
      done
    done
    cat "$OUT"/test-*.log > "$OUT/test.log" && rm "$OUT"/test-*.log
  else
    opgen test "${ops[@]}" ${TEST_K:+-k "$TEST_K"} 2>&1 | tee "$OUT/test.log" | tail -25
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
  if grep -q "no CUDA GPU found" "$OUT/test.log"; then echo "CUDA tests were skipped on a GPU machine"; status=1; fi
fi
if has_mode sanitize && in_pieces && has_mode test; then start_sanitizers; fi
if has_mode multi; then
  opgen test "${ops[@]}" -k "second_gpu or different_gpus or ddp" 2>&1 | tee "$OUT/multi.log" | tail -25
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  if grep -q "needs two CUDA GPUs" "$OUT/multi.log"; then echo "multi-GPU tests were skipped"; status=1; fi
fi
if has_mode sanitize; then
  wait "${sanitizing[@]}"
  for op in "${sanitized[@]}"; do
    for tool in "${tools[@]}"; do
      if in_pieces && takes_pieces "$op"; then
        for piece in $(pieces_of "$tool"); do
          log="$piece_logs/$op-$tool-$piece.log"
          summary=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$log" | tail -1 | sed 's/^=* *//')
          echo "== sanitize $op ($tool, $piece): ${summary:-no summary}; $(tail -1 "$log")"
          grep -q "^exit 0 " "$log" && grep -qE "SUMMARY: 0 (errors|hazards)" "$log" || status=1
        done
        continue
      fi
      log="$OUT/sanitize-$op-$tool.log"
      echo "== sanitize $op ($tool): $(grep -E '^=+ .*(passed|failed|skipped|error)' "$log" | tail -1) $(tail -1 "$log")"
      grep -q "^exit 0$" "$log" || status=1
      grep -q "skipped" "$log" && status=1
    done
  done
  if compgen -G "$OUT/sanitize-*-*.log" > /dev/null; then
    cat "$OUT"/sanitize-*-*.log > "$OUT/sanitize.log" && rm "$OUT"/sanitize-*-*.log
  fi
fi
if has_mode quick; then
  if [ ${#warming[@]} -gt 0 ]; then
    began=$SECONDS
    wait "${warming[@]}"
    echo "== warm-up: waited $((SECONDS - began)) s after the tests"
    cat "$OUT"/warm-*.log > "$OUT/warm.log" && rm "$OUT"/warm-*.log
  fi
  python3 "$repo/scripts/norm_quick_bench.py" "$work/generated_ops" "${ops[@]}" ${QUICK_ARGS:-} 2>&1 | tee "$OUT/quick.log"
fi
if has_mode profile; then
  for op in "${ops[@]}"; do
    case $op in linear_gelu) ;; *) continue ;; esac  # the script calls it as linear_gelu(x, w, b)
    # PROFILE_SHAPES: the shapes to profile, e.g. "32x768->3072" (default: the script's four).
    read -r -a shapes <<< "${PROFILE_SHAPES:-}"
    PYTHONPATH="$work${PYTHONPATH:+:$PYTHONPATH}" python3 "$repo/scripts/linear_profile.py" "$op" "${shapes[@]}" 2>&1 | tee "$OUT/profile-$op.log"
  done
fi
if has_mode mlpquick; then
  if [ ${#variant_builds[@]} -gt 0 ]; then
    wait "${variant_builds[@]}"
    cat "$OUT"/build-variant-*.log >> "$OUT/build.log" && rm "$OUT"/build-variant-*.log
  fi
  for v in "${variants[@]}"; do
    vwork="$work-variant-$(basename "$v")"
    vops_name="MLPQUICK_OPS_$(basename "$v")"; read -r -a vops <<< "${!vops_name:-${quick_ops[*]}}"
    vargs_name="MLPQUICK_ARGS_$(basename "$v")"
    echo "== variant $v" | tee -a "$OUT/mlpquick.log"
    PYTHONPATH="$vwork${PYTHONPATH:+:$PYTHONPATH}" python3 "$repo/scripts/mlp_quick_bench.py" "$vwork/generated_ops" \
      "${vops[@]}" ${!vargs_name:-${MLPQUICK_ARGS:-}} 2>&1 | tee -a "$OUT/mlpquick.log"
  done
  [ ${#variants[@]} -gt 0 ] && echo "== this tree" | tee -a "$OUT/mlpquick.log"
  PYTHONPATH="$work${PYTHONPATH:+:$PYTHONPATH}" python3 "$repo/scripts/mlp_quick_bench.py" "$work/generated_ops" \
    "${quick_ops[@]}" ${MLPQUICK_ARGS:-} 2>&1 | tee -a "$OUT/mlpquick.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
if has_mode normtimes; then
  if [ ${#variant_builds[@]} -gt 0 ]; then
    wait "${variant_builds[@]}"
    cat "$OUT"/build-norm-variant-*.log >> "$OUT/build.log" && rm "$OUT"/build-norm-variant-*.log
  fi
  read -r -a shapes <<< "${NORMTIMES_SHAPES:-bfloat16 8192x32768 4096x65536 2048x131072 1024x262144 float32 4096x32768 2048x65536 512x262144}"
  # NORMTIMES_FORWARD=1: the forward only, every op in one process a build
  # (scripts/norm_forward_times.py: the op, eager and a copy side by side), instead of the training
  # step kernel by kernel. NORMTIMES_REPEAT=1: the first variant timed again after the tree.
  order=("${!norm_variants[@]}" this)
  [ "${NORMTIMES_REPEAT:-0}" = 1 ] && [ ${#norm_variants[@]} -gt 0 ] && order+=(0)
  for i in "${order[@]}"; do
    if [ "$i" = this ]; then vwork=$work; echo "== this tree" | tee -a "$OUT/normtimes.log"
    else vwork="$work-norm-variant-$i"; echo "== variant ${norm_variants[$i]}" | tee -a "$OUT/normtimes.log"; fi
    if [ "${NORMTIMES_FORWARD:-0}" = 1 ]; then
      timed_list=$(IFS=,; echo "${norm_timed[*]}")
      # NORMTIMES_EACH_S: stop one build's timing after this many seconds (a variant that hangs).
      timeout "${NORMTIMES_EACH_S:-0}" python3 "$repo/scripts/norm_forward_times.py" "$vwork/generated_ops" "$timed_list" "${shapes[@]}" 2>&1 | tee -a "$OUT/normtimes.log"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      continue
    fi
    for op in "${norm_timed[@]}"; do
      python3 "$repo/scripts/norm_kernel_times.py" "$vwork/generated_ops" "$op" "${shapes[@]}" 2>&1 | tee -a "$OUT/normtimes.log"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    done
  done
fi
if has_mode bench; then
  # In the order named; BENCH_BUDGET_S (seconds since the script began) stops starting new ops,
  # and the tarball is rewritten after each op, so a run cut off at its limit still returns
  # every op it finished.
  # BENCH_OPS: the ops to bench (default: all named but the skeletons and lin_* variants).
  read -r -a benched <<< "${BENCH_OPS:-${ops[*]}}"
  for op in "${benched[@]}"; do
    [ -z "${BENCH_OPS:-}" ] && case $op in my_op|row_op|sig_*|lin_*) continue ;; esac
    if [ -n "${BENCH_BUDGET_S:-}" ] && [ "$SECONDS" -ge "$BENCH_BUDGET_S" ]; then
      echo "== bench $op: not run (${SECONDS}s past the budget of ${BENCH_BUDGET_S}s)" | tee -a "$OUT/bench.log"
      continue
    fi
    mkdir -p "$OUT/benchmarks/$op"
    began=$SECONDS
    # BENCH_ARGS: more `opgen bench` options (e.g. --no-compile where device time is short).
    opgen bench "$op" --json "$OUT/benchmarks/$op/$op.json" --plot "$OUT/benchmarks/$op/$op.png" \
      --markdown "$OUT/benchmarks/$op/$op.md" ${BENCH_ARGS:-} >> "$OUT/bench.log" 2>&1 || status=1
    echo "== bench $op: $((SECONDS - began)) s" | tee -a "$OUT/bench.log"
    tar -czf "$OUT/benchmarks.tar.gz" -C "$OUT" benchmarks
  done
  rm -rf "$OUT/benchmarks"
fi
exit $status

"""Quick timing of the norm ops on a GPU: opgen against eager PyTorch, torch.compile and a device copy.

A tuning aid for the GPU machine (scripts/gpu_session.sh's `quick` mode): every op, row length,
dtype and pass in one call, with fewer samples than `opgen bench`. The torch.compile contender is
opgen.bench's (`compiled_for_this_shape`: compiled afresh for each shape, static shapes), which
costs a compilation per shape and pass; so that one call stays bounded:
- `--warm I/N` only compiles (share I of N of the workloads, each called once), to fill inductor's
  on-disk caches from N processes at once while the GPU machine does other work (its tests); the
  measuring run then loads each compiled graph from the cache;
- the measuring run first deletes inductor's remembered autotuning choices (*.best_config), so
  its kernels' configurations are chosen again here, on an otherwise idle GPU, not in the warm-up
  processes that share it;
- `--compile-budget S`: past S seconds of the sweep, the rest is timed without torch.compile (the
  lines say so).
Prints one line per (op, dtype, pass, row length): GB/s and % of copy of each contender, and how
long the compile contender's first call took (a compilation, or a load from the cache).

    python3 scripts/norm_quick_bench.py WORKSPACE OP [OP...] [--no-compile] [--compile-budget S]
    python3 scripts/norm_quick_bench.py --warm I/N WORKSPACE OP [OP...]
    python3 scripts/norm_quick_bench.py --report LOG OP OUT_DIR [ENVIRONMENT_JSON]
        (OP's lines of a saved log as OUT_DIR/OP.json, .md and .png, through opgen.bench)
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from opgen.bench import (
    Measurement,
    Report,
    Workload,
    _copy_contender,
    compiled_for_this_shape,
    markdown_table,
    plot,
    time_side_by_side,
    write_json,
)

CONTENDERS = ("opgen", "eager", "compile", "copy")

BYTES = {"bfloat16": 2, "float32": 4}
TENSORS = {  # (forward, forward+backward) tensors of x's size, as the generated bench counts them
    "layernorm": (2, 5), "rmsnorm": (2, 5), "add_layernorm": (4, 8), "add_rmsnorm": (4, 8),
}  # fmt: skip


def report(log: Path, op: str, out_dir: Path, environment: dict[str, object]) -> None:
    """OP's lines of a log of this script as opgen.bench's JSON, markdown table and plot."""
    result = Report(op=op, environment=environment)
    for line in log.read_text().splitlines():
        fields = line.replace("|", " ").split()
        if not fields or fields[0] != op:
            continue
        _, dtype, direction, workload = fields[:4]
        rows, cols = map(int, workload.split("x"))
        tensors = TENSORS[op][0 if direction == "forward" else 1]
        bytes_moved = rows * cols * BYTES[dtype] * tensors
        gbps = {fields[i]: float(fields[i + 1]) for i in range(4, len(fields) - 1) if fields[i] in CONTENDERS}
        for name, value in gbps.items():
            median_ms = bytes_moved / (value * 1e9) * 1e3
            measurement = Measurement(
                op=op, direction="forward+backward" if direction == "fwd+bwd" else direction, contender=name,
                workload=workload, dtype=dtype, device="cuda", numel=rows * cols, bytes_moved=bytes_moved,
                median_ms=median_ms, gbps=value, percent_of_copy=100 * value / gbps["copy"],
                speedup_vs_eager=value / gbps["eager"] if "eager" in gbps else None,
                speedup_vs_compile=value / gbps["compile"] if "compile" in gbps else None,
            )  # fmt: skip
            result.measurements.append(measurement)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(result, out_dir / f"{op}.json")
    (out_dir / f"{op}.md").write_text(markdown_table(result))
    plot(result, out_dir / f"{op}.png")


Case = tuple[str, torch.dtype, str, Workload, Callable[..., Any], Callable[..., Any]]


def cases(workspace: Path, ops: list[str]) -> Iterator[Case]:
    """(op, dtype, pass, workload, opgen's call, eager's call) in the order the sweep times them."""
    sys.path.insert(0, str(workspace.parent))
    for op in ops:
        bench = importlib.import_module(f"{workspace.name}.{op}.bench_{op}")
        for dtype in (torch.bfloat16, torch.float32):
            for label, tensors, grad, fn, eager in (
                ("forward", bench.FORWARD_TENSORS, False, bench.forward, bench.reference),
                (
                    "fwd+bwd",
                    bench.TRAINING_STEP_TENSORS,
                    True,
                    bench.step_of(bench.forward),
                    bench.step_of(bench.reference),
                ),
            ):
                for workload in bench.workloads_of(tensors, grad)(dtype, "cuda", 0, 0):
                    yield op, dtype, label, workload, fn, eager


def compiled(eager: Callable[..., Any], inputs: tuple[torch.Tensor, ...]) -> tuple[Callable[..., Any], float]:
    """opgen.bench's torch.compile contender for these inputs, and the seconds its first call took."""
    began = time.perf_counter()
    fn = compiled_for_this_shape(eager)
    fn(*inputs)
    torch.cuda.synchronize()
    return fn, time.perf_counter() - began


def warm(workspace: Path, ops: list[str], share: int, shares: int) -> None:
    """Compile share ``share`` of ``shares`` of the sweep's compile contenders, filling inductor's caches."""
    for index, (op, dtype, label, workload, _, eager) in enumerate(cases(workspace, ops)):
        if index % shares != share:
            continue
        inputs = workload.make_inputs()
        _, seconds = compiled(eager, inputs)
        print(
            f"warm {op:14s} {str(dtype)[6:]:9s} {label:8s} {workload.label:>14s} compiled in {seconds:5.1f} s",
            flush=True,
        )
        del inputs


def forget_autotuning() -> int:
    """Deletes inductor's remembered autotuning choices (see the module's docstring); how many."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    choices = list(Path(cache_dir()).rglob("*.best_config"))
    for path in choices:
        path.unlink(missing_ok=True)
    return len(choices)


def sweep(workspace: Path, ops: list[str], with_compile: bool, compile_budget: float | None) -> None:
    if with_compile:
        print(f"(forgot {forget_autotuning()} autotuning choices of the warm-up)", flush=True)
    began = time.perf_counter()
    for op, dtype, label, workload, fn, eager in cases(workspace, ops):
        inputs = workload.make_inputs()
        contenders: dict[str, Callable[[], object]] = {
            "opgen": lambda fn=fn, inputs=inputs: fn(*inputs),
            "eager": lambda eager=eager, inputs=inputs: eager(*inputs),
        }
        note = ""
        if with_compile and (compile_budget is None or time.perf_counter() - began < compile_budget):
            compiled_fn, seconds = compiled(eager, inputs)
            contenders["compile"] = lambda compiled_fn=compiled_fn, inputs=inputs: compiled_fn(*inputs)
            note = f" (first call {seconds:.1f} s)"
        elif with_compile:
            note = " (torch.compile not timed: past the budget)"
        contenders["copy"] = _copy_contender(inputs, workload.bytes_moved)
        medians = time_side_by_side(contenders, "cuda", warmup=3, repetitions=10)
        gbps = {name: workload.bytes_moved / (ms * 1e-3) / 1e9 for name, ms in medians.items()}
        cells = [
            f"{name} {gbps[name]:5.0f} GB/s {100 * gbps[name] / gbps['copy']:5.1f}%" for name in gbps if name != "copy"
        ]
        print(
            f"{op:14s} {str(dtype)[6:]:9s} {label:8s} {workload.label:>14s} "
            + " | ".join(cells) + f" | copy {gbps['copy']:5.0f} GB/s{note}",
            flush=True,
        )  # fmt: skip
        del inputs, contenders
    print(f"(sweep took {time.perf_counter() - began:.0f} s)", flush=True)


def main() -> None:
    if sys.argv[1] == "--report":
        import json

        environment = json.loads(Path(sys.argv[5]).read_text()) if len(sys.argv) > 5 else {}
        report(Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), environment)
        return
    parser = argparse.ArgumentParser(description="Quick timing of the norm ops (see the module's docstring).")
    parser.add_argument("workspace", type=Path)
    parser.add_argument("ops", nargs="+")
    parser.add_argument("--no-compile", action="store_true", help="leave the torch.compile contender out")
    parser.add_argument("--compile-budget", type=float, help="seconds of the sweep after which compile is left out")
    parser.add_argument("--warm", metavar="I/N", help="only compile share I of N (0 <= I < N) of the workloads")
    options = parser.parse_args()
    workspace = options.workspace.resolve()
    if options.warm:
        share, shares = map(int, options.warm.split("/"))
        warm(workspace, options.ops, share, shares)
    else:
        sweep(workspace, options.ops, not options.no_compile, options.compile_budget)


if __name__ == "__main__":
    main()

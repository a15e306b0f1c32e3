"""Timing and reporting shared by the ops' generated benchmarks.

A benchmark file declares its shapes and calls :func:`run_benchmark`; everything else lives here:
fresh non-zero inputs, warm-up, CUDA-event timing with the median of many samples, the
bytes-moved model, and, side by side in the same run, the op, PyTorch eager, torch.compile of
the reference, and a device copy of the same bytes (the practical bandwidth ceiling).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import platform
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

# A few L2s' worth (an H200 has 60 MB): flushing before each timed call means every input is
# read from device memory, as in a real model where activations do not stay in cache.
L2_FLUSH_BYTES = 256 * 2**20

# CUDA events tick about every half microsecond, so a call of a few microseconds reads as one of
# two or three values, and the median of such readings jumps between them: 5 µs calls on an
# H200 gave medians 10% apart from one run to the next. A sample is therefore the mean of enough
# consecutive calls to span SAMPLE_SPAN_MS (at most MAX_CALLS_PER_SAMPLE), which averages the
# tick away; a call of SAMPLE_SPAN_MS or more is a sample on its own.
SAMPLE_SPAN_MS = 0.1
MAX_CALLS_PER_SAMPLE = 20

# Contenders take turns, a few samples each per round, so that a drift of clocks or temperature
# during a run weighs on all of them alike rather than on whichever was timed first.
ROUNDS = 5


@dataclass(frozen=True)
class Workload:
    """One shape to time: how to make its inputs and how many bytes a pass must move."""

    label: str
    numel: int
    make_inputs: Callable[[], tuple[torch.Tensor, ...]]
    # Each input read once, each output written once: the fewest bytes any kernel can move.
    bytes_moved: int
    # The arithmetic of one pass, for compute-bound (GEMM-class) ops: when set, the report gives
    # TFLOP/s, and the ceiling beside the op is the plain GEMM (an extra contender) rather than a copy.
    flops: float = 0.0


# Flat tensors of 1 MiB to 1 GiB each on a GPU, whatever the dtype (the L2 is 50-60 MB, so the
# large ones stream from device memory); smaller on the CPU.
FLAT_TENSOR_BYTES = {"cuda": [2**20, 2**24, 2**28, 2**30], "cpu": [2**18, 2**22]}
# Row lengths from short (several rows per warp) to very long (a row bigger than one block can
# hold), at a fixed size of each tensor in bytes, whatever its dtype: 256 MiB on a GPU (2^26
# float32 or 2^27 bfloat16 values), far above its L2.
ROW_LENGTHS = [128, 1024, 4096, 16384, 65536, 262144]
ROWS_TENSOR_BYTES = {"cuda": 2**28, "cpu": 2**22}


def flat_shapes(element_bytes: int, device: str) -> list[tuple[int, ...]]:
    return [(size // element_bytes,) for size in FLAT_TENSOR_BYTES[device]]


def row_shapes(element_bytes: int, device: str) -> list[tuple[int, ...]]:
    total = ROWS_TENSOR_BYTES[device] // element_bytes
    return [(total // row_length, row_length) for row_length in ROW_LENGTHS if row_length <= total]


def tensor_workloads(
    shapes: Callable[[int, str], Sequence[tuple[int, ...]]], dtype: torch.dtype, device: str, reads: int, writes: int
) -> list[Workload]:
    """One workload per shape; a pass reads ``reads`` tensors of the shape and writes ``writes``."""

    def make(shape: Sequence[int]) -> tuple[torch.Tensor, ...]:
        return tuple(torch.randn(*shape, device=device, dtype=torch.float32).to(dtype) * 3 for _ in range(reads))

    element_bytes = torch.empty((), dtype=dtype).element_size()
    return [
        Workload(
            label="x".join(map(str, shape)),
            numel=math.prod(shape),
            make_inputs=functools.partial(make, shape),
            bytes_moved=math.prod(shape) * element_bytes * (reads + writes),
        )
        for shape in shapes(element_bytes, device)
    ]


def flat_workloads(dtype: torch.dtype, device: str, reads: int, writes: int) -> list[Workload]:
    """The workloads of an elementwise op: flat tensors (FLAT_TENSOR_BYTES)."""
    return tensor_workloads(flat_shapes, dtype, device, reads, writes)


def row_workloads(dtype: torch.dtype, device: str, reads: int, writes: int) -> list[Workload]:
    """The workloads of an op over the last dimension: 2-d tensors of ROW_LENGTHS."""
    return tensor_workloads(row_shapes, dtype, device, reads, writes)


def linear_flops(rows: int, in_features: int, out_features: int, *, backward: bool = False) -> float:
    """The FLOPs of a linear layer's GEMMs, a multiply and an add per term.

    2 M N K forward; the backward adds the input-gradient and the weight-gradient GEMMs, as much
    again each. Bias and activation are left out, as in every TFLOP/s figure of a GEMM.
    """
    return 2.0 * rows * in_features * out_features * (3 if backward else 1)


def linear_workload(
    rows: int,
    in_features: int,
    out_features: int,
    dtype: torch.dtype,
    device: str,
    *,
    backward: bool = False,
    bias: bool = True,
) -> Workload:
    """One linear-layer shape: x (rows, in_features), weight (out_features, in_features), bias.

    Fresh normal values scaled as a layer's, requiring a gradient for ``backward``; the inputs
    are (x, weight, bias), or (x, weight) without ``bias``.
    """

    def make() -> tuple[torch.Tensor, ...]:
        x = torch.randn(rows, in_features, device=device, dtype=dtype)
        weight = torch.randn(out_features, in_features, device=device, dtype=dtype) * in_features**-0.5
        tensors = (x, weight, torch.randn(out_features, device=device, dtype=dtype)) if bias else (x, weight)
        return tuple(t.requires_grad_(backward) for t in tensors)

    element_bytes = torch.empty((), dtype=dtype).element_size()
    moved = (rows * in_features + out_features * in_features + rows * out_features) * element_bytes
    moved += out_features * element_bytes if bias else 0
    return Workload(
        label=f"{rows}x{in_features}->{out_features}",
        numel=rows * out_features,
        make_inputs=make,
        bytes_moved=moved * (3 if backward else 1),
        flops=linear_flops(rows, in_features, out_features, backward=backward),
    )


def mlp_flops(rows: int, widths: Sequence[int], *, backward: bool = False) -> float:
    """The FLOPs of an MLP's GEMMs at its own widths (unpadded), as linear_flops layer by layer."""
    return sum(linear_flops(rows, n_in, n_out, backward=backward) for n_in, n_out in itertools.pairwise(widths))


def mlp_workload(
    rows: int,
    widths: Sequence[int],
    dtype: torch.dtype,
    device: str,
    *,
    backward: bool = False,
    bias: bool = True,
) -> Workload:
    """One batch through an MLP: x (rows, widths[0]) and each layer's weight (and bias).

    Scaled as nn.Linear's; the inputs are (x, w1, b1, w2, b2, ...), requiring a gradient for ``backward``.

    Its bytes are x read and y written (and, for ``backward``, the incoming gradient read and x's
    gradient written): what a fully fused network must move; the weights are negligible.
    """

    def make() -> tuple[torch.Tensor, ...]:
        tensors = [torch.randn(rows, widths[0], device=device, dtype=dtype)]
        for n_in, n_out in itertools.pairwise(widths):
            tensors.append(torch.randn(n_out, n_in, device=device, dtype=dtype) * n_in**-0.5)
            if bias:
                tensors.append(torch.randn(n_out, device=device, dtype=dtype) * 0.5)
        return tuple(t.requires_grad_(backward) for t in tensors)

    element_bytes = torch.empty((), dtype=dtype).element_size()
    moved = rows * (widths[0] + widths[-1]) * element_bytes
    return Workload(
        label=f"{rows}x{'-'.join(map(str, widths))}",
        numel=rows * widths[-1],
        make_inputs=make,
        bytes_moved=moved * (2 if backward else 1),
        flops=mlp_flops(rows, widths, backward=backward),
    )


def with_gradients(forward: Callable[..., torch.Tensor]) -> Callable[..., Any]:
    """A training step of ``forward``: the call, then the gradients of every input that requires one.

    By torch.autograd.grad, so nothing accumulates into .grad between timed calls.
    """

    def step(*inputs: torch.Tensor) -> Any:
        out = forward(*inputs)
        wanted = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
        return torch.autograd.grad(out, wanted, torch.ones_like(out))

    return step


@dataclass
class Measurement:
    """One contender on one workload."""

    op: str
    direction: str
    contender: str
    workload: str
    dtype: str
    device: str
    numel: int
    bytes_moved: int
    median_ms: float
    gbps: float
    percent_of_copy: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    tflops: float | None = None  # compute-bound workloads (Workload.flops)


@dataclass
class Report:
    """Everything a run measured, with the environment that produced it."""

    op: str
    environment: dict[str, Any]
    measurements: list[Measurement] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({"op": self.op, "environment": self.environment,
                           "measurements": [asdict(m) for m in self.measurements]}, indent=2)  # fmt: skip


def environment(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "device": device,
        "bytes_model": "each input read once, each output written once",
        "timing": (
            f"median of samples after warm-up, the contenders taking turns over {ROUNDS} rounds; CUDA"
            " events on GPU (L2 flushed before each call; a sample averages consecutive calls spanning"
            f" {SAMPLE_SPAN_MS} ms, at most {MAX_CALLS_PER_SAMPLE}), perf_counter on CPU (a sample is"
            " one call)"
        ),
    }
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
        info["gpu_capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
    else:
        info["cpu"] = platform.processor() or platform.machine()
    return info


def calls_per_sample(call_ms: float) -> int:
    """Consecutive calls averaged into one sample, for calls taking about ``call_ms``."""
    if call_ms <= 0:
        return MAX_CALLS_PER_SAMPLE
    return max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(SAMPLE_SPAN_MS / call_ms)))


def median_of_sample_means(call_times: Sequence[float], calls: int) -> float:
    """The median over samples of ``calls`` consecutive call times each, of their means."""
    samples = [statistics.fmean(call_times[i : i + calls]) for i in range(0, len(call_times) - calls + 1, calls)]
    return statistics.median(samples)


def _event_times_ms(fn: Callable[[], object], calls: int, flush: torch.Tensor) -> list[float]:
    """Milliseconds of each of ``calls`` calls of ``fn()``, by CUDA events, L2 flushed before each."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    torch.cuda.synchronize()
    for start, end in zip(starts, ends, strict=True):
        flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)]


def _clock_times_ms(fn: Callable[[], object], calls: int) -> list[float]:
    """Milliseconds of each of ``calls`` calls of ``fn()``, by the CPU's clock."""
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1e3)
    return times


def time_side_by_side(
    contenders: dict[str, Callable[[], object]], device: str, *, warmup: int = 10, repetitions: int = 50
) -> dict[str, float]:
    """Median milliseconds of each contender's call over ``repetitions`` samples, after warm-up.

    The contenders take turns (ROUNDS; the samples are rounded up to whole rounds). On a GPU the
    L2 is flushed before each call, and a sample of a short call is the mean of several (see
    SAMPLE_SPAN_MS); timed warm-up calls tell how many. On a CPU a sample is one call.
    """
    measure: Callable[[Callable[[], object], int], list[float]] = _clock_times_ms
    if device == "cuda":
        flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)
        measure = functools.partial(_event_times_ms, flush=flush)
    calls: dict[str, int] = {}
    for name, fn in contenders.items():
        fn()  # the first call may compile or allocate: not part of the estimate
        warm = measure(fn, max(1, warmup - 1))
        calls[name] = calls_per_sample(statistics.median(warm)) if device == "cuda" else 1
    times: dict[str, list[float]] = {name: [] for name in contenders}
    samples_per_round = math.ceil(repetitions / ROUNDS)
    for _ in range(ROUNDS):
        for name, fn in contenders.items():
            times[name] += measure(fn, samples_per_round * calls[name])
    return {name: median_of_sample_means(times[name], calls[name]) for name in contenders}


def _copy_contender(inputs: tuple[torch.Tensor, ...], bytes_moved: int) -> Callable[[], object]:
    """A device-to-device copy moving ``bytes_moved`` bytes (half read, half written)."""
    source = torch.empty(bytes_moved // 2, dtype=torch.uint8, device=inputs[0].device).random_(1, 255)
    target = torch.empty_like(source)
    return lambda: target.copy_(source)


def compiled_for_this_shape(fn: Callable[..., Any]) -> Callable[..., Any]:
    """torch.compile of ``fn`` as a user with one shape gets it: static shapes, compiled afresh.

    One compiled function reused across a sweep would be recompiled by dynamo with dynamic shapes
    from the second shape on (and fall back to eager past its recompile limit), which is slower
    than what any user of a fixed shape runs; so each workload starts from a reset dynamo.
    """
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False)


def run_benchmark(
    op: str,
    workloads: Sequence[Workload],
    *,
    forward: Callable[..., torch.Tensor],
    reference: Callable[..., torch.Tensor],
    backward: Callable[..., Any] | None = None,
    reference_backward: Callable[..., Any] | None = None,
    backward_workloads: Sequence[Workload] = (),
    dtype: torch.dtype,
    device: str,
    include_compile: bool = True,
    repetitions: int = 50,
    backward_direction: str = "backward",
    extra: Mapping[str, Callable[..., Any]] | None = None,
    backward_extra: Mapping[str, Callable[..., Any]] | None = None,
    compile_backward: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
) -> list[Measurement]:
    """Time every contender on every workload; fills in GB/s (TFLOP/s), % of copy and speed-ups.

    ``extra`` (``backward_extra``) are more contenders of the forward (backward) direction, called
    with the workload's inputs, such as the plain GEMM beside a GEMM-class op. torch.compile
    compiles the eager reference of each direction, or ``compile_backward(reference_backward)``
    where given (a training step compiles its forward, not autograd.grad). A GPU workload without
    FLOPs has a device copy of its bytes beside it (the bandwidth ceiling). ``backward_direction``
    names the second pass in the report ("forward+backward" where the timed call runs both, as a
    training step does).
    """
    results: list[Measurement] = []
    Direction = tuple[
        str, Sequence[Workload], Callable[..., Any], Callable[..., Any], Mapping[str, Callable[..., Any]],
        Callable[[Callable[..., Any]], Callable[..., Any]],
    ]  # fmt: skip
    directions: list[Direction] = [("forward", workloads, forward, reference, extra or {}, compiled_for_this_shape)]
    if backward is not None and reference_backward is not None:
        compile_it = compile_backward or compiled_for_this_shape
        directions.append(
            (backward_direction, backward_workloads, backward, reference_backward, backward_extra or {}, compile_it)
        )
    for direction, direction_workloads, candidate, eager, others, compile_it in directions:
        for workload in direction_workloads:
            inputs = workload.make_inputs()
            contenders: dict[str, Callable[[], object]] = {
                "opgen": functools.partial(candidate, *inputs),
                "eager": functools.partial(eager, *inputs),
            }
            if include_compile:
                contenders["compile"] = functools.partial(compile_it(eager), *inputs)
            contenders |= {name: functools.partial(fn, *inputs) for name, fn in others.items()}
            if device == "cuda" and not workload.flops:
                contenders["copy"] = _copy_contender(inputs, workload.bytes_moved)
            rows = {}
            medians = time_side_by_side(contenders, device, repetitions=repetitions)
            for name, median in medians.items():
                rows[name] = Measurement(
                    op=op, direction=direction, contender=name, workload=workload.label,
                    dtype=str(dtype).removeprefix("torch."), device=device, numel=workload.numel,
                    bytes_moved=workload.bytes_moved, median_ms=median,
                    gbps=workload.bytes_moved / (median * 1e-3) / 1e9,
                    tflops=workload.flops / (median * 1e-3) / 1e12 if workload.flops else None,
                )  # fmt: skip
            for row in rows.values():
                if "copy" in rows:
                    row.percent_of_copy = 100 * row.gbps / rows["copy"].gbps
                row.speedup_vs_eager = rows["eager"].median_ms / row.median_ms
                if "compile" in rows:
                    row.speedup_vs_compile = rows["compile"].median_ms / row.median_ms
            results.extend(rows.values())
            del inputs
    return results


# The table's names for the directions the JSON spells out.
_SHORT_DIRECTIONS = {"forward": "fwd", "backward": "bwd", "forward+backward": "fwd+bwd"}


def print_table(measurements: Sequence[Measurement], title: str, *, width: int | None = None) -> None:
    """A rich table, one row per (direction, workload, contender), that fits an 80-column terminal.

    Columns with nothing to say are left out: the dtype when the title names the only one, % copy
    where no device copy was timed (the CPU, compute-bound ops).
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    compute = any(m.tflops is not None for m in measurements)
    tail = _shared_shape_tail([m.workload for m in measurements])
    if tail:  # the column holds N, the title the rest
        title = f"{title}, shapes N{tail}"
    cells: dict[str, list[str]] = {
        "dir": [_SHORT_DIRECTIONS.get(m.direction, m.direction) for m in measurements],
        "N" if tail else "shape": [m.workload.removesuffix(tail) for m in measurements],
        "dtype": [m.dtype for m in measurements],
        "contender": [m.contender for m in measurements],
        "ms": [f"{m.median_ms:.4f}" for m in measurements],
        "TFLOP/s" if compute else "GB/s": [_rate(m) for m in measurements],
        "% copy": ["" if m.percent_of_copy is None else f"{m.percent_of_copy:.1f}" for m in measurements],
        "vs eager": ["" if m.speedup_vs_eager is None else f"{m.speedup_vs_eager:.2f}x" for m in measurements],
        "vs compile": ["" if m.speedup_vs_compile is None else f"{m.speedup_vs_compile:.2f}x" for m in measurements],
    }
    if len(set(cells["dtype"])) <= 1:
        del cells["dtype"]
    shown = {name: column for name, column in cells.items() if any(column)}
    table = Table(title=title, box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    for name, column in shown.items():
        justify: Literal["left", "right"] = "left" if name in ("dir", "shape", "N", "contender") else "right"
        table.add_column(name, justify=justify, no_wrap=True, min_width=max(len(name), *map(len, column)))
    for row in zip(*shown.values(), strict=True):
        table.add_row(*row)
    Console(width=width).print(table)


def _shared_shape_tail(shapes: Sequence[str]) -> str:
    """The "x..." end every shape label shares (an MLP's widths: 4194304x100-128-64-10), or "".

    The table shows what varies and the title the rest: with the widths in every row, an MLP's
    table was 82 columns and an 80-column terminal cut its last one.
    """
    if len(set(shapes)) < 2 or any("x" not in shape for shape in shapes):
        return ""
    tails = {shape[shape.index("x") :] for shape in shapes}
    return tails.pop() if len(tails) == 1 else ""


def _rate(m: Measurement) -> str:
    return f"{m.tflops:,.1f}" if m.tflops is not None else f"{m.gbps:,.0f}"


def write_json(report: Report, path: Path) -> None:
    path.write_text(report.to_json())


def markdown_table(report: Report) -> str:
    """One row per (direction, dtype, shape): GB/s and % of the copy ceiling of every contender.

    Compute-bound workloads get TFLOP/s instead, and opgen's speed-ups over eager and compile.
    """
    contenders = list(dict.fromkeys(m.contender for m in report.measurements))
    if any(m.tflops is not None for m in report.measurements):
        return _compute_table(report, contenders)
    header = ["direction", "dtype", "shape", *(f"{name} GB/s (% copy)" for name in contenders)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    groups: dict[tuple[str, str, str], dict[str, Measurement]] = {}
    for m in report.measurements:
        groups.setdefault((m.direction, m.dtype, m.workload), {})[m.contender] = m
    for (direction, dtype, workload), row in groups.items():
        cells = []
        for name in contenders:
            cell = row.get(name)
            if cell is None:
                cells.append("")
            elif cell.percent_of_copy is None:
                cells.append(f"{cell.gbps:,.0f}")
            else:
                cells.append(f"{cell.gbps:,.0f} ({cell.percent_of_copy:.0f}%)")
        lines.append("| " + " | ".join([direction, dtype, workload, *cells]) + " |")
    device = report.environment.get("gpu") or report.environment.get("cpu", "")
    title = f"{report.op} on {device}, torch {report.environment['torch']}, CUDA {report.environment['cuda']}"
    return f"**{title}**\n\n" + "\n".join(lines) + "\n"


def _compute_table(report: Report, contenders: Sequence[str]) -> str:
    header = [
        "direction",
        "dtype",
        "shape",
        *(f"{name} TFLOP/s" for name in contenders),
        "opgen vs eager",
        "opgen vs compile",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    groups: dict[tuple[str, str, str], dict[str, Measurement]] = {}
    for m in report.measurements:
        groups.setdefault((m.direction, m.dtype, m.workload), {})[m.contender] = m
    for (direction, dtype, workload), row in groups.items():
        cells = [_rate(row[name]) if name in row else "" for name in contenders]
        ours = row.get("opgen")
        for ratio in ("speedup_vs_eager", "speedup_vs_compile"):
            value = getattr(ours, ratio) if ours is not None else None
            cells.append("" if value is None else f"{value:.3f}x")
        lines.append("| " + " | ".join([direction, dtype, workload, *cells]) + " |")
    device = report.environment.get("gpu") or report.environment.get("cpu", "")
    title = f"{report.op} on {device}, torch {report.environment['torch']}, CUDA {report.environment['cuda']}"
    return f"**{title}**\n\n" + "\n".join(lines) + "\n"


def plot(report: Report, path: Path) -> None:
    """GB/s against size, one line per contender, one panel per direction and dtype."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(m.direction, m.dtype) for m in report.measurements})
    columns = min(2, len(panels))
    grid_rows = (len(panels) + columns - 1) // columns
    figure, axes = plt.subplots(grid_rows, columns, figsize=(7 * columns, 4.5 * grid_rows), squeeze=False)
    for axis in axes.flat[len(panels) :]:
        axis.set_visible(False)
    for axis, (direction, dtype) in zip(axes.flat, panels, strict=False):
        rows = [m for m in report.measurements if m.direction == direction and m.dtype == dtype]
        labels = list(dict.fromkeys(m.workload for m in rows))
        compute = any(m.tflops is not None for m in rows)
        for contender in dict.fromkeys(m.contender for m in rows):
            values = {m.workload: (m.tflops if compute else m.gbps) for m in rows if m.contender == contender}
            axis.plot(
                range(len(labels)), [values.get(label, float("nan")) for label in labels], marker="o", label=contender
            )
        axis.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
        axis.set_ylabel("TFLOP/s" if compute else "GB/s (inputs read + outputs written once)")
        axis.set_title(f"{report.op} {direction}, {dtype}")
        axis.grid(alpha=0.3)
        axis.legend()
    device = report.environment.get("gpu") or report.environment.get("cpu", "")
    figure.suptitle(f"{report.op} on {device}, torch {report.environment['torch']}")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def bench_main(
    op: str,
    make_workloads: Callable[[torch.dtype, str, int, int], Sequence[Workload]],
    *,
    forward: Callable[..., torch.Tensor],
    reference: Callable[..., torch.Tensor],
    backward: Callable[..., Any] | None = None,
    reference_backward: Callable[..., Any] | None = None,
    inputs: int = 1,
    make_backward_workloads: Callable[[torch.dtype, str, int, int], Sequence[Workload]] | None = None,
    backward_direction: str = "backward",
    argv: Sequence[str] | None = None,
    extra: Mapping[str, Callable[..., Any]] | None = None,
    backward_extra: Mapping[str, Callable[..., Any]] | None = None,
    compile_backward: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
    default_dtypes: Sequence[str] = ("float32", "bfloat16"),
) -> Report:
    """The command line of a generated benchmark: parse, time, print, save.

    ``make_workloads(dtype, device, reads, writes)`` gives the workloads of a pass that reads
    ``reads`` tensors (its inputs) and writes ``writes``. The op's forward reads its ``inputs``
    tensors and writes one; its backward reads the incoming gradient and the inputs and writes
    one gradient per input. ``make_backward_workloads``, where given, makes the backward's
    workloads instead (an op whose timed backward call is a whole training step, with inputs and
    bytes of its own), and ``backward_direction`` names that pass in the report.
    """
    from opgen.bench_options import parser as options_parser

    parser = options_parser(op, default_device="cuda" if torch.cuda.is_available() else "cpu")
    options = parser.parse_args(argv)
    if options.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA GPU found; use --device cpu")
    report = Report(op=op, environment=environment(options.device))
    for dtype_name in options.dtype or list(default_dtypes):
        dtype = getattr(torch, dtype_name)
        measurements = run_benchmark(
            op,
            make_workloads(dtype, options.device, inputs, 1),
            forward=forward,
            reference=reference,
            backward=backward,
            reference_backward=reference_backward,
            backward_workloads=(make_backward_workloads or make_workloads)(dtype, options.device, inputs + 1, inputs),
            dtype=dtype,
            device=options.device,
            include_compile=not options.no_compile,
            repetitions=options.repetitions,
            backward_direction=backward_direction,
            extra=extra,
            backward_extra=backward_extra,
            compile_backward=compile_backward,
        )
        report.measurements.extend(measurements)
        print_table(measurements, f"{op} on {options.device}, {dtype_name}")
    if options.json:
        write_json(report, options.json)
    if options.plot:
        plot(report, options.plot)
    if options.markdown:
        options.markdown.write_text(markdown_table(report))
    return report

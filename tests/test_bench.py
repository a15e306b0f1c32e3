"""opgen.bench: how short GPU calls are sampled (so their medians are not a clock tick apart) and the workloads."""

from __future__ import annotations

import math
import random
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from opgen import bench
from opgen.bench import (
    MAX_CALLS_PER_SAMPLE,
    ROUNDS,
    SAMPLE_SPAN_MS,
    calls_per_sample,
    median_of_sample_means,
    time_side_by_side,
)


@pytest.mark.parametrize(
    ("call_ms", "expected"),
    [
        (0.005, MAX_CALLS_PER_SAMPLE),  # 5 µs: capped
        (0.02, 5),  # 5 calls span 0.1 ms
        (0.03, 4),  # rounded up: 3 calls would span only 0.09 ms
        (SAMPLE_SPAN_MS, 1),
        (2.0, 1),
        (0.0, MAX_CALLS_PER_SAMPLE),  # a call too short for the clock to see
    ],
)
def test_calls_per_sample(call_ms: float, expected: int) -> None:
    assert calls_per_sample(call_ms) == expected


def test_sample_means_recover_a_call_shorter_than_the_clock_resolves() -> None:
    # A 5.3 µs call timed by a clock that ticks every 0.5 µs, starting at a random phase, reads
    # 5.0 or 5.5; the median of single readings is one of the two, the mean of many is 5.3.
    tick, true_ms = 0.0005, 0.0053
    rng = random.Random(0)
    readings = []
    for _ in range(50 * MAX_CALLS_PER_SAMPLE):
        start = rng.uniform(0, 100)
        readings.append((math.floor((start + true_ms) / tick) - math.floor(start / tick)) * tick)
    assert {round(r, 6) for r in readings} == {0.005, 0.0055}
    assert round(statistics.median(readings), 6) in {0.005, 0.0055}  # 0.2-0.3 µs off
    assert median_of_sample_means(readings, calls_per_sample(true_ms)) == pytest.approx(true_ms, abs=0.00005)


def test_median_of_sample_means_groups_consecutive_calls_and_drops_a_partial_last_sample() -> None:
    assert median_of_sample_means([1.0, 3.0, 2.0, 2.0, 10.0, 12.0, 100.0], 2) == 2.0
    assert median_of_sample_means([4.0, 1.0, 9.0], 1) == 4.0


def test_contenders_take_turns_and_the_slower_one_reads_slower() -> None:
    calls: list[str] = []

    def contender(name: str, seconds: float):
        def call() -> None:
            calls.append(name)
            time.sleep(seconds)

        return call

    medians = time_side_by_side(
        {"fast": contender("fast", 0.0), "slow": contender("slow", 0.002)}, "cpu", warmup=3, repetitions=10
    )
    assert medians["slow"] > 1.5 > medians["fast"]
    warm_up = ["fast"] * 3 + ["slow"] * 3  # one untimed call and two timed, each
    per_round = 10 // ROUNDS
    assert calls == warm_up + (["fast"] * per_round + ["slow"] * per_round) * ROUNDS


def test_workloads_size_each_tensor_in_bytes_whatever_its_dtype() -> None:
    # The sizes are bytes: a bfloat16 tensor holds twice the values of a float32 one.
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        size = torch.empty((), dtype=dtype).element_size()
        rows = bench.row_shapes(size, "cuda")
        assert {math.prod(shape) * size for shape in rows} == {2**28}
        assert [shape[-1] for shape in rows] == [128, 1024, 4096, 16384, 65536, 262144]
        assert [math.prod(shape) * size for shape in bench.flat_shapes(size, "cuda")] == [2**20, 2**24, 2**28, 2**30]


def test_a_workload_moves_each_tensor_once_and_draws_fresh_inputs() -> None:
    (small, *_) = bench.flat_workloads(torch.bfloat16, "cpu", reads=2, writes=1)
    assert small.numel == 2**17 and small.bytes_moved == 3 * 2**18
    first, second = small.make_inputs(), small.make_inputs()
    assert len(first) == 2 and first[0].dtype == torch.bfloat16 and first[0].shape == (2**17,)
    assert not torch.equal(first[0], second[0]) and bool(first[0].ne(0).any())


def test_gemm_class_ops_are_timed_in_tflops_beside_the_plain_gemm() -> None:
    # A linear layer's workloads carry FLOPs (2 M N K, 6 M N K with the backward): the report gives
    # TFLOP/s, the extra contender (the plain GEMM) runs beside the op, and no copy is timed.
    forward = bench.linear_workload(64, 32, 48, torch.float32, "cpu")
    training = bench.linear_workload(64, 32, 48, torch.float32, "cpu", backward=True, bias=False)
    assert forward.flops == 2 * 64 * 32 * 48 and training.flops == 3 * forward.flops
    x, weight, bias = forward.make_inputs()
    assert x.shape == (64, 32) and weight.shape == (48, 32) and bias.shape == (48,) and not x.requires_grad
    assert [t.requires_grad for t in training.make_inputs()] == [True, True]

    def layer(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(torch.nn.functional.linear(x, weight, bias))

    measurements = bench.run_benchmark(
        "layer", [forward], forward=layer, reference=layer, dtype=torch.float32, device="cpu",
        include_compile=False, repetitions=5, extra={"F.linear": torch.nn.functional.linear},
    )  # fmt: skip
    assert [m.contender for m in measurements] == ["opgen", "eager", "F.linear"]
    assert all(m.tflops is not None and m.tflops > 0 for m in measurements)
    table = bench.markdown_table(bench.Report("layer", bench.environment("cpu"), measurements))
    assert "F.linear TFLOP/s" in table and "opgen vs eager" in table


def test_a_training_step_takes_the_gradients_of_the_inputs_that_require_them() -> None:
    x, weight = torch.randn(4, 3, requires_grad=True), torch.randn(5, 3)
    grads = bench.with_gradients(torch.nn.functional.linear)(x, weight)
    assert len(grads) == 1 and torch.allclose(grads[0], torch.ones(4, 5) @ weight)
    assert x.grad is None  # nothing accumulated


_TORCH_COMPILE = torch.compile


def _graphs_captured_by(compile_for: Any, shapes: list[tuple[int, ...]], monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each shape in turn: did the graph torch.compile captured for it have symbolic sizes?

    ``compile_for(fn)`` gives the compiled function to call for one shape. Dynamo's graphs go to
    a recording backend instead of inductor, so the test traces but compiles no code.
    """
    dynamic: list[bool] = []

    def recording_backend(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        dynamic.append(any(isinstance(v, torch.SymInt) or not isinstance(v, torch.Tensor) for v in example_inputs))
        return graph.forward

    monkeypatch.setattr(torch, "compile", lambda fn, **kw: _TORCH_COMPILE(fn, backend=recording_backend, **kw))
    fn = lambda t: torch.softmax(t, -1) * 2  # noqa: E731
    for shape in shapes:
        compile_for(fn)(torch.randn(shape))
    return dynamic


@pytest.mark.heavy
def test_the_compile_contender_is_static_for_every_shape_of_a_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    shapes = [(4, 8), (16, 8), (64, 32)]
    assert _graphs_captured_by(bench.compiled_for_this_shape, shapes, monkeypatch) == [False, False, False]
    # What the bench did before: one compiled function reused across the sweep goes dynamic on
    # the second shape, which is the slower code a user of one shape never runs.
    torch._dynamo.reset()
    once: dict[str, Any] = {}

    def compiled_once(fn: Any) -> Any:
        return once.setdefault("fn", torch.compile(fn))

    captured = _graphs_captured_by(compiled_once, shapes, monkeypatch)
    assert captured[0] is False and True in captured[1:]


def test_bench_options_are_checked_once_and_their_paths_travel_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from opgen import cli
    from opgen.bench_options import forwarded, parser

    monkeypatch.chdir(tmp_path)
    args = ["--dtype", "float32", "--json", "out/r.json", "--no-compile", "--repetitions", "7"]
    argv = forwarded("relu", args)
    assert argv == [
        "--dtype",
        "float32",
        "--json",
        str(tmp_path / "out" / "r.json"),
        "--no-compile",
        "--repetitions",
        "7",
    ]
    # What the benchmark's process parses (bench_main uses the same parser) is what was asked for.
    options = parser("relu", default_device="cpu").parse_args(argv)
    assert (options.dtype, options.json, options.no_compile, options.repetitions) == (
        ["float32"],
        tmp_path / "out" / "r.json",
        True,
        7,
    )
    # Through the CLI: the benchmark gets the checked options; a wrong one is bad usage (exit 2).
    ran: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(cli, "run_op_bench", lambda ws, op, bench_args: ran.append((op, list(bench_args))))
    result = CliRunner().invoke(cli.app, ["bench", "relu", *args])
    assert result.exit_code == 0 and ran == [("relu", argv)]
    with pytest.raises(SystemExit) as bad:
        forwarded("relu", ["--dtype", "int8"])
    assert bad.value.code == 2
    assert CliRunner().invoke(cli.app, ["bench", "relu", "--dtype", "int8"]).exit_code == 2


def test_a_plot_without_matplotlib_is_bad_usage_before_anything_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from opgen.bench_options import forwarded

    assert forwarded("relu", ["--plot", "r.png"])[0] == "--plot"  # matplotlib is a dependency
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real_find_spec(name, *a)
    )
    with pytest.raises(SystemExit) as bad:
        forwarded("relu", ["--plot", "r.png"])
    assert bad.value.code == 2
    assert forwarded("relu", ["--json", "r.json"])[0] == "--json"  # nothing asked of matplotlib without --plot


def test_print_table_fits_80_columns_without_cutting_a_cell(capsys: pytest.CaptureFixture[str]) -> None:
    # What a GPU run prints (a device copy, "% copy", the longest labels): every cell whole in a
    # plain 80-column terminal, the one dtype in the title rather than a column.
    rows = []
    for direction in ("forward", "forward+backward"):
        for contender, ms in (("opgen", 0.1234), ("eager", 0.2468), ("compile", 0.1876), ("copy", 0.1111)):
            measured = {"median_ms": ms, "gbps": 4321.5, "percent_of_copy": 97.3}
            ratios = {"speedup_vs_eager": 0.2468 / ms, "speedup_vs_compile": 0.1876 / ms}
            workload = {"workload": "1048576x262144", "dtype": "bfloat16", "device": "cuda", "numel": 1, "bytes_moved": 1}
            rows.append(bench.Measurement("add_layernorm", direction, contender, **workload, **measured, **ratios))
    bench.print_table(rows, "add_layernorm on cuda, bfloat16", width=80)
    printed = capsys.readouterr().out
    assert "…" not in printed and max(map(len, printed.splitlines())) <= 80
    for cell in ("fwd+bwd", "1048576x262144", "compile", "0.1234", "4,322", "97.3", "2.00x", "1.52x", "vs compile"):
        assert cell in printed, cell
    assert "dtype" not in printed


def test_print_table_moves_the_widths_every_shape_shares_into_the_title(capsys: pytest.CaptureFixture[str]) -> None:
    # An MLP's shapes carry its widths in every row (4194304x100-128-64-10): at full length its
    # TFLOP/s table was 82 columns and an 80-column terminal cut "vs compile" to "vs compil".
    rows = []
    for direction in ("forward", "forward+backward"):
        for batch in (32, 4194304):
            for contender, ms in (("opgen", 0.4201), ("eager", 3.0445), ("compile", 2.3952)):
                ratios = {"speedup_vs_eager": 3.0445 / ms, "speedup_vs_compile": 2.3952 / ms}
                workload = {"workload": f"{batch}x100-128-64-10", "dtype": "bfloat16", "device": "cuda", "numel": 1}
                measured = {"bytes_moved": 1, "median_ms": ms, "gbps": 1.0, "percent_of_copy": None, "tflops": 432.0}
                rows.append(bench.Measurement("mlp_seed", direction, contender, **workload, **measured, **ratios))
    bench.print_table(rows, "mlp_seed on cuda, bfloat16", width=80)
    printed = capsys.readouterr().out
    assert "…" not in printed and max(map(len, printed.splitlines())) <= 80
    assert "shapes Nx100-128-64-10" in printed and "4194304x" not in printed
    for cell in ("vs compile", "4194304", "432.0", "7.25x", "5.70x"):
        assert cell in printed, cell


def test_plot_draws_a_panel_per_direction_and_dtype_into_a_png(tmp_path: Path) -> None:
    report = bench.Report(op="demo", environment={"torch": torch.__version__, "cpu": "test"})
    for direction in ("forward", "forward+backward"):
        for contender, gbps in (("opgen", 900.0), ("eager", 450.0)):
            for workload in ("1024x128", "1024x4096"):
                report.measurements.append(
                    bench.Measurement("demo", direction, contender, workload, "float32", "cpu", 1, 8, 1.0, gbps)
                )
    path = tmp_path / "demo.png"
    bench.plot(report, path)
    from PIL import Image  # matplotlib's own dependency

    with Image.open(path) as image:
        assert image.format == "PNG"
        # two panels side by side at 7 x 4.5 inches each, 120 dpi
        assert image.size == (14 * 120, int(4.5 * 120))

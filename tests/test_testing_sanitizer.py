"""opgen.testing.sanitizer: the command it runs and how it reads compute-sanitizer's verdict."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from opgen.testing.sanitizer import REPORT_EXIT_CODE, TOOLS, SanitizerRun, find_compute_sanitizer, sanitizer_command

CLEAN_MEMCHECK = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
CLEAN_RACECHECK = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
DIRTY_MEMCHECK = (
    "========= Invalid __global__ read of size 16 bytes\n"
    "=========     at void softmax_forward_kernel<float>(...)+0x1a0\n"
    "========= ERROR SUMMARY: 2 errors\n"
)


@pytest.mark.parametrize("tool", TOOLS)
def test_command_runs_this_python_on_the_module_under_the_tool(tool: str) -> None:
    command = sanitizer_command(Path("/opt/cuda/bin/compute-sanitizer"), tool, "ops.softmax.test_softmax")
    assert command[:3] == ["/opt/cuda/bin/compute-sanitizer", "--tool", tool]
    assert command[-3:] == [sys.executable, "-m", "ops.softmax.test_softmax"]
    assert command[command.index("--error-exitcode") + 1] == str(REPORT_EXIT_CODE)


def test_unknown_tool_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown compute-sanitizer tool 'synccheck'"):
        sanitizer_command(Path("compute-sanitizer"), "synccheck", "m")


@pytest.mark.parametrize(("tool", "output"), [("memcheck", CLEAN_MEMCHECK), ("racecheck", CLEAN_RACECHECK)])
def test_a_zero_summary_with_exit_code_zero_is_clean(tool: str, output: str) -> None:
    run = SanitizerRun(tool, 0, output)
    assert run.reports == 0 and run.clean


def test_reported_errors_are_counted_and_shown() -> None:
    run = SanitizerRun("memcheck", REPORT_EXIT_CODE, DIRTY_MEMCHECK)
    assert run.reports == 2 and not run.clean
    message = run.describe()
    assert message.startswith("compute-sanitizer memcheck reported 2 problem(s)")
    assert "Invalid __global__ read of size 16 bytes" in message


def test_a_crash_without_summary_is_not_clean() -> None:
    run = SanitizerRun("initcheck", 1, "Traceback (most recent call last):\nRuntimeError: CUDA error\n")
    assert run.reports == -1 and not run.clean
    assert "printed no summary (exit code 1)" in run.describe()


def test_a_failing_program_with_a_clean_summary_is_not_clean() -> None:
    run = SanitizerRun("memcheck", 1, "AssertionError\n" + CLEAN_MEMCHECK)
    assert not run.clean
    assert "the checked program failed" in run.describe()


def test_sanitizer_is_found_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "compute-sanitizer"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_compute_sanitizer() == fake


def test_an_op_on_cublas_is_judged_by_initcheck_only_where_torchs_own_gemms_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opgen.testing import sanitizer

    flagged = SanitizerRun(
        "initcheck",
        REPORT_EXIT_CODE,
        "========= COMPUTE-SANITIZER\n"
        "========= Uninitialized __global__ memory read of size 16 bytes\n"
        "=========     at relu_kernel\n"
        "=========         Host Frame: cudaLaunchKernel\n"
        "========= ERROR SUMMARY: 1 error\n",
    )
    clean = SanitizerRun("initcheck", 0, "========= ERROR SUMMARY: 0 errors\n")
    runs: list[str] = []

    def run(tool: str, module: str, *, sanitizer: Path, arguments: Sequence[str] = ()) -> SanitizerRun:
        runs.append(module)
        return control if module == sanitizer_module.CUBLAS_CONTROL else op_run

    sanitizer_module = sanitizer
    monkeypatch.setattr(sanitizer, "find_compute_sanitizer", lambda: tmp_path / "compute-sanitizer")
    monkeypatch.setattr(sanitizer, "run_module_under_sanitizer", run)
    sanitizer.tool_sees_cublas_writes.cache_clear()
    # The control is flagged: the op's own run would mean nothing, so the test skips, saying why.
    control, op_run = flagged, flagged
    with pytest.raises(pytest.skip.Exception, match="Uninitialized __global__ memory read of size 16 bytes"):
        sanitizer.assert_clean_under_sanitizer("initcheck", "ops.my_linear", uses_cublas=True)
    # The control passes: the op is judged, and its reports fail it.
    sanitizer.tool_sees_cublas_writes.cache_clear()
    control = clean
    with pytest.raises(AssertionError, match="initcheck reported 1 problem"):
        sanitizer.assert_clean_under_sanitizer("initcheck", "ops.my_linear", uses_cublas=True)
    # Other tools, and ops without cuBLAS, never run the control.
    runs.clear()
    op_run = clean
    sanitizer.assert_clean_under_sanitizer("memcheck", "ops.my_linear", uses_cublas=True)
    sanitizer.assert_clean_under_sanitizer("initcheck", "ops.my_op")
    assert runs == ["ops.my_linear", "ops.my_op"]
    sanitizer.tool_sees_cublas_writes.cache_clear()


def test_arguments_go_to_the_module() -> None:
    command = sanitizer_command(Path("cs"), "racecheck", "ops.layernorm.test_layernorm", ["short_float32"])
    assert command[-4:] == [sys.executable, "-m", "ops.layernorm.test_layernorm", "short_float32"]


def test_norm_sanitizer_pieces_cover_every_kernel_path_once() -> None:
    # Together the pieces run every (dtype, row length) of the whole run once, and pytest's -k can
    # pick each alone (no piece's name inside another's).
    from opgen.testing import FLOAT_DTYPES
    from opgen.testing.norm_suite import PATH_ROW_LENGTHS, SANITIZER_PIECES

    cases = [(dtype, n) for dtype, lengths in SANITIZER_PIECES.values() for n in lengths]
    assert sorted(cases, key=str) == sorted(((d, n) for d in FLOAT_DTYPES for n in PATH_ROW_LENGTHS), key=str)
    assert len(set(cases)) == len(cases)
    names = list(SANITIZER_PIECES)
    assert not [(a, b) for a in names for b in names if a != b and a in b]


def test_an_unknown_norm_piece_is_refused() -> None:
    from opgen.testing.norm_suite import NormSuite

    with pytest.raises(SystemExit, match="unknown piece"):
        NormSuite().exercise_kernel_paths("short_float8")

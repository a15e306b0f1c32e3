"""Running an op's CUDA kernels under NVIDIA compute-sanitizer, for the generated tests.

An op's test module has a ``__main__`` that drives every kernel path once (forward and
backward, boundary and misaligned shapes). The ``sanitize``-marked generated test runs that
module in a child process under each sanitizer tool and fails on any report:

- memcheck: out-of-bounds and misaligned accesses, errors from CUDA calls;
- racecheck: shared-memory hazards between threads of a block;
- initcheck: reads of device memory nothing wrote (an output element a kernel forgot).

The child runs with PyTorch's caching allocator off, so every tensor is its own allocation and
an access one element past a tensor's end is out of bounds instead of inside a pooled block.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from opgen.errors import CudaToolkitNotFound
from opgen.toolchain import STANDARD_LOCATIONS, find_cuda_toolkit, versioned_locations

TOOLS = ("memcheck", "racecheck", "initcheck")

# Exit code the sanitizer returns when it reported anything, distinct from a Python failure.
REPORT_EXIT_CODE = 86

_TOOL_OPTIONS = {
    "memcheck": ["--leak-check", "no"],
    "racecheck": ["--racecheck-report", "all"],
    "initcheck": [],
}

# "========= ERROR SUMMARY: 3 errors" (memcheck, initcheck), "RACECHECK SUMMARY: 2 hazards displayed".
_SUMMARY = re.compile(r"(ERROR|RACECHECK) SUMMARY: (\d+) (errors?|hazards?)")


def find_compute_sanitizer() -> Path | None:
    """compute-sanitizer from PATH, else from the CUDA toolkit that builds use."""
    on_path = shutil.which("compute-sanitizer")
    if on_path:
        return Path(on_path)
    try:
        toolkit = find_cuda_toolkit()
    except CudaToolkitNotFound:  # a misconfigured CUDA_HOME only means: not found here
        toolkit = None
    homes = [toolkit.home] if toolkit else []
    homes += [*(Path(location) for location in STANDARD_LOCATIONS), *versioned_locations()]
    for home in homes:
        for candidate in (home / "bin" / "compute-sanitizer", home / "compute-sanitizer" / "compute-sanitizer"):
            if candidate.is_file():
                return candidate
    return None


@dataclass(frozen=True)
class SanitizerRun:
    """What one tool said about one run of a module."""

    tool: str
    returncode: int
    output: str

    @property
    def reports(self) -> int:
        """The number of errors or hazards the tool summarised; -1 when it printed no summary."""
        counts = [int(match.group(2)) for match in _SUMMARY.finditer(self.output)]
        return sum(counts) if counts else -1

    @property
    def clean(self) -> bool:
        return self.returncode == 0 and self.reports == 0

    def describe(self, tail_lines: int = 60) -> str:
        """A failure message: what went wrong, then the end of the tool's output."""
        if self.returncode == REPORT_EXIT_CODE or self.reports > 0:
            what = f"compute-sanitizer {self.tool} reported {max(self.reports, 1)} problem(s)"
        elif self.reports < 0:
            what = f"compute-sanitizer {self.tool} printed no summary (exit code {self.returncode})"
        else:
            what = f"the checked program failed under compute-sanitizer {self.tool} (exit code {self.returncode})"
        tail = "\n".join(self.output.splitlines()[-tail_lines:])
        return f"{what}; the end of its output:\n{tail}"


def sanitizer_command(sanitizer: Path, tool: str, module: str, arguments: Sequence[str] = ()) -> list[str]:
    """The command that runs ``python -m module *arguments`` under ``tool``."""
    if tool not in TOOLS:
        raise ValueError(f"unknown compute-sanitizer tool {tool!r}; use one of {', '.join(TOOLS)}")
    return [
        str(sanitizer), "--tool", tool, *_TOOL_OPTIONS[tool],
        "--error-exitcode", str(REPORT_EXIT_CODE), "--print-limit", "20",
        sys.executable, "-m", module, *arguments,
    ]  # fmt: skip


def run_module_under_sanitizer(
    tool: str, module: str, *, sanitizer: Path, arguments: Sequence[str] = (), timeout: float = 1800
) -> SanitizerRun:
    """Run ``python -m module *arguments`` under ``tool`` with this process's import path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, sys.path))
    env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    completed = subprocess.run(
        sanitizer_command(sanitizer, tool, module, arguments),
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    return SanitizerRun(tool=tool, returncode=completed.returncode, output=completed.stdout + completed.stderr)


def _report_lines(output: str) -> list[str]:
    """The tool's report lines (what it found), without banners, summaries and backtraces."""
    skip = ("SUMMARY", "COMPUTE-SANITIZER", "Host Frame", "Saved host", "Device Frame")
    lines = (line.strip("= ").strip() for line in output.splitlines() if line.startswith("========="))
    return [line for line in lines if line and not any(word in line for word in skip)]


# torch's own cuBLAS GEMMs and their outputs read: what a tool must pass to judge an op built on cuBLAS.
CUBLAS_CONTROL = "opgen.testing.cublas_control"


@functools.cache
def tool_sees_cublas_writes(tool: str, sanitizer: Path) -> SanitizerRun:
    """The control run (CUBLAS_CONTROL) under ``tool``: clean where the tool sees what cuBLAS writes."""
    return run_module_under_sanitizer(tool, CUBLAS_CONTROL, sanitizer=sanitizer)


def assert_clean_under_sanitizer(
    tool: str, module: str, *, uses_cublas: bool = False, arguments: Sequence[str] = ()
) -> None:
    """The generated test's body: skip without a sanitizer, fail on any report.

    ``arguments`` go to the module's ``__main__`` (a norm's test module takes the pieces of its
    kernel paths to run: see opgen.testing.norm_suite).

    An op whose kernels include cuBLAS's (``uses_cublas``) is judged by initcheck (the tool that
    tracks which memory was written) only where initcheck passes torch's own cuBLAS GEMMs (the
    control); where it reports them, the test is skipped naming the control's first report, since
    the same reports on the op would mean nothing.
    """
    import pytest

    sanitizer = find_compute_sanitizer()
    if sanitizer is None:
        pytest.skip(
            "compute-sanitizer not found (not on PATH, not in the CUDA toolkit's bin/ or compute-sanitizer/): "
            "install the CUDA toolkit's sanitizer or put it on PATH"
        )
    if uses_cublas and tool == "initcheck":
        control = tool_sees_cublas_writes(tool, sanitizer)
        if not control.clean:
            first = next((text for text in _report_lines(control.output)), "")
            pytest.skip(
                f"compute-sanitizer {tool} reports torch's own cuBLAS GEMMs ({CUBLAS_CONTROL}: "
                f"{max(control.reports, 1)} reports, first: {first}): it cannot judge an op built on cuBLAS here"
            )
    run = run_module_under_sanitizer(tool, module, sanitizer=sanitizer, arguments=arguments)
    assert run.clean, run.describe()

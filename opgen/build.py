"""`opgen build`: compile the workspace's ops in place by running its setup.py with ninja."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from opgen.errors import BuildFailed
from opgen.toolchain import CudaToolkit, find_cuda_toolkit
from opgen.workspace import Workspace

# nvcc needs about 1.5 GB per job on torch's headers; two per GiB-pair keeps a small machine
# from swapping while still using every core on a large one.
GIB_PER_COMPILE_JOB = 2

# gcc/clang "file:12:5: error: ...", nvcc "file(41): error: ...", and "fatal error: ...".
_COMPILER_ERROR = re.compile(r"\berror\s*:", re.IGNORECASE)


@dataclass(frozen=True)
class OpOutcome:
    """One op's result: built, up-to-date or failed (with its first compiler error)."""

    op: str
    status: str
    seconds: float
    first_error: str = ""


@dataclass(frozen=True)
class BuildReport:
    """What a build did: each op's outcome, in which mode, how long it took, and its full log."""

    ops: list[str]
    mode: str
    toolkit: CudaToolkit | None
    seconds: float
    log: str
    outcomes: list[OpOutcome]

    @property
    def failed(self) -> list[OpOutcome]:
        return [outcome for outcome in self.outcomes if outcome.status == "failed"]


def default_jobs() -> int:
    cores = os.cpu_count() or 1
    try:
        memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return cores
    return max(1, min(cores, int(memory_gib // GIB_PER_COMPILE_JOB)))


def torch_has_cuda() -> bool:
    import torch

    return torch.version.cuda is not None


def first_compiler_error(log: str, op: str | None = None) -> str:
    """The first compiler error of the log, in ``op``'s sources when given, else its last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [
        line
        for line in lines
        if _COMPILER_ERROR.search(line) and not line.startswith(("FAILED:", "ninja:", "subprocess.", "opgen-op"))
    ]
    if op is not None:
        mine = [line for line in errors if f"{op}/csrc/" in line or f"/{op}/" in line]
        errors = mine or errors
    if errors:
        return errors[0]
    return lines[-1] if lines else "no output"


def op_outcomes(log: str) -> list[OpOutcome]:
    """Each op's outcome from the `opgen-op: <op> <status> <seconds>` lines setup.py prints."""
    outcomes = []
    for line in log.splitlines():
        if line.startswith("opgen-op: "):
            op, status, seconds = line.removeprefix("opgen-op: ").split()
            error = first_compiler_error(log, op) if status == "failed" else ""
            outcomes.append(OpOutcome(op=op, status=status, seconds=float(seconds), first_error=error))
    return outcomes


def build_env(ops: list[str], *, cpu_only: bool, jobs: int | None) -> tuple[dict[str, str], CudaToolkit | None]:
    env = dict(os.environ)
    env["OPGEN_OPS"] = ",".join(ops)
    env["MAX_JOBS"] = str(jobs or default_jobs())
    toolkit = None if cpu_only or not torch_has_cuda() else find_cuda_toolkit(env)
    if toolkit is None:
        env["OPGEN_CUDA"] = "0"
    else:
        env["CUDA_HOME"] = str(toolkit.home)
        env["PATH"] = f"{toolkit.home / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env, toolkit


def build_ops(
    workspace: Workspace,
    ops: Iterable[str] = (),
    *,
    cpu_only: bool = False,
    jobs: int | None = None,
    echo: Callable[[str], None] | None = None,
) -> BuildReport:
    """Build ``ops`` (all when none are named) in place; BuildFailed if any op fails.

    An op that fails to compile does not stop the others: BuildFailed carries the report with
    every op's outcome and each failure's first compiler error.

    ``echo`` receives every line of the build's output as it comes (for ``-v``); the mode line
    setup.py prints (CPU only, or CUDA with which architectures and toolkit) is always kept.
    """
    names = workspace.require_ops(ops)
    env, toolkit = build_env(names, cpu_only=cpu_only, jobs=jobs)
    command = [sys.executable, "setup.py", "build_ext", "--inplace"]
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=workspace.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    lines: list[str] = []
    mode = "unknown"
    for line in process.stdout:
        lines.append(line)
        if line.startswith("opgen-build: "):
            mode = line.removeprefix("opgen-build: ").split("; ops:")[0].strip()
        if echo is not None:
            echo(line.rstrip("\n"))
    returncode = process.wait()
    log = "".join(lines)
    report = BuildReport(
        ops=names, mode=mode, toolkit=toolkit, seconds=time.perf_counter() - started, log=log, outcomes=op_outcomes(log)
    )
    if returncode != 0:
        failed = report.failed
        first_error = failed[0].first_error if failed else first_compiler_error(log)
        raise BuildFailed(ops=[o.op for o in failed] or names, first_error=first_error, report=report)
    return report

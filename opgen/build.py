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

_COMPILER_ERROR = re.compile(r"(error:|error\s*:|\berror\b \w+:|fatal error)", re.IGNORECASE)


@dataclass(frozen=True)
class BuildReport:
    """What a build did: which ops, in which mode, how long it took, and its full log."""

    ops: list[str]
    mode: str
    toolkit: CudaToolkit | None
    seconds: float
    log: str


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


def first_compiler_error(log: str) -> str:
    """The first line of the log that a compiler marked as an error, else its last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:
        if _COMPILER_ERROR.search(line) and not line.startswith(("FAILED:", "ninja:", "subprocess.")):
            return line
    return lines[-1] if lines else "no output"


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
    """Build ``ops`` (all when none are named) in place; BuildFailed with the first error if not.

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
    if returncode != 0:
        raise BuildFailed(ops=names, first_error=first_compiler_error(log))
    return BuildReport(ops=names, mode=mode, toolkit=toolkit, seconds=time.perf_counter() - started, log=log)

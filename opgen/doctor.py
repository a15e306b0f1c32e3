"""`opgen doctor`: can this machine build ops, and if not, what to change.

Most build failures are the environment's: a CUDA_HOME that names the wrong folder, a toolkit
whose major version differs from the one torch was built with (torch's extension builder refuses
that), no C++ compiler. Each check says what it found and, when something is off, what to do.
A check that fails means `opgen build` would fail; a warning means it would build less (CPU
kernels only) or more slowly, or that tests will be skipped.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from opgen.build import split_arch_list
from opgen.errors import CudaToolkitNotFound
from opgen.rules import opgen_rules, rules_for
from opgen.toolchain import CudaToolkit, find_cuda_toolkit
from opgen.workspace import Workspace

Status = Literal["ok", "warn", "fail"]

MIN_PYTHON = (3, 10)


@dataclass(frozen=True)
class Check:
    """One finding: what was checked, its status, what was found, and what to do about it."""

    name: str
    status: Status
    detail: str
    hint: str = ""

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "hint": self.hint}


@dataclass(frozen=True)
class DoctorReport:
    """Every check, and what `opgen build` would compile here."""

    checks: list[Check]
    builds: str
    cuda_architectures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether a build can succeed: no check failed."""
        return all(check.status != "fail" for check in self.checks)

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "builds": self.builds,
            "cuda_architectures": self.cuda_architectures,
            "checks": [check.as_json() for check in self.checks],
        }


def _first_line(command: list[str]) -> str | None:
    """The first line ``command`` prints, or None when it cannot be run or fails."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (result.stdout or result.stderr).strip().splitlines()
    return lines[0].strip() if result.returncode == 0 and lines else None


def check_python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info[:2] < MIN_PYTHON:
        return Check("python", "fail", f"{version} at {sys.executable}", "opgen needs Python 3.10 or newer")
    return Check("python", "ok", f"{version} at {sys.executable}")


def check_torch() -> tuple[Check, str | None]:
    """The torch check and torch's CUDA version (None for a CPU build of torch)."""
    try:
        import torch
    except ImportError as error:
        return Check("torch", "fail", f"cannot import torch: {error}", "install PyTorch: https://pytorch.org"), None
    cuda = torch.version.cuda
    if cuda is None:
        return (
            Check(
                "torch",
                "warn",
                f"{torch.__version__}, a CPU build: only CPU kernels can be built",
                "install a CUDA build of PyTorch (https://pytorch.org) to build and run the CUDA kernels",
            ),
            None,
        )
    return Check("torch", "ok", f"{torch.__version__}, built with CUDA {cuda}"), cuda


def _major(version: str) -> str:
    return version.split(".")[0]


def check_cuda_toolkit(torch_cuda: str | None, env: Mapping[str, str]) -> tuple[Check, CudaToolkit | None]:
    """The toolkit `opgen build` would use (the same search), and whether torch can build with it."""
    if torch_cuda is None:
        return Check("CUDA toolkit", "ok", "not needed: torch is a CPU build"), None
    try:
        toolkit = find_cuda_toolkit(env)
    except CudaToolkitNotFound as error:
        return Check("CUDA toolkit", "fail", str(error), error.hint), None
    if toolkit is None:
        return (
            Check(
                "CUDA toolkit",
                "warn",
                "none found (CUDA_HOME unset, no nvcc on PATH, none in /usr/local): builds compile CPU kernels only",
                f"install a CUDA {_major(torch_cuda)}.x toolkit (torch was built with {torch_cuda}) and set CUDA_HOME to it",
            ),
            None,
        )
    found = f"{toolkit.home} (nvcc {toolkit.version or 'of unknown version'}, lib64/libcudart.so present)"
    nvcc_on_path = shutil.which("nvcc", path=env.get("PATH"))
    if not (env.get("CUDA_HOME") or env.get("CUDA_PATH")) and nvcc_on_path and nvcc_on_path != str(toolkit.nvcc):
        found += f", the toolkit behind {nvcc_on_path}"
    if toolkit.version is None:
        return (
            Check("CUDA toolkit", "fail", f"{found}: `nvcc --version` failed", f"check that {toolkit.nvcc} runs"),
            None,
        )
    if _major(toolkit.version) != _major(torch_cuda):
        return (
            Check(
                "CUDA toolkit",
                "fail",
                f"{found}; torch was built with CUDA {torch_cuda}: torch refuses to build extensions "
                "with a toolkit of another major version",
                f"set CUDA_HOME to a CUDA {_major(torch_cuda)}.x toolkit, install torch for CUDA "
                f"{_major(toolkit.version)}, or build with --cpu-only",
            ),
            None,
        )
    return Check("CUDA toolkit", "ok", found), toolkit


def check_ninja(env: Mapping[str, str]) -> Check:
    """Ninja, which the extension builder looks for on PATH (without it torch compiles serially)."""
    ninja = shutil.which("ninja", path=env.get("PATH"))
    if ninja is not None:
        version = _first_line([ninja, "--version"])
        if version is not None:
            return Check("ninja", "ok", f"{version} at {ninja}")
    slow = "without it builds fall back to setuptools' serial compiler (much slower)"
    try:
        import ninja as ninja_package  # type: ignore[import-not-found]
    except ImportError:
        return Check("ninja", "warn", f"not found; {slow}", "pip install ninja")
    return Check(
        "ninja",
        "warn",
        f"installed as a Python package but not on PATH; {slow}",
        f"add {ninja_package.BIN_DIR} to PATH (or activate the environment opgen is installed in)",
    )


def check_git(env: Mapping[str, str]) -> Check:
    """git, which `opgen update` needs for copier's three-way merge (builds do not)."""
    git = shutil.which("git", path=env.get("PATH"))
    version = _first_line([git, "--version"]) if git is not None else None
    if version is None:
        return Check("git", "warn", "not found; `opgen update` needs it (builds do not)", "install git")
    return Check("git", "ok", f"{version} at {git}")


def check_compiler(env: Mapping[str, str]) -> Check:
    """The C++ compiler torch's extension builder runs: $CXX, else c++."""
    compiler = env.get("CXX") or "c++"
    path = shutil.which(compiler, path=env.get("PATH"))
    version = _first_line([path, "--version"]) if path else None
    if version is None:
        where = "$CXX" if env.get("CXX") else "PATH"
        return Check(
            "C++ compiler",
            "fail",
            f"{compiler} (from {where}) not found or does not run",
            "install g++ (e.g. apt-get install g++) or set CXX to a C++17 compiler",
        )
    return Check("C++ compiler", "ok", f"{version} ({path})")


def visible_gpus() -> list[tuple[str, str]]:
    """(name, compute capability "9.0") of each GPU torch can see."""
    try:
        import torch
    except ImportError:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a CUDA build of torch on a machine without a driver warns
        if not torch.cuda.is_available():
            return []
        gpus = []
        for index in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(index)
            gpus.append((torch.cuda.get_device_name(index), f"{major}.{minor}"))
    return gpus


def check_gpus(gpus: list[tuple[str, str]]) -> Check:
    if not gpus:
        return Check(
            "GPUs",
            "warn",
            "none visible: CUDA kernels still compile, but they cannot run and their tests are skipped",
            "run the tests and benchmarks on a machine with an NVIDIA GPU",
        )
    listed = "; ".join(f"{index}: {name} (compute capability {cc})" for index, (name, cc) in enumerate(gpus))
    return Check("GPUs", "ok", listed)


def cuda_arch_list(env: Mapping[str, str], workspace: Workspace) -> tuple[str, str]:
    """The architecture list builds use and where it comes from.

    As the workspace's build rules (its _build_config.py, which setup.py builds with) choose it.
    """
    try:
        return rules_for(workspace.path).cuda_arch_choice(env)
    except Exception:  # the user's edited file fails here: the build reports it; say what opgen's would
        return opgen_rules().cuda_arch_choice(env)


def _nvcc_arch(arch: str) -> str:
    """'compute_90' for '9.0', '9.0a' or '9.0a+PTX'.

    `nvcc --list-gpu-arch` lists the base architectures only (compute_90, not compute_90a); an
    nvcc that compiles for one also compiles for its arch- and family-specific ('a', 'f') targets.
    """
    return "compute_" + re.sub(r"[af]$", "", arch.removesuffix("+PTX")).replace(".", "")


def _supported_archs(toolkit: CudaToolkit) -> list[str]:
    """What ``nvcc --list-gpu-arch`` prints (compute_75 ...); empty when it cannot say."""
    try:
        result = subprocess.run([str(toolkit.nvcc), "--list-gpu-arch"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return result.stdout.split() if result.returncode == 0 else []


def check_architectures(arch_list: str, source: str, toolkit: CudaToolkit | None) -> Check:
    if toolkit is None:
        return Check("CUDA architectures", "ok", f"{arch_list} from {source} (unused: builds are CPU only)")
    supported = _supported_archs(toolkit)
    unsupported = [arch for arch in split_arch_list(arch_list) if supported and _nvcc_arch(arch) not in supported]
    if unsupported:
        return Check(
            "CUDA architectures",
            "fail",
            f"{arch_list} from {source}; nvcc {toolkit.version} cannot compile for {', '.join(unsupported)}",
            "set TORCH_CUDA_ARCH_LIST to architectures this nvcc lists with `nvcc --list-gpu-arch`, "
            "or use a toolkit that supports them",
        )
    return Check("CUDA architectures", "ok", f"{arch_list} from {source}")


def check_workspace(workspace: Workspace) -> Check:
    if not workspace.exists:
        return Check(
            "workspace",
            "warn",
            f"{workspace.path}: no workspace yet",
            "`opgen new <op>` creates it; or point --workspace / $OPGEN_WORKSPACE at yours",
        )
    if not os.access(workspace.path, os.W_OK):
        return Check(
            "workspace",
            "fail",
            f"{workspace.path} is not writable: builds write their libraries into it",
            "fix its permissions, or copy the workspace somewhere you can write",
        )
    ops = workspace.ops()
    if not ops:
        return Check("workspace", "warn", f"{workspace.path}: no ops yet", "add one with `opgen new <op>`")
    return Check("workspace", "ok", f"{workspace.path}: {len(ops)} op(s): {', '.join(ops)}")


def run_doctor(workspace: Workspace, env: Mapping[str, str] | None = None) -> DoctorReport:
    """Check everything a build needs; the report says what builds would compile."""
    env = os.environ if env is None else env
    torch_check, torch_cuda = check_torch()
    toolkit_check, toolkit = check_cuda_toolkit(torch_cuda, env)
    gpus = visible_gpus()
    arch_list, arch_source = cuda_arch_list(env, workspace)
    checks = [
        check_python(),
        torch_check,
        toolkit_check,
        check_ninja(env),
        check_git(env),
        check_compiler(env),
        check_gpus(gpus),
        check_architectures(arch_list, arch_source, toolkit),
        check_workspace(workspace),
    ]
    if any(check.status == "fail" for check in checks):
        return DoctorReport(checks=checks, builds="nothing: fix the failed checks first")
    if toolkit is None:
        return DoctorReport(checks=checks, builds="CPU kernels only")
    return DoctorReport(
        checks=checks,
        builds=f"CPU and CUDA kernels (CUDA architectures {arch_list}, nvcc {toolkit.version})",
        cuda_architectures=split_arch_list(arch_list),
    )

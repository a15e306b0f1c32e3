"""Finding the CUDA toolkit and the target architectures for a build.

The ``nvcc`` on PATH is often a wrapper script (``exec /usr/local/cuda-X/bin/nvcc "$@"``) whose
folder holds no toolkit, while torch guesses CUDA_HOME from exactly that folder. opgen asks nvcc
itself where it lives (``nvcc --dryrun`` prints its real bin folder) and checks the answer.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from opgen.errors import CudaToolkitNotFound

# Where toolkits install when nothing points at them.
STANDARD_LOCATIONS = ("/usr/local/cuda", "/opt/cuda")


@dataclass(frozen=True)
class CudaToolkit:
    """A CUDA toolkit folder with its compiler and runtime library."""

    home: Path
    version: str | None

    @property
    def nvcc(self) -> Path:
        return self.home / "bin" / "nvcc"


def is_toolkit(home: Path) -> bool:
    """A real toolkit has its compiler and its runtime library side by side."""
    return (home / "bin" / "nvcc").is_file() and (home / "lib64" / "libcudart.so").exists()


def nvcc_version(nvcc: Path) -> str | None:
    """'13.0' from ``nvcc --version``, or None when it cannot be run."""
    try:
        output = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release (\d+\.\d+)", output)
    return match.group(1) if match else None


def _home_behind(nvcc_on_path: str) -> Path | None:
    """The toolkit folder of the nvcc that ``nvcc_on_path`` really runs."""
    direct = Path(nvcc_on_path).resolve().parent.parent
    if is_toolkit(direct):
        return direct
    try:
        dryrun = subprocess.run(
            [nvcc_on_path, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"^#\$ _HERE_=(.+)$", dryrun.stdout + dryrun.stderr, re.MULTILINE)
    if match is None:
        return None
    home = Path(match.group(1).strip()).resolve().parent
    return home if is_toolkit(home) else None


def versioned_locations() -> list[Path]:
    """/usr/local/cuda-X.Y folders, newest first."""
    return sorted(Path("/usr/local").glob("cuda-*"), reverse=True)


def find_cuda_toolkit(env: Mapping[str, str] | None = None) -> CudaToolkit | None:
    """The CUDA toolkit to build with, or None when the machine has none.

    CUDA_HOME (or CUDA_PATH), when set, must name a real toolkit: a wrong value is an error
    rather than something to guess around.
    """
    env = os.environ if env is None else env
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(variable):
            home = Path(env[variable]).expanduser()
            if not is_toolkit(home):
                raise CudaToolkitNotFound(
                    reason=f"{variable}={home} holds no toolkit (it needs bin/nvcc and lib64/libcudart.so)"
                )
            return CudaToolkit(home.resolve(), nvcc_version(home / "bin" / "nvcc"))
    nvcc_on_path = shutil.which("nvcc", path=env.get("PATH"))
    if nvcc_on_path is not None:
        behind = _home_behind(nvcc_on_path)
        if behind is not None:
            return CudaToolkit(behind, nvcc_version(behind / "bin" / "nvcc"))
    for home in [Path(location) for location in STANDARD_LOCATIONS] + versioned_locations():
        if is_toolkit(home):
            return CudaToolkit(home.resolve(), nvcc_version(home / "bin" / "nvcc"))
    if nvcc_on_path is not None:
        raise CudaToolkitNotFound(
            reason=f"{nvcc_on_path} is on PATH, but no folder with bin/nvcc and lib64/libcudart.so was found behind it"
        )
    return None

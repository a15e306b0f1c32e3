"""What a build of this workspace compiles, for which targets, and when an op is up to date.

Carried by every opgen workspace, the same file in each (INTERFACE below says which form of it);
this file is yours to edit.

It is the one definition of three rules: which folders are ops (op_names), where an op's built
library lives (op_library) and in which order the CUDA architectures are chosen
(cuda_arch_choice). setup.py and the package's __init__.py ask it; so does opgen, of this file
when its INTERFACE is the one opgen expects, else of opgen's own copy (an older workspace,
before `opgen update` brings this one).

setup.py builds with these answers, and ``opgen build`` asks the same questions before it starts
setup.py, so that a build with nothing to do ends without importing torch or setuptools. Both
read this one file, so the two can never disagree about what "up to date" means. It uses the
standard library only and never imports torch.

An op is up to date when its library exists, is newer than every input (its csrc/ sources and
headers, the shared include/ headers, setup.py and this file) and its stamp
(``build/opgen-config/<op>.txt``) holds the configuration the build would use now: torch's
version, CPU-only or CUDA with which toolkit and architectures, the compiler variables of the
environment and the list of sources. setup.py rewrites the stamp only when that text changes,
so a changed setting rebuilds the op even though no source changed.
"""

from __future__ import annotations

import ast
import ctypes
import hashlib
import json
import importlib.machinery
import importlib.util
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

WORKSPACE = Path(__file__).resolve().parent

# The form of this module's functions that opgen calls (opgen/build.py, BuildRules); opgen uses a
# workspace's copy only when it carries the INTERFACE opgen expects.
INTERFACE = 2

# Hopper (H100/H200) when no GPU is visible: building for every architecture torch supports
# would multiply CUDA compile time by about ten. Set TORCH_CUDA_ARCH_LIST for another GPU.
# "9.0a", Hopper's arch-specific target: plain sm_90 code plus wgmma and setmaxnreg (the matmul's
# Hopper kernel); its code runs on compute capability 9.0 only, as sm_90 code without PTX does.
DEFAULT_CUDA_ARCH = "9.0a"

# A visible GPU's compute capability -> the target built for it where the arch-specific one has
# instructions that kernels here use (wgmma on Hopper); the build is for that GPU anyway.
ARCH_SPECIFIC_TARGETS = {"9.0": "9.0a"}

# The compiler flags of every op, for `opgen build` (setup.py) and `opgen dev` (opgen's JIT build).
# -fopenmp: at::parallel_for runs serially without OpenMP. -g0: setup.py's compiler flags start
# with Python's own build flags, -g among them; debug info of torch's headers makes each C++ file
# take about a third longer to compile (relu_cpu.cpp: 15.0 s with it, 8.5 s without), and
# `opgen dev` (torch's JIT flags) never had it. Drop -g0 to debug an op in gdb.
CXX_FLAGS = ["-O3", "-g0", "-fopenmp"]
LINK_FLAGS = ["-fopenmp"]
NVCC_FLAGS = [
    "-O3",
    "-lineinfo",  # source lines in compute-sanitizer and profiler reports, no speed cost
    "-Xptxas=-warn-spills",
]

# The torch headers most C++ files of the ops include (include/opgen/torch_headers.h), which a
# build precompiles once (GCC's precompiled header, in precompiled_header_folder) when it compiles
# at least PRECOMPILE_UNITS_PER_JOB C++ files a compile job: parsing them is most of such a file's
# compile time (at -O3 on one core: layernorm_cpu.cpp 20 s, 9.5 s with them precompiled; relu_cpu.cpp
# 18 s, 8 s), but making the precompiled form takes about 34 s, during which the other jobs wait.
# Each file still includes what it uses itself.
TORCH_HEADERS = "opgen/torch_headers.h"
PRECOMPILE_UNITS_PER_JOB = 5
# A folder where builds of every workspace keep their precompiled headers, instead of each
# workspace's build/pch/ (e.g. CI, or one machine's several workspaces). A build then takes a
# precompiled form another workspace made, whatever its own size: it is free once made.
PRECOMPILED_HEADERS_ENV = "OPGEN_PCH_CACHE"


def precompiles_torch_headers(cxx_units: int, jobs: int) -> bool:
    """Whether a build compiling ``cxx_units`` C++ files with ``jobs`` compile jobs precompiles TORCH_HEADERS."""
    return cxx_units >= PRECOMPILE_UNITS_PER_JOB * max(1, jobs)

# What counts as a header: a change to one rebuilds the op (ninja then recompiles only the
# translation units that include it, from the dependencies the compilers record).
HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl", ".inc")

# Environment variables that change what the compilers produce: setuptools reads the first
# ones, nvcc the NVCC_ ones, torch PYTORCH_NVCC. A changed value rebuilds.
COMPILER_VARIABLES = (
    "CC",
    "CXX",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "LDSHARED",
    "NVCC_PREPEND_FLAGS",
    "NVCC_APPEND_FLAGS",
    "NVCC_CCBIN",
    "PYTORCH_NVCC",
)

# cuda.h: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR.
_CAPABILITY_MAJOR = 75
_CAPABILITY_MINOR = 76


# setup.py reports its progress to `opgen build` as JSON lines, each an object whose first key is
# EVENT_KEY (its value: the event's form, 1): {"opgen_event": 1, "op": "relu", "phase": "compiling"}.
# phase: "settings" (no op; "describe" and "cuda_arch_list" say what the build compiles with),
# "compiling", "linking", then "built", "up-to-date" or "failed" with "seconds" (and "error").
EVENT_KEY = "opgen_event"


def event_line(**fields: object) -> str:
    """One progress event of setup.py, as the JSON line `opgen build` reads."""
    return json.dumps({EVENT_KEY: 1, **fields})


class BuildConfigError(Exception):
    """The environment asks for a build that cannot work (the message says what to change)."""


class Settings(NamedTuple):
    """What every op of one build is compiled with."""

    torch: str  # "2.6.0+cu124 (CUDA 12.4, git 1eba9b3aa3)"
    cuda_home: str | None  # None: CPU kernels only
    cuda_arch_list: str | None  # TORCH_CUDA_ARCH_LIST as the build uses it; None without CUDA
    compiler_variables: tuple[str, ...]  # "CXX=g++-12", for each of COMPILER_VARIABLES that is set

    @property
    def with_cuda(self) -> bool:
        return self.cuda_home is not None

    def describe(self) -> str:
        """One line: which kernels, for which architectures, with which toolkit."""
        if self.cuda_home is None:
            return "CPU kernels only (set CUDA_HOME to a CUDA toolkit to compile the CUDA kernels)"
        return f"CPU and CUDA kernels, CUDA architectures {self.cuda_arch_list}, toolkit {self.cuda_home}"


def torch_build() -> tuple[str, str | None, str]:
    """(version, CUDA version or None, git commit) of the installed torch.

    Read from torch/version.py without importing torch (which takes seconds); torch is imported
    only when that file cannot be read.
    """
    spec = importlib.util.find_spec("torch")
    if spec is None:
        raise BuildConfigError("torch is not installed in this Python; install it first (pip install torch)")
    values: dict[str, object] = {}
    try:
        folder = Path(next(iter(spec.submodule_search_locations or [])))
        statements = ast.parse((folder / "version.py").read_text()).body
    except (StopIteration, OSError, SyntaxError, ValueError):
        statements = []
    for node in statements:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            try:
                if isinstance(target, ast.Name):
                    values[target.id] = ast.literal_eval(node.value)
            except ValueError:
                continue  # not a literal; not one of the values read here
    if not isinstance(values.get("__version__"), str):
        import torch

        return torch.__version__, torch.version.cuda, str(getattr(torch.version, "git_version", ""))
    cuda = values.get("cuda")
    return str(values["__version__"]), cuda if isinstance(cuda, str) else None, str(values.get("git_version", ""))


def visible_gpu_arch() -> str | None:
    """The compute capability ("9.0") of the first GPU CUDA can see, or None without one.

    Asked of the CUDA driver directly, which honours CUDA_VISIBLE_DEVICES as torch does, but
    costs a fraction of a second where importing torch costs seconds.
    """
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    count, device, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return None
    if driver.cuDeviceGet(ctypes.byref(device), 0) != 0:
        return None
    if driver.cuDeviceGetAttribute(ctypes.byref(major), _CAPABILITY_MAJOR, device) != 0:
        return None
    if driver.cuDeviceGetAttribute(ctypes.byref(minor), _CAPABILITY_MINOR, device) != 0:
        return None
    return f"{major.value}.{minor.value}"


def cuda_arch_choice(environ: Mapping[str, str]) -> tuple[str, str]:
    """The CUDA architecture list a build uses, and where it comes from, in this order:
    TORCH_CUDA_ARCH_LIST when set (not "native"), else the visible GPU's, else DEFAULT_CUDA_ARCH."""
    chosen = environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if chosen and chosen != "native":
        return ";".join(arch for arch in re.split(r"[;,\s]+", chosen) if arch), "TORCH_CUDA_ARCH_LIST"
    visible = visible_gpu_arch()
    if visible is not None:
        return ARCH_SPECIFIC_TARGETS.get(visible, visible), "the visible GPU"
    return DEFAULT_CUDA_ARCH, "the workspace's DEFAULT_CUDA_ARCH (no GPU visible)"


def cuda_arch_list(environ: Mapping[str, str]) -> str:
    """The architecture list of cuda_arch_choice."""
    return cuda_arch_choice(environ)[0]


def cuda_home(environ: Mapping[str, str], torch_cuda: str | None) -> str | None:
    """The CUDA toolkit to compile with, or None for a CPU-only build."""
    if environ.get("OPGEN_CUDA") == "0" or torch_cuda is None:
        return None  # asked for, or a CPU build of torch, which cannot load CUDA kernels
    home = environ.get("CUDA_HOME") or environ.get("CUDA_PATH")
    if not home:
        return None
    if not (Path(home) / "lib64" / "libcudart.so").exists():
        raise BuildConfigError(
            f"CUDA_HOME={home} holds no CUDA toolkit (no lib64/libcudart.so); "
            "point CUDA_HOME at the toolkit folder, or set OPGEN_CUDA=0 for a CPU-only build"
        )
    return home


def resolve(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings a build started with ``environ`` (default: this process's) compiles with."""
    environ = os.environ if environ is None else environ
    version, torch_cuda, git = torch_build()
    home = cuda_home(environ, torch_cuda)
    return Settings(
        torch=f"{version} (CUDA {torch_cuda or 'none'}, git {git[:10] or 'unknown'})",
        cuda_home=home,
        cuda_arch_list=cuda_arch_list(environ) if home is not None else None,
        compiler_variables=tuple(f"{name}={environ[name]}" for name in COMPILER_VARIABLES if environ.get(name)),
    )


def op_sources(op: str, with_cuda: bool, workspace: Path = WORKSPACE) -> list[Path]:
    """The op's translation units: csrc/*.cpp, and when CUDA is compiled also csrc/*.cu and the
    C++ files of the CUDA side, named <op>_cuda*.cpp (host code that needs CUDA's headers but
    not nvcc, such as softmax_cuda_binding.cpp)."""
    csrc = workspace / op / "csrc"
    sources = sorted(path for path in csrc.glob("*.cpp") if with_cuda or not path.stem.startswith(f"{op}_cuda"))
    if with_cuda:
        sources += sorted(csrc.glob("*.cu"))
    return sources


# An op's csrc/cuda_libraries.txt names the libraries its CUDA kernels link besides torch's, one a
# line (`#` starts a comment): cublasLt for the linear ops. Each is found in the CUDA toolkit, else
# in the NVIDIA wheels a pip-installed torch brings (a toolkit without cuBLAS still builds).
CUDA_LIBRARIES_FILE = "cuda_libraries.txt"


def op_cuda_libraries(op: str, workspace: Path = WORKSPACE) -> list[str]:
    """The names in the op's csrc/cuda_libraries.txt (none when it has no such file)."""
    path = workspace / op / "csrc" / CUDA_LIBRARIES_FILE
    if not path.is_file():
        return []
    return [line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()]


def nvidia_wheel_libraries() -> list[Path]:
    """The lib folders of NVIDIA's pip wheels (site-packages/nvidia/<package>/lib), found without importing torch."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    return sorted(folder for root in roots for folder in Path(root).glob("*/lib"))


def find_cuda_library(name: str, home: str) -> Path:
    """The file to link for CUDA library ``name`` (lib<name>.so, else its versioned lib<name>.so.N)."""
    toolkit = Path(home)
    folders = [toolkit / "lib64", toolkit / "lib", *sorted(toolkit.glob("targets/*/lib")), *nvidia_wheel_libraries()]
    for folder in folders:
        for candidate in [folder / f"lib{name}.so", *sorted(folder.glob(f"lib{name}.so.*"))]:
            if candidate.is_file():
                return candidate
    raise BuildConfigError(
        f"the CUDA library {name} (lib{name}.so) is neither in the toolkit {home} nor in NVIDIA's pip wheels; "
        f"install the toolkit's {name}, or build CPU-only with OPGEN_CUDA=0"
    )


def op_cuda_link(op: str, settings: Settings, workspace: Path = WORKSPACE) -> tuple[list[str], list[str]]:
    """(link arguments, C++ compiler flags) for the op's CUDA libraries; nothing without CUDA.

    Each library is linked by its file; where the toolkit lacks its header (lib<name>'s
    <name>.h), the header's folder beside the library is searched after every other
    (-idirafter), so the toolkit's own headers still come first.
    """
    if settings.cuda_home is None:
        return [], []
    link: list[str] = []
    flags: list[str] = []
    for name in op_cuda_libraries(op, workspace):
        library = find_cuda_library(name, settings.cuda_home)
        link.append(str(library))
        headers = library.parent.parent / "include"
        if not (Path(settings.cuda_home) / "include" / f"{name}.h").is_file() and (headers / f"{name}.h").is_file():
            flags += ["-idirafter", str(headers)]
    return link, flags


def op_headers(op: str, workspace: Path = WORKSPACE) -> list[Path]:
    """The op's own headers (csrc/) and the shared ones (include/)."""
    folders = [workspace / op / "csrc", workspace / "include"]
    return sorted(
        path for folder in folders if folder.is_dir() for path in folder.rglob("*") if path.suffix in HEADER_SUFFIXES
    )


def op_depends(op: str, workspace: Path = WORKSPACE) -> list[Path]:
    """What a change to rebuilds the op, besides its sources: headers and the build's own files."""
    libraries = workspace / op / "csrc" / CUDA_LIBRARIES_FILE
    extra = [libraries] if libraries.is_file() else []
    return [*op_headers(op, workspace), *extra, workspace / "setup.py", workspace / Path(__file__).name]


def op_config(op: str, settings: Settings, workspace: Path = WORKSPACE) -> str:
    """The text of the op's stamp: everything, besides file contents, its library depends on."""
    sources = op_sources(op, settings.with_cuda, workspace)
    names = " ".join(path.relative_to(workspace).as_posix() for path in sources)
    lines = [
        f"torch {settings.torch}",
        f"kernels {'CPU and CUDA' if settings.with_cuda else 'CPU'}",
        f"cuda toolkit {settings.cuda_home or 'none'}",
        f"cuda architectures {settings.cuda_arch_list or 'none'}",
        f"compiler variables {' '.join(settings.compiler_variables) or 'none'}",
        f"sources {names}",
    ]
    if settings.with_cuda and op_cuda_libraries(op, workspace):
        lines.append(f"cuda libraries {' '.join(op_cuda_link(op, settings, workspace)[0])}")
    return "\n".join(lines) + "\n"


def stamp_path(op: str, workspace: Path = WORKSPACE) -> Path:
    return workspace / "build" / "opgen-config" / f"{op}.txt"


def write_stamp(op: str, settings: Settings, workspace: Path = WORKSPACE) -> Path:
    """Write the op's stamp if its text changed (its mtime then marks the change); return it."""
    stamp = stamp_path(op, workspace)
    config = op_config(op, settings, workspace)
    if not stamp.is_file() or stamp.read_text() != config:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(config)
    return stamp


def op_names(workspace: Path = WORKSPACE) -> list[str]:
    """The workspace's ops, sorted: its folders named like a Python package holding an
    ``__init__.py`` and a ``csrc/`` folder."""
    if not workspace.is_dir():
        return []
    return sorted(
        entry.name
        for entry in workspace.iterdir()
        if entry.name.isidentifier() and (entry / "__init__.py").is_file() and (entry / "csrc").is_dir()
    )


def op_library(op: str, workspace: Path = WORKSPACE) -> Path | None:
    """The op's library as ``import`` finds it (``<op>/_C.abi3.so`` and the like), if built."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        library = workspace / op / f"_C{suffix}"
        if library.is_file():
            return library
    return None


def op_build_folder(op: str, workspace: Path = WORKSPACE) -> Path:
    """Where setup.py puts the op's objects and ninja file: a folder of the op's own, so ops can
    build side by side and ninja finds what it compiled last, whichever way the op was built."""
    return workspace / "build" / "ops" / op


def precompiled_header_folder(
    command: list[str], torch_version: str, workspace: Path = WORKSPACE, environ: Mapping[str, str] | None = None
) -> Path | None:
    """Where a build keeps TORCH_HEADERS precompiled by the compiler ``command`` (its flags): a
    folder per command, torch version and text of the header, since the compiler checks its flags
    against the precompiled form's but not whether the headers it read have changed since. None
    where the workspace has no such header (deleted: the ops build without one).

    The folder is below the workspace's build/pch/, or below $OPGEN_PCH_CACHE where that is set
    (PRECOMPILED_HEADERS_ENV): there the workspace's own folder is left out of the key (its
    include folder is among the flags; the header includes only torch's), so workspaces that
    compile alike share one precompiled form."""
    path = workspace / "include" / TORCH_HEADERS
    if not path.is_file():
        return None
    shared = (os.environ if environ is None else environ).get(PRECOMPILED_HEADERS_ENV)
    if shared:
        places = {str(workspace), str(workspace.resolve())}
        command = [_workspace_as_placeholder(part, places) for part in command]
    header = path.read_bytes()
    key = hashlib.sha256("\0".join([*command, torch_version]).encode() + b"\0" + header).hexdigest()[:16]
    return Path(shared).expanduser() / key if shared else workspace / "build" / "pch" / key


def _workspace_as_placeholder(flag: str, places: set[str]) -> str:
    """``flag`` with the workspace's folder (any of ``places``) written as <workspace>."""
    for place in sorted(places, key=len, reverse=True):
        flag = flag.replace(place, "<workspace>")
    return flag


def op_jit_folder(op: str, workspace: Path = WORKSPACE) -> Path:
    """Where ``opgen dev`` (opgen's JIT build) builds the op: one folder below per configuration."""
    return workspace / "build" / "jit" / op


def op_library_files(op: str, workspace: Path = WORKSPACE) -> list[Path]:
    """Every built library of the op, sorted: op_library's, and those of other Pythons or
    builds (``<op>/_C*.so``), which ``import`` here does not load."""
    return sorted((workspace / op).glob("_C*.so"))


def changed_since_build(op: str, settings: Settings, library: Path, workspace: Path = WORKSPACE) -> list[Path]:
    """Why ``library`` is not op's build under ``settings``; empty when it is, with nothing changed since.

    The inputs (sources, headers, setup.py, this file) newer than the library or missing, and the
    stamp when it is missing, newer than the library or holds another configuration than
    ``settings`` give (a changed setting). ``opgen list`` reports these; up_to_date is their absence.
    """
    try:
        built_at = library.stat().st_mtime
    except OSError:  # no library: everything is to build
        return [library]
    stamp = stamp_path(op, workspace)
    changed: list[Path] = []
    try:
        if stamp.read_text() != op_config(op, settings, workspace):
            changed.append(stamp)
    except OSError:  # no stamp
        changed.append(stamp)
    for path in [*op_sources(op, settings.with_cuda, workspace), *op_depends(op, workspace), stamp]:
        try:
            newer = path.stat().st_mtime > built_at
        except OSError:  # a missing input
            newer = True
        if newer and path not in changed:
            changed.append(path)
    return changed


def up_to_date(op: str, settings: Settings, library: Path | None, workspace: Path = WORKSPACE) -> bool:
    """Whether ``library`` is op's build under ``settings`` with nothing changed since."""
    return library is not None and library.is_file() and not changed_since_build(op, settings, library, workspace)

"""`opgen dev` and ``load_op``: build one op just in time and load it into the running process.

The op is compiled with ``torch.utils.cpp_extension.load`` from the sources, flags and include
folder the workspace's own setup.py declares (read from that file, so an edit there applies to
both builds), into ``<workspace>/build/jit/<op>/<configuration>/``; the configuration folder is
named after the torch and Python versions and the CPU-only or CUDA (toolkit, architectures) mode.
ninja tracks every header a translation unit includes, so only what changed is recompiled.

When nothing changed (the same configuration, and ``ninja -n`` has no work) the library is
loaded straight away, without torch's build machinery: a fresh process pays for importing torch
and little else.

A process can hold one build of an op: the dispatcher cannot replace an op's schema, and loading
a second library that defines it aborts the process. So ``load_op`` refuses, with the reason,
when the op is already loaded from another library (``import generated_ops``, another
configuration, or sources that changed since); and the workspace's ``_loading.py`` uses the JIT
build when the package is imported after it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from opgen.build import BUILD_CONFIG_FILE, build_setup, first_compiler_error, split_arch_list
from opgen.errors import BuildFailed, OpAlreadyLoaded, WorkspaceError
from opgen.rules import BuildSettings, rules_for
from opgen.toolchain import CudaToolkit
from opgen.workspace import Workspace

# Every generated op registers in this TORCH_LIBRARY namespace (template/partials/csrc/schema.cpp.jinja).
OP_NAMESPACE = "generated_ops"
STAMP_FILE = "opgen-jit.json"

# What this process loaded through load_op: (workspace, op) -> (library, configuration).
_loaded: dict[tuple[Path, str], tuple[Path, dict[str, Any]]] = {}


@dataclass(frozen=True)
class JitBuild:
    """One op's JIT build, loaded: what was done (built, reused, already-loaded), where, how long."""

    op: str
    status: str
    library: Path
    mode: str
    seconds: float
    module: ModuleType


@dataclass(frozen=True)
class _Plan:
    """What a JIT build of the op compiles, with which flags, into which folder."""

    op: str
    workspace: Path
    library_name: str
    folder: Path
    sources: list[str]
    include_dirs: list[str]
    cxx_flags: list[str]
    nvcc_flags: list[str]
    link_flags: list[str]
    toolkit: CudaToolkit | None
    settings: BuildSettings  # the workspace's _build_config.Settings, as `opgen build` resolves them
    env: dict[str, str]

    @property
    def with_cuda(self) -> bool:
        return self.toolkit is not None

    @property
    def mode(self) -> str:
        return str(self.settings.describe())

    def configuration(self) -> dict[str, Any]:
        """Everything besides the sources' contents that the library depends on.

        The build settings are those `opgen build` stamps its libraries with (torch, toolkit,
        architectures, compiler variables), plus the Python version the library was built under.
        Lists, not tuples: the stamp is compared after a JSON round trip.
        """
        return {
            "sources": list(self.sources),
            "include_dirs": list(self.include_dirs),
            "cxx_flags": list(self.cxx_flags),
            "nvcc_flags": list(self.nvcc_flags) if self.with_cuda else [],
            "link_flags": list(self.link_flags),
            "torch": self.settings.torch,
            "toolkit": self.settings.cuda_home,
            "arch": self.settings.cuda_arch_list,
            "compiler_variables": list(self.settings.compiler_variables),
            "python": sys.version.split()[0],
        }


def load_op(
    op: str,
    workspace: Workspace | Path | str | None = None,
    *,
    cpu_only: bool = False,
    jobs: int | None = None,
    arch: str | None = None,
    verbose: bool = False,
) -> ModuleType:
    """Build ``op`` just in time (or reuse its cached build) and load it; return its Python module.

    The module is the op's own (``<workspace>.<op>``), with the autograd and torch.compile
    registrations: ``load_op("softmax").softmax(x)`` works as ``generated_ops.softmax(x)`` does,
    and so does ``torch.ops.generated_ops.softmax``. Call it again after editing the sources in
    a fresh process (a notebook: restart the kernel); only what changed is recompiled.

    Raises BuildFailed when the op does not compile, OpAlreadyLoaded when this process already
    holds another build of it (see the module docstring).
    """
    return jit_load(op, workspace, cpu_only=cpu_only, jobs=jobs, arch=arch, verbose=verbose).module


def jit_load(
    op: str,
    workspace: Workspace | Path | str | None = None,
    *,
    cpu_only: bool = False,
    jobs: int | None = None,
    arch: str | None = None,
    verbose: bool = False,
    announce: Callable[[str], None] | None = None,
) -> JitBuild:
    """``load_op``, reporting what was done: built, reused (the cached build) or already-loaded.

    ``announce`` receives one line before a compile starts (which can take a minute with CUDA).
    """
    started = time.perf_counter()
    ws = workspace if isinstance(workspace, Workspace) else Workspace.locate(workspace)
    (name,) = ws.require_ops([op])
    plan = _plan(ws, name, cpu_only=cpu_only, jobs=jobs, arch=arch)
    configuration = plan.configuration()
    _require_importable_package(ws)

    import torch

    previous = _loaded.get((ws.path, name))
    if previous is not None:
        library, loaded_configuration = previous
        if loaded_configuration != configuration or not _ninja_up_to_date(plan.folder):
            raise OpAlreadyLoaded(op=name, reason="its sources or build settings changed since this process loaded it")
        return JitBuild(
            name, "already-loaded", library, plan.mode, time.perf_counter() - started, _import_op_module(ws, name)
        )
    if _is_registered(name):
        raise OpAlreadyLoaded(op=name, reason=f"it is already loaded, {_loaded_from(ws, name)}")

    cached = _cached_library(plan, configuration)
    if cached is not None:
        torch.ops.load_library(str(cached))
        library, status = cached, "reused"
    else:
        if announce is not None:
            announce(f"building {name} in {plan.folder}: {plan.mode}")
        library, status = _compile_and_load(plan, configuration, verbose=verbose), "built"
    _loaded[(ws.path, name)] = (library, configuration)
    module = _import_op_module(ws, name)
    return JitBuild(name, status, library, plan.mode, time.perf_counter() - started, module)


def _plan(ws: Workspace, op: str, *, cpu_only: bool, jobs: int | None, arch: str | None = None) -> _Plan:
    import torch

    build = build_setup(ws, [op], cpu_only=cpu_only, jobs=jobs, arch=arch)
    if build.config is None:
        raise WorkspaceError(
            path=str(ws.path),
            reason=f"it has no loadable {BUILD_CONFIG_FILE}, which `opgen dev` builds with",
            hint="copy it from a freshly rendered workspace (`opgen new <op> -w /tmp/fresh_ops`), or run `opgen update`",
        )
    if build.settings is None:
        raise WorkspaceError(
            path=str(ws.path),
            reason=f"its {BUILD_CONFIG_FILE} cannot work out the build settings: {build.problem}",
            hint="fix what it names, or compare the file with a freshly rendered workspace's (`opgen new <op> -w /tmp/fresh_ops`)",
        )
    config, toolkit, settings = build.config, build.toolkit, build.settings
    # Libraries the op's CUDA kernels link besides torch's (csrc/cuda_libraries.txt: cuBLASLt).
    link, library_flags = config.op_cuda_link(op, settings, ws.path) if toolkit is not None else ([], [])
    python = f"py{sys.version_info.major}{sys.version_info.minor}"
    if toolkit is None:
        configuration = f"torch{torch.__version__}-{python}-cpu"
    else:
        # "9.0;9.0a" -> sm90-sm90a; "9.0+PTX" -> sm90_PTX (see the sanitizing below).
        targets = "-".join(f"sm{a.replace('.', '')}" for a in split_arch_list(settings.cuda_arch_list or ""))
        configuration = f"torch{torch.__version__}-{python}-cuda{toolkit.version or ''}-{targets}"
    return _Plan(
        op=op,
        workspace=ws.path,
        library_name=f"{ws.package}_{op}",
        folder=config.op_jit_folder(op, ws.path) / re.sub(r"[^A-Za-z0-9._-]", "_", configuration),
        sources=[str(source) for source in config.op_sources(op, toolkit is not None, ws.path)],
        include_dirs=[str(ws.path / "include")],
        cxx_flags=[*config.CXX_FLAGS, *library_flags],
        nvcc_flags=list(config.NVCC_FLAGS),
        link_flags=[*config.LINK_FLAGS, *link],
        toolkit=toolkit,
        settings=settings,
        env=build.env,
    )


def _ninja_up_to_date(folder: Path) -> bool:
    """Whether ninja, with the depfiles it recorded, has nothing to recompile or relink."""
    try:
        dry_run = subprocess.run(["ninja", "-n", "-C", str(folder)], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return dry_run.returncode == 0 and "no work to do" in dry_run.stdout


def _cached_library(plan: _Plan, configuration: dict[str, Any]) -> Path | None:
    """The library built before with this configuration, if no source or header changed since."""
    try:
        stamp = json.loads((plan.folder / STAMP_FILE).read_text())
    except (OSError, ValueError):
        return None
    library = plan.folder / str(stamp.get("library", ""))
    if stamp.get("configuration") != configuration or not library.is_file():
        return None
    return library if _ninja_up_to_date(plan.folder) else None


def _compile_and_load(plan: _Plan, configuration: dict[str, Any], *, verbose: bool) -> Path:
    """Build with torch.utils.cpp_extension.load (which loads the library too); record the stamp."""
    plan.folder.mkdir(parents=True, exist_ok=True)
    stamp = plan.folder / STAMP_FILE
    stamp.unlink(missing_ok=True)  # a build that fails leaves no stamp claiming the library is current
    with _environment(plan.env):
        cpp_extension = _import_cpp_extension()
        saved_cuda_home = cpp_extension.CUDA_HOME
        if plan.toolkit is not None:
            # torch reads CUDA_HOME once, when cpp_extension is first imported (maybe long before).
            cpp_extension.CUDA_HOME = str(plan.toolkit.home)
        try:
            # Copies: torch appends its own flags to the lists it is given.
            loaded = cpp_extension.load(
                name=plan.library_name,
                sources=list(plan.sources),
                extra_cflags=list(plan.cxx_flags),
                extra_cuda_cflags=list(plan.nvcc_flags),
                extra_ldflags=list(plan.link_flags),
                extra_include_paths=list(plan.include_dirs),
                build_directory=str(plan.folder),
                verbose=verbose,
                with_cuda=plan.with_cuda,
                is_python_module=False,
            )
        except (RuntimeError, OSError) as error:
            failure = BuildFailed(ops=[plan.op], first_error=first_compiler_error(str(error), plan.op, plan.workspace))
            failure.hint = f"`opgen dev {plan.op} -v` shows the full compiler output"
            raise failure from error
        finally:
            cpp_extension.CUDA_HOME = saved_cuda_home
    # Named <name>_v<N>.so when an earlier build in this process failed (torch versions each attempt).
    library = Path(str(loaded))
    partial = stamp.with_suffix(".partial")
    partial.write_text(json.dumps({"library": library.name, "configuration": configuration}, indent=2) + "\n")
    partial.replace(stamp)
    return library


def _import_cpp_extension() -> Any:
    """torch.utils.cpp_extension, without its warnings about guessing CUDA_HOME (opgen sets it)."""
    logger = logging.getLogger("torch.utils.cpp_extension")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        from torch.utils import cpp_extension
    finally:
        logger.setLevel(level)
    return cpp_extension


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    """Run with os.environ set to ``env``, restored afterwards."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _is_registered(op: str) -> bool:
    import torch

    return hasattr(getattr(torch.ops, OP_NAMESPACE), op)


def _loaded_from(ws: Workspace, op: str) -> str:
    """Which loaded library defines ``op``, as words for an error message."""
    import torch

    op_dir = ws.op_dir(op).resolve()
    for loaded in sorted(torch.ops.loaded_libraries):
        path = Path(loaded).resolve()
        if path.parent == op_dir:
            return f"from {path} (the `opgen build` library, by an import of {ws.package})"
        if path.is_relative_to(rules_for(ws.path).op_jit_folder(op, ws.path)):
            return f"from {path} (a JIT build with other settings)"
    return f"by another library of the {OP_NAMESPACE} namespace"


def _require_importable_package(ws: Workspace) -> None:
    """The workspace package, if this process imported it already, must be this workspace."""
    package = sys.modules.get(ws.package)
    if package is None:
        return
    paths = [Path(entry).resolve() for entry in getattr(package, "__path__", [])]
    if ws.path not in paths:
        raise WorkspaceError(
            path=str(ws.path),
            reason=f"this process already imported another package named {ws.package} (from {', '.join(map(str, paths)) or 'nowhere'})",
            hint="restart Python and call load_op before importing that package",
        )


def _import_op_module(ws: Workspace, op: str) -> ModuleType:
    """``<package>.<op>``, importing the workspace package from ``ws`` when it is not yet imported."""
    package = sys.modules.get(ws.package)
    if package is None:
        spec = importlib.util.spec_from_file_location(
            ws.package, ws.path / "__init__.py", submodule_search_locations=[str(ws.path)]
        )
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules[ws.package] = package
        try:
            with warnings.catch_warnings():
                # The package warns about ops that are not built; load_op asked for this op alone.
                warnings.filterwarnings("ignore", message=".*skipped ops that are not built")
                spec.loader.exec_module(package)
        except BaseException:
            del sys.modules[ws.package]
            raise
    module = importlib.import_module(f"{ws.package}.{op}")
    # As the package does for every built op: <package>.<op> is the function, not the subpackage.
    setattr(package, op, getattr(module, op))
    for listing, present in (("built_ops", True), ("unbuilt_ops", False), ("__all__", True)):
        names = getattr(package, listing, None)
        if isinstance(names, list):
            if present and op not in names:
                names.append(op)
            elif not present and op in names:
                names.remove(op)
    return module

"""The workspace's build rules, as opgen calls them: one definition, carried by every workspace.

Which folders are ops, where an op's built library lives, in which order the CUDA architectures
are chosen, what a build compiles with and when an op is up to date are defined once, in the
template's ``workspace/_build_config.py``. Every workspace carries a copy (setup.py and the
package's ``__init__.py`` ask it), and opgen asks the workspace's copy when it declares the
INTERFACE below, else its own (a workspace from before ``opgen update`` brought the current
file). ``BuildRules`` is the interface opgen calls; nothing here duck-types an older file.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, cast

RULES_FILE = "_build_config.py"
# The form of _build_config.py's functions this opgen calls; the file states it as INTERFACE.
INTERFACE = 2


class BuildSettings(Protocol):
    """What every op of one build is compiled with (_build_config.Settings)."""

    @property
    def torch(self) -> str: ...
    @property
    def cuda_home(self) -> str | None: ...
    @property
    def cuda_arch_list(self) -> str | None: ...
    @property
    def with_cuda(self) -> bool: ...
    @property
    def compiler_variables(self) -> tuple[str, ...]: ...
    def describe(self) -> str: ...


class BuildRules(Protocol):
    """The functions of _build_config.py that opgen calls (its INTERFACE 2)."""

    INTERFACE: int
    DEFAULT_CUDA_ARCH: str
    EVENT_KEY: str  # setup.py's JSON progress lines start with this key (event_line)
    CXX_FLAGS: list[str]
    NVCC_FLAGS: list[str]
    LINK_FLAGS: list[str]

    def torch_build(self) -> tuple[str, str | None, str]: ...
    def resolve(self, environ: Mapping[str, str] | None = None) -> BuildSettings: ...
    def op_names(self, workspace: Path = ...) -> list[str]: ...
    def op_library(self, op: str, workspace: Path = ...) -> Path | None: ...
    def op_library_files(self, op: str, workspace: Path = ...) -> list[Path]: ...
    def op_build_folder(self, op: str, workspace: Path = ...) -> Path: ...
    def op_jit_folder(self, op: str, workspace: Path = ...) -> Path: ...
    def stamp_path(self, op: str, workspace: Path = ...) -> Path: ...
    def write_stamp(self, op: str, settings: BuildSettings, workspace: Path = ...) -> Path: ...
    def op_sources(self, op: str, with_cuda: bool, workspace: Path = ...) -> list[Path]: ...
    def op_cuda_link(self, op: str, settings: BuildSettings, workspace: Path = ...) -> tuple[list[str], list[str]]: ...
    def cuda_arch_choice(self, environ: Mapping[str, str]) -> tuple[str, str]: ...
    def changed_since_build(
        self, op: str, settings: BuildSettings, library: Path, workspace: Path = ...
    ) -> list[Path]: ...
    def up_to_date(self, op: str, settings: BuildSettings, library: Path | None, workspace: Path = ...) -> bool: ...


def _load(path: Path, name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def workspace_rules(workspace: Path) -> BuildRules | None:
    """The workspace's own _build_config.py, when it loads and declares this opgen's INTERFACE.

    None where it has none, it fails to load (the user's edit: setup.py then says what is wrong)
    or it is an older form (``opgen update`` brings the current one).
    """
    path = workspace / RULES_FILE
    if not path.is_file():
        return None
    try:
        module = _load(path, f"_opgen_build_config_{workspace.name}")
    except Exception:  # the user's edited file: whatever it raises, setup.py will say it better
        return None
    if getattr(module, "INTERFACE", None) != INTERFACE:
        return None
    return cast(BuildRules, module)


@functools.cache
def _opgen_rules(template: Path) -> BuildRules:
    return cast(BuildRules, _load(template / "workspace" / RULES_FILE, "_opgen_template_build_config"))


def opgen_rules() -> BuildRules:
    """The rules as opgen carries them: the template's _build_config.py, which workspaces copy."""
    from opgen.render import template_dir

    return _opgen_rules(template_dir())


def rules_for(workspace: Path) -> BuildRules:
    """The rules a workspace is built by: its own copy when current, else opgen's."""
    return workspace_rules(workspace) or opgen_rules()

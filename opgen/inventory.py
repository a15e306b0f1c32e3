"""`opgen list` and `opgen remove`: what the workspace holds, and taking an op out of it.

Everything here is read from the workspace itself (the op's copier answers, its compiled library,
and whether it is up to date as the workspace's _build_config.py decides for `opgen build`),
never from a record opgen keeps on the side, so an op added or edited by hand is reported as
faithfully as one `opgen new` rendered.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opgen.build import build_setup
from opgen.errors import OpgenError
from opgen.recipes import recipe_named
from opgen.rules import BuildRules, BuildSettings, opgen_rules, rules_for
from opgen.workspace import Workspace, read_answers

# What changed_since_build names besides files: the settings a build would use now (torch, the
# CUDA toolkit and architectures, compiler variables) are not those the library was built with.
SETTINGS_CHANGED = "build settings"
# ...where the workspace's build rule cannot be worked out (`opgen build` then rebuilds every op),
UNDECIDED = (
    "unknown: the workspace's _build_config.py cannot be loaded, is an older form "
    "(`opgen update` brings the current one) or cannot resolve the build settings"
)

# Every current recipe dispatches with AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16, ...).
RECIPE_DTYPES = ("float32", "float64", "float16", "bfloat16")

# The .nv_fatbin section holds fat binaries: a 16-byte header, then entries of
# (kind, header size, payload size, ..., SM arch) each followed by its payload.
_FATBIN_MAGIC = 0xBA55ED50
_FATBIN_KIND_PTX = 1
_FATBIN_KIND_ELF = 2


@dataclass(frozen=True)
class OpInfo:
    """One op of the workspace as `opgen list` reports it."""

    name: str
    recipe: str
    kind: str
    dtypes: tuple[str, ...]
    template_version: str
    library: Path | None
    cuda_architectures: tuple[str, ...] | None
    changed_since_build: tuple[str, ...] = field(default=())

    @property
    def built(self) -> str:
        """'no', 'CPU' or 'CPU+CUDA': which kernels the compiled library holds."""
        if self.library is None:
            return "no"
        return "CPU+CUDA" if self.cuda_architectures is not None else "CPU"

    @property
    def stale(self) -> bool:
        """Built, but `opgen build` would rebuild it: an input or a build setting changed since."""
        return bool(self.changed_since_build)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "recipe": self.recipe,
            "kind": self.kind,
            "dtypes": list(self.dtypes),
            "template_version": self.template_version,
            "built": self.built,
            "library": str(self.library) if self.library else None,
            "cuda_architectures": list(self.cuda_architectures) if self.cuda_architectures is not None else None,
            "stale": self.stale,
            "changed_since_build": list(self.changed_since_build),
        }


def _elf_section(data: bytes, wanted: str) -> bytes | None:
    """The contents of section ``wanted`` of a 64-bit little-endian ELF file, if it has one."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    (section_table,) = struct.unpack_from("<Q", data, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", data, 0x3A)

    def header(index: int) -> tuple[int, int, int]:
        name, _type, _flags, _addr, offset, size = struct.unpack_from(
            "<IIQQQQ", data, section_table + index * entry_size
        )
        return name, offset, size

    try:
        _, names_offset, names_size = header(names_index)
        names = data[names_offset : names_offset + names_size]
        for index in range(count):
            name, offset, size = header(index)
            if names[name : names.find(b"\0", name)].decode(errors="replace") == wanted:
                return data[offset : offset + size]
    except struct.error:
        return None
    return None


def _fatbin_entries(fatbin: bytes) -> Iterator[tuple[int, int]]:
    """(kind, SM arch) of every entry of every fat binary in a .nv_fatbin section."""
    start = 0
    while start + 16 <= len(fatbin):
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", fatbin, start)
        if magic != _FATBIN_MAGIC:
            # Fat binaries are 8-byte aligned within the section; skip padding.
            start += 8
            continue
        entry = start + header_size
        end = min(entry + fat_size, len(fatbin))
        while entry + 32 <= end:
            kind, _, entry_header_size, payload_size = struct.unpack_from("<HHIQ", fatbin, entry)
            (arch,) = struct.unpack_from("<I", fatbin, entry + 28)
            if entry_header_size == 0:
                break
            yield kind, arch
            entry += entry_header_size + payload_size
        start = start + header_size + fat_size


def cuda_architectures(library: Path) -> tuple[str, ...] | None:
    """The GPU architectures compiled into ``library`` ("9.0", "9.0+PTX"); None without CUDA code.

    Read from the library's embedded fat binary: no torch import and no GPU needed, so listing
    stays fast and works on a machine without CUDA.
    """
    try:
        data = library.read_bytes()
    except OSError:
        return None
    fatbin = _elf_section(data, ".nv_fatbin")
    if fatbin is None:
        return None
    machine_code: set[int] = set()
    ptx: set[int] = set()
    for kind, arch in _fatbin_entries(fatbin):
        if kind == _FATBIN_KIND_ELF:
            machine_code.add(arch)
        elif kind == _FATBIN_KIND_PTX:
            ptx.add(arch)
    return tuple(f"{arch // 10}.{arch % 10}{'+PTX' if arch in ptx else ''}" for arch in sorted(machine_code | ptx))


@dataclass(frozen=True)
class BuildRule:
    """The workspace's own up-to-date rule (its _build_config.py) and the settings `opgen build` uses now."""

    config: BuildRules
    settings: BuildSettings


def build_rule(workspace: Workspace) -> BuildRule | None:
    """The rule `opgen build` decides with, or None where it cannot be worked out here.

    None (no or a broken _build_config.py, settings that cannot be resolved) is also where the
    build rebuilds every op.
    """
    try:
        setup = build_setup(workspace, [], jobs=1)
    except OpgenError:  # e.g. a TORCH_CUDA_ARCH_LIST the build would refuse
        return None
    if setup.config is None or setup.settings is None:
        return None
    return BuildRule(config=setup.config, settings=setup.settings)


def changed_since_build(workspace: Workspace, op: str, library: Path, rule: BuildRule | None) -> tuple[str, ...]:
    """Why `opgen build` would rebuild the op: changed inputs (workspace-relative) and SETTINGS_CHANGED.

    Asked of the workspace's _build_config.py, the file `opgen build` and setup.py decide with,
    so that list and build cannot disagree. Empty when the op is up to date.
    """
    if rule is None:
        return (UNDECIDED,)
    config, settings = rule.config, rule.settings
    if config.op_library(op, workspace.path) is None:  # the build looks under this Python's extension suffixes only
        return (f"{_relative(library, workspace.path)} is no library this Python loads",)
    stamp = config.stamp_path(op, workspace.path)
    changed = {
        SETTINGS_CHANGED if path == stamp else _relative(path, workspace.path)
        for path in config.changed_since_build(op, settings, library, workspace.path)
    }
    return tuple(sorted(changed - {SETTINGS_CHANGED})) + ((SETTINGS_CHANGED,) if SETTINGS_CHANGED in changed else ())


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _kind_of(recipe: str) -> str:
    try:
        return recipe_named(recipe).kind
    except KeyError:
        return "unknown"


def describe_op(workspace: Workspace, op: str, rule: BuildRule | None) -> OpInfo:
    """Everything `opgen list` says about one op (``rule``: build_rule's answer, asked once for every op)."""
    op_dir = workspace.op_dir(op)
    answers = read_answers(op_dir)
    recipe = str(answers.get("recipe", "unknown"))
    rules = rules_for(workspace.path)
    library = rules.op_library(op, workspace.path) or next(iter(rules.op_library_files(op, workspace.path)), None)
    return OpInfo(
        name=op,
        recipe=recipe,
        kind=_kind_of(recipe),
        dtypes=RECIPE_DTYPES,
        template_version=str(answers.get("opgen_version", "unknown")),
        library=library,
        cuda_architectures=cuda_architectures(library) if library else None,
        changed_since_build=changed_since_build(workspace, op, library, rule) if library else (),
    )


def list_ops(workspace: Workspace) -> list[OpInfo]:
    """Every op of the workspace, sorted by name."""
    workspace.require_exists()
    rule = build_rule(workspace)
    return [describe_op(workspace, op, rule) for op in workspace.ops()]


@dataclass(frozen=True)
class Removal:
    """What removing one op deletes: its folder (sources and library) and its build products."""

    op: str
    paths: tuple[Path, ...]
    done: bool = False


def build_products(workspace: Workspace, op: str) -> list[Path]:
    """The op's objects and libraries under the workspace's build/ folder (setuptools' layout)."""
    build = workspace.path / "build"
    if not build.is_dir():
        return []
    candidates = [
        *build.glob(f"temp.*/{op}"),  # objects
        opgen_rules().op_build_folder(op, workspace.path),  # objects, where ops build side by side
        *build.glob(f"lib.*/{workspace.package}/{op}"),  # the library before its copy into the op folder
        rules_for(workspace.path).stamp_path(op, workspace.path),  # setup.py's record of the op's build configuration
        rules_for(workspace.path).op_jit_folder(op, workspace.path),  # `opgen dev` builds
    ]
    return sorted(path for path in candidates if path.exists())


def remove_op(workspace: Workspace, op: str, *, confirm: Callable[[Removal], bool] | None = None) -> Removal:
    """Delete op ``op``: its folder and its build products. UnknownOp (nothing touched) if no such op.

    ``confirm`` is asked first with what would be deleted; when it says no, nothing is deleted
    and the returned Removal has ``done`` False. It may raise RemovalNotConfirmed instead.
    """
    (name,) = workspace.require_ops([op])
    removal = Removal(op=name, paths=(workspace.op_dir(name), *build_products(workspace, name)))
    if confirm is not None and not confirm(removal):
        return removal
    for path in removal.paths:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    return Removal(op=name, paths=removal.paths, done=True)

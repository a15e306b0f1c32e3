"""The workspaces the slow tests share: every op they join, rendered and built once per test run.

A slow test module joins its ops to one of WORKSPACES at its top (``OPS = shared_build.join({...},
workspace="one")``) and takes the ``shared_projects`` fixture (tests/conftest.py): called with the
workspace's name, it gives the folder holding that ``generated_ops/`` with every op joined to it
built. The ops are rendered with ``opgen new`` and compiled by two ``opgen build`` runs (the ops
joined with ``cuda=...`` as `opgen build` decides, CUDA kernels included where a toolkit is found;
the rest ``--cpu-only``), once per run however many test processes pytest-xdist starts
(``made_once``: a file lock and a folder keyed by what was joined). There are two workspaces, of
about equal build times, so that both test processes compile at once: one workspace is one
setup.py, which compiles its ops one after another.

Nothing may change the shared workspace's ops: a deliberately broken stand-in is an op of its own,
``<op>_broken``, rendered like ``<op>`` and edited before the build (``broken=...``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
from filelock import FileLock
from typer.testing import CliRunner
from workspace_commands import BrokenEdit, opgen

# `opgen new` options that already name what to render; an op without one renders its own recipe,
# which its broken stand-in names with --recipe.
_CHOOSES_THE_RECIPE = ("--recipe", "--kind", "--signature", "--formula")


# Their names; join an op where less is built (the build summaries in the CI log give the times).
WORKSPACES = ("one", "two")


@dataclass(frozen=True)
class SharedOp:
    workspace: str
    name: str
    options: tuple[str, ...]  # `opgen new NAME OPTIONS`
    cuda: bool  # built as `opgen build` decides (CUDA kernels where a toolkit is found), else --cpu-only
    broken: BrokenEdit | None = None  # a stand-in: this edit made to its csrc/ before the build


_JOINED: dict[tuple[str, str], SharedOp] = {}


def broken_name(op: str) -> str:
    """The name of ``op``'s deliberately broken stand-in in the shared workspace."""
    return f"{op}_broken"


def join(
    ops: Mapping[str, Sequence[str]],
    *,
    workspace: str,
    cuda: Iterable[str] = (),
    broken: Mapping[str, BrokenEdit] | None = None,
) -> list[str]:
    """Add ``ops`` (name -> `opgen new` options) to the shared ``workspace``; return their names.

    ``cuda``: the ops whose CUDA kernels CI compiles too (the GPU session builds and tests every op's).
    ``broken``: for some of them, an edit of a kernel (its reference left right): each becomes a stand-in
    ``broken_name(op)``, built for the CPU, whose generated tests must fail.
    """
    if workspace not in WORKSPACES:
        raise ValueError(f"no shared workspace {workspace!r}; the shared workspaces: {', '.join(WORKSPACES)}")
    with_cuda = set(cuda)
    for name, options in ops.items():
        _add(SharedOp(workspace, name, tuple(options), name in with_cuda))
    for name, (source, correct, wrong) in (broken or {}).items():
        options = tuple(ops[name])
        if not any(option in _CHOOSES_THE_RECIPE for option in options):
            options = ("--recipe", name, *options)
        twin = broken_name(name)
        _add(SharedOp(workspace, twin, options, False, (source.replace(name, twin, 1), correct, wrong)))
    return list(ops)


def _add(op: SharedOp) -> None:
    if _JOINED.get((op.workspace, op.name), op) != op:
        raise ValueError(f"two test modules join the shared workspace's op {op.name!r} with different options")
    _JOINED[op.workspace, op.name] = op


def joined(workspace: str) -> list[SharedOp]:
    """The ops joined to ``workspace``, sorted by name."""
    return [op for (name, _), op in sorted(_JOINED.items(), key=lambda item: item[0][1]) if name == workspace]


def key(workspace: str) -> str:
    """A name for the shared ``workspace`` of what was joined to it (the same in every test process)."""
    text = json.dumps([asdict(op) for op in joined(workspace)])
    return f"shared-build-{workspace}-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def run_folder(factory: pytest.TempPathFactory) -> Path:
    """The test run's base temporary folder, the same for every pytest-xdist process of the run."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """``make(folder)`` once per test run, whichever test process asks first; the folder.

    The folder lies where every pytest-xdist process of this run looks (the run's base temporary
    folder); a file lock keeps the others waiting while one makes it. ``make`` must create the
    folder; if it raises, what it left is removed and the next caller tries again.
    """
    shared = run_folder(factory) / "made-once"
    shared.mkdir(exist_ok=True)
    folder, done = shared / name, shared / f"{name}.done"
    with FileLock(shared / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            try:
                make(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            done.touch()
    return folder


BUILDS = "builds.json"


def render_and_build(workspace: str, root: Path) -> None:
    """Render every op joined to ``workspace`` into ``root/generated_ops``, break the stand-ins, and build them all.

    The builds' outcomes (command, exit code, output) are written to ``root/builds.json`` whether
    they succeed or not: every test process reads them there instead of building again.
    """
    from opgen.cli import app  # in this process: `opgen new` runs the same code, without a Python start-up each

    root.mkdir(parents=True)
    runner = CliRunner()
    for op in joined(workspace):
        made = runner.invoke(app, ["new", op.name, *op.options, "-w", str(root / "generated_ops")])
        assert made.exit_code == 0, f"opgen new {op.name}: {made.output}"
        if op.broken is not None:
            source, correct, wrong = op.broken
            path = root / "generated_ops" / op.name / "csrc" / source
            text = path.read_text()
            assert text.count(correct) == 1, f"{op.name}: the line to break moved: {correct}"
            path.write_text(text.replace(correct, wrong))
    builds = []
    for cuda in (True, False):
        names = [op.name for op in joined(workspace) if op.cuda == cuda]
        if names:
            command = ["build", *([] if cuda else ["--cpu-only"]), *names]
            result = opgen(*command, cwd=root)
            builds.append({"command": command, "returncode": result.returncode, "stdout": result.stdout, "stderr": result.stderr})
    (root / BUILDS).write_text(json.dumps(builds))


@dataclass(frozen=True)
class SharedProject:
    root: Path  # the folder holding generated_ops/
    builds: list[dict[str, object]]  # each `opgen build` run: command, returncode, stdout, stderr

    def build_output(self, op: str) -> str:
        """The standard output of the build that built ``op``."""
        for build in self.builds:
            if op in build["command"]:  # type: ignore[operator]
                return str(build["stdout"])
        raise KeyError(op)


def read(root: Path) -> SharedProject:
    builds = json.loads((root / BUILDS).read_text())
    for build in builds:
        assert build["returncode"] == 0, f"opgen {' '.join(build['command'])}:\n{build['stdout']}{build['stderr']}"
    return SharedProject(root, builds)

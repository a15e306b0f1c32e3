"""`opgen update`: re-render ops and the workspace's shared files from the current template.

The update is copier's: three-way, from the template that rendered a folder (its base) to the
current one, so the user's edits are kept, the template's changes applied, and an edit that
collides with a change is left between conflict markers. copier wants two things opgen's users
do not have: the template as a git repository holding the base as a commit, and the folder
inside a clean git repository. opgen builds both in a scratch folder for each update:

- the base is the template snapshot the folder's answers name as ``_commit``, kept in the
  workspace (``.opgen/templates/<id>/``, written by every render: opgen.render); the scratch
  template repository holds it as tag ``1`` and the current template as tag ``2``;
- the folder's files are copied into a scratch git repository, updated there, and only the
  files that changed are copied back, after every folder has been updated, each written beside
  its place first and renamed over it. A failure before that point changes nothing.

One departure from copier: a file the new template no longer renders is deleted only if the
user never edited it; an edited one is kept and reported.

A folder rendered before opgen kept snapshots (answers without ``_commit``) has no base. When its
files are exactly what the current template renders from its answers, the current template
becomes its base; otherwise opgen cannot tell the user's edits from template changes and says so.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from opgen import __version__
from opgen.errors import NoTemplateHistory, UpdateFailed
from opgen.render import SNAPSHOTS, copy_template, run_copier, snapshot_dir, store_snapshot
from opgen.workspace import ANSWERS_FILE, Workspace, read_answers

CONFLICT_START = b"<<<<<<< before updating"  # copier's label for the user's side of a conflict
_SNAPSHOT_ID = re.compile(r"^[0-9a-f]{12}$")
# Build products and caches: never the template's, so never part of an update.
_PRODUCTS = ("__pycache__", ".pytest_cache", "*.pyc", "*.so", "*.egg-info", ".opgen-*")
# Git settings of the user's that would change what git prints to copier (diff prefixes, hooks,
# signing, excludes) are left out: the scratch repositories are opgen's.
_GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
_GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "opgen",
    "GIT_AUTHOR_EMAIL": "opgen@localhost",
    "GIT_COMMITTER_NAME": "opgen",
    "GIT_COMMITTER_EMAIL": "opgen@localhost",
}
_GIT_LOCATION = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR")

ChangeStatus = Literal["modified", "added", "deleted"]


@dataclass(frozen=True)
class FileChange:
    """One file an update changes, its path relative to the workspace."""

    path: str
    status: ChangeStatus
    added_lines: int
    removed_lines: int
    conflict: bool


@dataclass(frozen=True)
class FolderUpdate:
    """The update of one folder: an op, or the workspace's shared files (``name == "workspace"``)."""

    name: str  # the op, or the workspace's package name for its shared files
    shared: bool  # the workspace's shared files, not an op
    baseline: bool  # rendered before opgen kept snapshots; the current template became its base
    changes: tuple[FileChange, ...]
    kept: tuple[str, ...] = ()  # files the new template no longer renders, kept because the user edited them


@dataclass(frozen=True)
class UpdateReport:
    """What `opgen update` changed (or, with ``dry_run``, would change)."""

    workspace: Path
    snapshot: str  # the current template's snapshot, every updated folder's new base
    dry_run: bool
    folders: tuple[FolderUpdate, ...]

    @property
    def changes(self) -> list[FileChange]:
        return [change for folder in self.folders for change in folder.changes]

    @property
    def conflicts(self) -> list[str]:
        return [change.path for change in self.changes if change.conflict]


@dataclass
class _Folder:
    """A folder copier renders: where it is, what to copy of it, and its recorded answers."""

    name: str
    root: Path
    prefix: str  # its path inside the workspace, "" for the shared files
    skip: Callable[[Path], bool]
    answers: dict[str, Any] = field(default_factory=dict)

    @property
    def shared(self) -> bool:
        return not self.prefix

    @property
    def what(self) -> str:
        return "the workspace's shared files" if self.shared else f"op '{self.name}'"

    def failure(self, reason: str) -> UpdateFailed:
        """The error for a copier run on this folder that failed for ``reason``."""
        return UpdateFailed(what=self.what, reason=reason)

    def files(self) -> dict[str, Path]:
        """Its files (build products, caches and other folders left out), by posix relative path."""
        found: dict[str, Path] = {}
        for directory, dirnames, filenames in os.walk(self.root):
            here = Path(directory)
            dirnames[:] = sorted(name for name in dirnames if not self.skip(here / name))
            for name in filenames:
                path = here / name
                if not self.skip(path) and (path.is_file() or path.is_symlink()):
                    found[path.relative_to(self.root).as_posix()] = path
        return found


def update_ops(workspace: Workspace, ops: Iterable[str] = (), *, dry_run: bool = False) -> UpdateReport:
    """Re-render ``ops`` (all when none are named) and the workspace's shared files, three-way.

    The shared files always come along: an op's new code may need a new shared header. Returns
    the report; the files are changed unless ``dry_run``. Files left with conflict markers are
    listed in ``report.conflicts``. Raises UnknownOp or NoTemplateHistory (nothing changed) and
    UpdateFailed (nothing changed).
    """
    names = workspace.require_ops(ops)
    folders = [_shared_folder(workspace), *(_op_folder(workspace, name) for name in names)]
    bases = [_recorded_base(folder) for folder in folders]
    if shutil.which("git") is None:
        raise UpdateFailed(
            what="the workspace",
            reason="git is not installed, and copier's three-way update runs on it",
            hint="install git (e.g. apt-get install git); the workspace itself needs no repository",
        )
    with tempfile.TemporaryDirectory(prefix="opgen-update-") as scratch_name, _isolated_git():
        scratch = Path(scratch_name)
        snapshot = copy_template(scratch / "template")
        # Snapshot ids are content hashes: a missing snapshot of the current template is that copy.
        for folder, base in zip(folders, bases, strict=True):
            if base not in (None, snapshot) and not snapshot_dir(workspace.path, base).is_dir():
                raise _missing_snapshot(workspace, folder, base)
        legacy = {
            index: _legacy_baseline(folder, scratch, snapshot)
            for index, (folder, base) in enumerate(zip(folders, bases, strict=True))
            if base is None
        }
        problems = {index: differing for index, (differing, _) in legacy.items() if differing}
        if problems:
            raise _no_history(
                [folders[index] for index in problems], [path for paths in problems.values() for path in paths]
            )
        repos: dict[str, Path] = {}
        updates: list[FolderUpdate] = []
        sources: dict[str, Path] = {}  # updated file (relative to the workspace) -> its new content
        for index, folder in enumerate(folders):
            base = bases[index] or snapshot
            old = scratch / "template" if base == snapshot else snapshot_dir(workspace.path, base)
            if base not in repos:
                repos[base] = _template_repository(scratch / f"repo-{base}", old, scratch / "template")
            work = scratch / "work" / str(index) / folder.name
            missing = legacy[index][1] if index in legacy else {}
            changes, new_files, kept = _update_folder(folder, work, repos[base], old, snapshot, missing)
            updates.append(FolderUpdate(folder.name, folder.shared, index in legacy, changes, kept))
            sources |= {_inside(folder, relative): path for relative, path in new_files.items()}
        report = UpdateReport(workspace.path, snapshot, dry_run, tuple(updates))
        if not dry_run and report.changes:
            try:
                store_snapshot(scratch / "template", workspace.path, snapshot)
                _write_back(workspace.path, report.changes, sources)
            except OSError as error:
                raise UpdateFailed(
                    what="the workspace",
                    reason=f"{error.strerror or error}: {error.filename or workspace.path}",
                    hint="no file of yours was changed; make the workspace writable and run the update again",
                ) from error
    if not dry_run:
        prune_snapshots(workspace)
    return report


def prune_snapshots(workspace: Workspace) -> list[str]:
    """Delete the template snapshots no answers file of the workspace names; return their ids."""
    store = workspace.path / SNAPSHOTS
    if not store.is_dir():
        return []
    folders = [workspace.path, *(workspace.op_dir(name) for name in workspace.ops())]
    named = {str(read_answers(folder).get("_commit", "")) for folder in folders}
    pruned = []
    for entry in sorted(store.iterdir()):
        if entry.is_dir() and _SNAPSHOT_ID.match(entry.name) and entry.name not in named:
            shutil.rmtree(entry)
            pruned.append(entry.name)
    return pruned


def _shared_folder(workspace: Workspace) -> _Folder:
    ops = set(workspace.ops())
    root = workspace.path

    def skip(path: Path) -> bool:
        top = path.relative_to(root).parts[0]
        return top in ops or top in {".opgen", "build"} or _is_product(path)

    return _Folder(workspace.package, root, "", skip, read_answers(root))


def _op_folder(workspace: Workspace, name: str) -> _Folder:
    root = workspace.op_dir(name)
    return _Folder(name, root, name, _is_product, read_answers(root))


def _is_product(path: Path) -> bool:
    return any(path.match(pattern) for pattern in _PRODUCTS)


def _inside(folder: _Folder, relative: str) -> str:
    return f"{folder.prefix}/{relative}" if folder.prefix else relative


def _recorded_base(folder: _Folder) -> str | None:
    """The snapshot ``folder`` was rendered from; None when it predates snapshots (no ``_commit``)."""
    if not folder.answers or "scope" not in folder.answers:
        raise NoTemplateHistory(
            what=folder.what,
            reason=f"{folder.root / ANSWERS_FILE} is missing or unreadable, so opgen does not know how it was rendered",
            hint="restore that file (from version control, or a backup), or leave this op out: name the ops to update",
        )
    recorded_name = folder.answers.get("op_name")
    if not folder.shared and recorded_name != folder.name:
        raise NoTemplateHistory(
            what=folder.what,
            reason=f"its answers say it was rendered as op '{recorded_name}' (a renamed folder)",
            hint=f"rename it back, or render '{folder.name}' afresh with `opgen new {folder.name} --force`",
        )
    base = folder.answers.get("_commit")
    if base is None:
        return None
    return str(base)


def _missing_snapshot(workspace: Workspace, folder: _Folder, base: str) -> NoTemplateHistory:
    redo = "a new workspace" if folder.shared else f"`opgen new {folder.name} --force`"
    return NoTemplateHistory(
        what=folder.what,
        reason=f"the template snapshot it was rendered from ({base}) is missing from {workspace.path / SNAPSHOTS}",
        hint=(
            f"restore {SNAPSHOTS}/{base} from where you keep the workspace (e.g. version control), "
            f"or save your edits and re-render with {redo}"
        ),
    )


def _no_history(folders: list[_Folder], files: list[str]) -> NoTemplateHistory:
    ops = [folder.name for folder in folders if not folder.shared]
    steps = []
    if ops:
        steps.append(f"`opgen new {ops[0]} --force` re-renders an op")
    if any(folder.shared for folder in folders):
        steps.append("deleting a shared file has `opgen update` render it afresh")
    shown = ", ".join(files[:6]) + (f" and {len(files) - 6} more" if len(files) > 6 else "")
    return NoTemplateHistory(
        what=" and ".join(folder.what for folder in folders),
        reason=(
            "rendered before opgen kept template snapshots, so there is no base to merge from, and these files "
            f"differ from what the current template renders: {shown}"
        ),
        hint=(
            "opgen cannot tell your edits there from template changes: save your edits, then "
            + "; ".join(steps)
            + " (later updates keep your edits)"
        ),
    )


@contextmanager
def _isolated_git() -> Iterator[None]:
    """Keep the user's git config out of copier's git calls (plumbum keeps its own environment)."""
    from plumbum import local  # copier's own dependency

    with local.env(**_GIT_ENV):
        for name in _GIT_LOCATION:
            if name in local.env:
                del local.env[name]
        yield


def _git(*args: str, cwd: Path) -> str:
    env = {key: value for key, value in os.environ.items() if key not in _GIT_LOCATION}
    env |= _GIT_ENV | _GIT_IDENTITY
    try:
        result = subprocess.run(
            ["git", "-c", "core.hooksPath=" + os.devnull, "-c", "commit.gpgSign=false", *args],
            cwd=cwd, env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
    except subprocess.CalledProcessError as error:
        raise UpdateFailed(what="the workspace", reason=f"git {args[0]} failed: {error.stderr.strip()}") from error
    return result.stdout


def _commit_all(repo: Path, message: str) -> None:
    _git("add", "--all", "--force", ".", cwd=repo)
    _git("commit", "--quiet", "--allow-empty", "--no-verify", "-m", message, cwd=repo)


def _template_repository(repo: Path, base: Path, current: Path) -> Path:
    """A git repository of the template: ``base`` tagged ``1``, then ``current`` tagged ``2``."""
    repo.mkdir(parents=True)
    _git("init", "--quiet", cwd=repo)
    for tag, source in (("1", base), ("2", current)):
        for entry in repo.iterdir():
            if entry.name != ".git":
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        shutil.copytree(source, repo, dirs_exist_ok=True)
        _commit_all(repo, f"opgen template {source.name}")
        _git("tag", tag, cwd=repo)
    # One pack instead of hundreds of loose objects: copier clones this repository several times
    # per folder, and creating and deleting those files is most of an update's time.
    _git("repack", "-a", "-d", "-q", cwd=repo)
    return repo


def _legacy_baseline(folder: _Folder, scratch: Path, snapshot: str) -> tuple[list[str], dict[str, Path]]:
    """For a folder without a base: its files that differ from a fresh render, and those it lacks.

    The fresh render uses the folder's recorded answers (its opgen version included), so a folder
    nobody edited renders identically.
    """
    present = folder.files()
    differing, missing = [], {}
    for relative, path in _render(folder, scratch / "template", scratch / "fresh" / folder.name, snapshot).items():
        if relative == ANSWERS_FILE:
            continue
        if relative not in present:
            missing[relative] = path
        elif present[relative].read_bytes() != path.read_bytes():
            differing.append(_inside(folder, relative))
    return differing, missing


def _render(folder: _Folder, template: Path, destination: Path, snapshot: str) -> dict[str, Path]:
    """``folder`` rendered afresh from ``template`` with its recorded answers: its files by relative path."""
    answers = {key: value for key, value in folder.answers.items() if not str(key).startswith("_")}
    run_copier(
        "run_copy", str(template), str(destination),
        data={**answers, "opgen_snapshot": snapshot}, failure=folder.failure,
    )  # fmt: skip
    return _Folder(folder.name, destination, "", _is_product).files()


def _update_folder(
    folder: _Folder, work: Path, repo: Path, base: Path, snapshot: str, missing: dict[str, Path]
) -> tuple[tuple[FileChange, ...], dict[str, Path], tuple[str, ...]]:
    """Run copier's update on a scratch copy of ``folder``.

    Returns its changes, the changed files, and the files kept although the new template no
    longer renders them: copier deletes those even when edited, opgen keeps the edited ones.
    """
    before = folder.files()
    work.mkdir(parents=True)
    for relative, path in {**before, **missing}.items():
        (work / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, work / relative, follow_symlinks=False)
    answers = {**folder.answers, "_src_path": str(repo), "_commit": "1"}
    (work / ANSWERS_FILE).write_text(yaml.safe_dump(answers, sort_keys=False))
    _git("init", "--quiet", cwd=work)
    _commit_all(work, "the folder before the update")
    run_copier(
        "run_update", str(work),
        data={"opgen_version": __version__, "opgen_snapshot": snapshot},
        conflict="inline", vcs_ref="2", failure=folder.failure,
    )  # fmt: skip
    after = _Folder(folder.name, work, "", lambda path: path.name == ".git" or _is_product(path)).files()
    kept = []
    dropped = sorted(before.keys() - after.keys())
    if dropped:
        rendered = _render(folder, base, work.parent / "base", snapshot)
        for relative in dropped:
            if relative not in rendered or rendered[relative].read_bytes() != before[relative].read_bytes():
                after[relative] = before[relative]  # the user's version: kept as it is
                kept.append(_inside(folder, relative))
    changes, changed = [], {}
    for relative in sorted(before.keys() | after.keys()):
        old = before[relative].read_bytes() if relative in before else None
        new = after[relative].read_bytes() if relative in after else None
        if old == new and (new is None or before[relative].stat().st_mode == after[relative].stat().st_mode):
            continue
        status: ChangeStatus = "added" if old is None else "deleted" if new is None else "modified"
        added, removed = _line_counts(old or b"", new or b"")
        conflict = new is not None and _conflicts(new) > _conflicts(old or b"")
        changes.append(FileChange(_inside(folder, relative), status, added, removed, conflict))
        if new is not None:
            changed[relative] = after[relative]
    return tuple(changes), changed, tuple(kept)


def _conflicts(content: bytes) -> int:
    """How many conflict blocks copier's markers open in ``content``."""
    return sum(line.rstrip() == CONFLICT_START for line in content.splitlines())


def _line_counts(old: bytes, new: bytes) -> tuple[int, int]:
    """Lines added and removed from ``old`` to ``new`` (0, 0 for binary files)."""
    try:
        old_lines, new_lines = old.decode().splitlines(), new.decode().splitlines()
    except UnicodeDecodeError:
        return 0, 0
    added = removed = 0
    for line in difflib.unified_diff(old_lines, new_lines, lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def _write_back(root: Path, changes: list[FileChange], sources: dict[str, Path]) -> None:
    """Put the updated files in place: each written beside its target first, then all renamed."""
    staged: list[tuple[Path, Path]] = []
    try:
        for change in changes:
            if change.status == "deleted":
                continue
            target = root / change.path
            target.parent.mkdir(parents=True, exist_ok=True)
            temporary = target.with_name(f".{target.name}.opgen-update")
            shutil.copyfile(sources[change.path], temporary, follow_symlinks=False)
            shutil.copymode(sources[change.path], temporary)
            staged.append((temporary, target))
    except BaseException:
        for temporary, _ in staged:
            temporary.unlink(missing_ok=True)
        raise
    for temporary, target in staged:
        os.replace(temporary, target)
    for change in changes:
        if change.status == "deleted":
            (root / change.path).unlink(missing_ok=True)

"""`opgen update`: re-render ops and the workspace's shared files from the current template.

The update is copier's: three-way, from what a folder was rendered as (its base) to what the
current template renders, so the user's edits are kept, the template's changes applied, and an
edit that collides with a change is left between conflict markers. copier wants two things
opgen's users do not have: the template as a git repository holding the base as a commit, and the
folder inside a clean git repository. opgen builds both in a scratch folder for each update:

- both sides are rendered by opgen. The base: the template snapshot the folder's answers name as
  ``_commit`` (kept in the workspace, ``.opgen/templates/<id>/``, written by every render:
  opgen.render) with the answers the folder was rendered with. The new side: the current template
  with those answers through migrate_answers (which drops what it no longer uses, such as a
  formula op's printed code: the workspaces of earlier releases update). The scratch template
  repository holds each folder's two renders as "templates" that copy those files as they are
  (tags ``1.<n>`` and ``2.<n>``), so copier merges them and renders nothing itself. A folder whose
  two renders are the same files (the template's change is elsewhere) has nothing to merge: it
  keeps its files and gets its new answers file without copier; one that holds its base render
  untouched (the user edited none of its files) gets the current render, the merge's result,
  without copier too;
- the folder's files are copied into a scratch git repository, updated there, and only the
  files that changed are copied back, after every folder has been updated, each written beside
  its place first and renamed over it. A failure before that point changes nothing.

Two departures from copier, both for edits the current template has no place for: a file the
template no longer renders is deleted only if the user never edited it, and a conflict in a file
the template rewrote (a new layout: it keeps less than half the lines it rendered before) is no
merge to resolve but an edit to redo. Either stops the whole update before anything is written,
and the error names each file with the user's edit (UpdateCannotCarryOver).

A folder rendered before opgen kept snapshots (answers without ``_commit``) has no base. When its
files are exactly what the current template renders from its answers, the current template
becomes its base; otherwise opgen cannot tell the user's edits from template changes and says so.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from opgen import __version__
from opgen.errors import NoTemplateHistory, UpdateCannotCarryOver, UpdateFailed
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
# The templates of the scratch template repository: a render's files under files/, copied as they
# are (no file ends in the suffix, so copier renders none of them), whatever answers copier hands it.
_VERBATIM_TEMPLATE_CONFIG = "_subdirectory: files\n_templates_suffix: .opgen-verbatim\n_answers_file: .copier-answers.yml\n"
# A conflict in a file whose new render keeps less than this share of the lines its base had is a
# rewrite, not a collision: its conflict block would hold most of the old file against most of the
# new one (relu's 378-line test file became 38 lines), which is an edit to redo, not to merge.
_REWRITTEN_BELOW = 0.5
# Answers opgen once recorded that the template now derives, by the answer that holds them. Before
# issue 20 a formula op's answers held the code opgen printed from the formula (the functor bodies,
# the PyTorch reference and gradients, the formula as parsed); the template prints it from the
# formula itself (formula, formula_inputs, formula_params), with whatever the current opgen prints.
_PRINTED_FORMULA_CODE = (
    "formula_display",
    "formula_forward_cpp",
    "formula_backward_cpp",
    "formula_reference_py",
    "formula_gradients_py",
)

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
    listed in ``report.conflicts``. Raises UnknownOp or NoTemplateHistory (nothing changed),
    UpdateCannotCarryOver (edits the current template has no place for; nothing changed, dry run
    or not) and UpdateFailed (nothing changed).
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
        current = scratch / "template"
        snapshot = copy_template(current)
        # Snapshot ids are content hashes: a missing snapshot of the current template is that copy.
        for folder, base in zip(folders, bases, strict=True):
            if base not in (None, snapshot) and not snapshot_dir(workspace.path, base).is_dir():
                raise _missing_snapshot(workspace, folder, base)
        needed = _needs_of_snapshot(current, snapshot)
        targets = [migrate_answers(folder.answers, needed) for folder in folders]
        render = _Renders(scratch / "render")
        # Each folder's base: what its recorded template and answers render. One rendered before
        # snapshots has none recorded; the current template's render stands in if the folder matches it.
        base_files = [
            render(
                current if base in (None, snapshot) else snapshot_dir(workspace.path, base),
                target if base is None else folder.answers,
                folder.failure,
                opgen_snapshot=base or snapshot,
            )
            for folder, base, target in zip(folders, bases, targets, strict=True)
        ]
        legacy = {
            index: _legacy_baseline(folder, base_files[index])
            for index, (folder, base) in enumerate(zip(folders, bases, strict=True))
            if base is None
        }
        problems = {index: differing for index, (differing, _) in legacy.items() if differing}
        if problems:
            raise _no_history(
                [folders[index] for index in problems], [path for paths in problems.values() for path in paths]
            )
        # What the current template renders for each folder (the same render as its base when the
        # snapshot and answers are the base's). Where that is the base's render, the update has
        # nothing to merge: the folder keeps its files and gets the new answers file. Where the
        # folder holds its base's render untouched (no file of either render edited, added or
        # deleted by the user), the merge is the current render. Either is what copier's update
        # would give, without its three renders and git runs.
        current_files = [
            render(current, target, folder.failure, opgen_version=__version__, opgen_snapshot=snapshot)
            for folder, target in zip(folders, targets, strict=True)
        ]
        befores = [folder.files() for folder in folders]
        same = [_same_render(base, now) for base, now in zip(base_files, current_files, strict=True)]
        unedited = [
            not same[index] and _unedited(befores[index], base_files[index], current_files[index])
            for index in range(len(folders))
        ]
        to_merge = [index for index in range(len(folders)) if not same[index] and not unedited[index]]
        # One repository for the folders to merge: each one's base tagged 1.<its index>, and its
        # current render 2.<its index>, both as templates that copy those files as they are.
        repo = (
            _template_repository(
                scratch / "repo",
                {
                    f"{side}.{index}": _verbatim_template(
                        files[index], scratch / "verbatim" / f"{side}.{index}", with_answers=side == 2
                    )
                    for side, files in ((1, base_files), (2, current_files))
                    for index in to_merge
                },
            )
            if to_merge
            else None
        )
        updates: list[FolderUpdate] = []
        sources: dict[str, Path] = {}  # updated file (relative to the workspace) -> its new content
        stranded: dict[str, tuple[str, str]] = {}  # edits that cannot carry over: path -> (why, the edit)
        for index, folder in enumerate(folders):
            before = befores[index]
            missing = legacy[index][1] if index in legacy else {}
            if repo is not None and index in to_merge:
                work = scratch / "work" / str(index) / folder.name
                after = _copier_update(folder, before, missing, work, repo, index, targets[index])
            elif unedited[index]:
                after = {name: path for name, path in before.items() if name not in base_files[index]} | current_files[index]
            else:
                after = {**before, **missing, ANSWERS_FILE: current_files[index][ANSWERS_FILE]}
            outcome = _outcome(folder, before, after, base_files[index], current_files[index])
            updates.append(FolderUpdate(folder.name, folder.shared, index in legacy, outcome.changes))
            sources |= {_inside(folder, relative): path for relative, path in outcome.changed.items()}
            stranded |= outcome.stranded
        if stranded:
            raise UpdateCannotCarryOver(
                files={path: why for path, (why, _) in stranded.items()},
                edits={path: edit for path, (_, edit) in stranded.items()},
            )
        report = UpdateReport(workspace.path, snapshot, dry_run, tuple(updates))
        if not dry_run and report.changes:
            try:
                store_snapshot(current, workspace.path, snapshot)
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


def migrate_answers(answers: Mapping[str, Any], needed: Collection[str]) -> dict[str, Any]:
    """The answers the current template renders a folder with, from those it was rendered with.

    Keyed by what the answers hold, not by a version: answers that hold a formula op's printed
    code (``formula_forward_cpp`` and its kind) lose each such key the current template does not
    use (``needed``: template_needs), and keep the formula itself (``formula``,
    ``formula_inputs``, ``formula_params``). Other answers pass unchanged, and so does every key
    the template still uses: a template that reads the printed code gets it. An op's answers
    without a ``spec`` (rendered before every op had one) get the spec its recipe gives it
    (opgen.render.recipe_spec), when the template reads one.
    """
    migrated = dict(answers)
    if any(key in migrated for key in _PRINTED_FORMULA_CODE):
        for key in _PRINTED_FORMULA_CODE:
            if key not in needed:
                migrated.pop(key, None)
    if migrated.get("scope") == "op" and not migrated.get("spec") and "spec" in needed:
        from opgen.recipes import recipe_named
        from opgen.render import recipe_spec

        migrated["spec"] = recipe_spec(migrated["op_name"], recipe_named(migrated["recipe"]), migrated).to_answers()
    return migrated


def template_needs(template: Path) -> frozenset[str]:
    """The answers ``template`` can use: its questions, and every variable its Jinja files read."""
    import jinja2  # copier's own dependency
    from jinja2 import meta

    config = yaml.safe_load((template / "copier.yml").read_text()) or {}
    needed = {str(key) for key in config if not str(key).startswith("_")}
    environment = jinja2.Environment()
    # Parsing only: every filter and test name passes (the template's come from copier and opgen).
    environment.filters = _AnyName(environment.filters)
    environment.tests = _AnyName(environment.tests)
    for path in sorted(template.rglob("*.jinja")):
        text = path.read_text(errors="replace")
        try:
            needed |= meta.find_undeclared_variables(environment.parse(text))
        except jinja2.TemplateError:
            needed |= set(re.findall(r"[A-Za-z_]\w*", text))  # unparsable here: every name it mentions
    return frozenset(needed)


_NEEDS: dict[str, frozenset[str]] = {}


def _needs_of_snapshot(template: Path, snapshot: str) -> frozenset[str]:
    """template_needs of ``template``, whose snapshot id (a hash of its files) is ``snapshot``.

    Parsed once per process: parsing every Jinja file takes about half a second.
    """
    if snapshot not in _NEEDS:
        _NEEDS[snapshot] = template_needs(template)
    return _NEEDS[snapshot]


class _AnyName(dict):  # type: ignore[type-arg]
    """Jinja filters or tests where any name is one (for parsing templates, never for rendering)."""

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(key, _same)


def _same(value: Any, *args: Any, **kwargs: Any) -> Any:
    return value


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


def _template_repository(repo: Path, templates: Mapping[str, Path]) -> Path:
    """A git repository holding each of ``templates`` as a commit of its own, tagged with its key.

    The commits have no parents, so each tag is the only one its commit reaches: copier reads a
    template's version from the tags it reaches, and refuses an update to a lower version. The last
    template is checked out, as in any repository.
    """
    repo.mkdir(parents=True)
    _git("init", "--quiet", cwd=repo)
    git_dir = str(repo / ".git")
    commit = ""
    for tag, source in templates.items():
        _git("--git-dir", git_dir, "read-tree", "--empty", cwd=source)
        _git("--git-dir", git_dir, "--work-tree", str(source), "add", "--all", "--force", ".", cwd=source)
        tree = _git("--git-dir", git_dir, "write-tree", cwd=source).strip()
        commit = _git("--git-dir", git_dir, "commit-tree", tree, "-m", f"opgen template {tag}", cwd=source).strip()
        _git("tag", tag, commit, cwd=repo)
    _git("reset", "--quiet", "--hard", commit, cwd=repo)
    # One pack instead of hundreds of loose objects: copier clones this repository several times
    # per folder, and creating and deleting those files is most of an update's time.
    _git("repack", "-a", "-d", "-q", cwd=repo)
    return repo


def _verbatim_template(files: Mapping[str, Path], destination: Path, *, with_answers: bool) -> Path:
    """A copier template that renders ``files`` as they are, whatever the answers: a render of opgen's.

    The answers file only ``with_answers``: copier leaves it out of its merge, so the new render's
    is the record, and the base's plays no part.
    """
    for relative, path in files.items():
        if relative == ANSWERS_FILE and not with_answers:
            continue
        target = destination / "files" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target, follow_symlinks=False)
    (destination / "files").mkdir(parents=True, exist_ok=True)
    (destination / "copier.yml").write_text(_VERBATIM_TEMPLATE_CONFIG)
    return destination


def _legacy_baseline(folder: _Folder, rendered: Mapping[str, Path]) -> tuple[list[str], dict[str, Path]]:
    """For a folder without a base: its files that differ from a fresh render, and those it lacks.

    The fresh render (``rendered``) uses the folder's recorded answers (migrated; its opgen
    version included), so a folder nobody edited renders identically.
    """
    present = folder.files()
    differing, missing = [], {}
    for relative, path in rendered.items():
        if relative == ANSWERS_FILE:
            continue
        if relative not in present:
            missing[relative] = path
        elif present[relative].read_bytes() != path.read_bytes():
            differing.append(_inside(folder, relative))
    return differing, missing


class _Renders:
    """Renders of templates into scratch folders, each template and answers rendered once per update."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.made: dict[str, dict[str, Path]] = {}

    def __call__(
        self, template: Path, answers: Mapping[str, Any], failure: Callable[[str], UpdateFailed], **data: Any
    ) -> dict[str, Path]:
        """``template`` rendered with ``answers`` (and ``data``): its files by relative path."""
        rendered = {key: value for key, value in answers.items() if not str(key).startswith("_")} | data
        key = json.dumps([str(template), rendered], sort_keys=True, default=str)
        if key not in self.made:
            destination = self.scratch / str(len(self.made))
            run_copier("run_copy", str(template), str(destination), data=rendered, failure=failure)
            self.made[key] = _Folder(destination.name, destination, "", _is_product).files()
        return self.made[key]


@dataclass(frozen=True)
class _Outcome:
    """One folder's update: its changes, the changed files' new content, and the edits that cannot carry over."""

    changes: tuple[FileChange, ...]
    changed: dict[str, Path]  # relative to the folder
    stranded: dict[str, tuple[str, str]]  # relative to the workspace: (why, the user's edit as a diff)


def _copier_update(
    folder: _Folder,
    before: Mapping[str, Path],
    missing: Mapping[str, Path],
    work: Path,
    repo: Path,
    index: int,
    answers: Mapping[str, Any],
) -> dict[str, Path]:
    """Run copier's update on a scratch copy of ``folder`` (``before``, plus ``missing``) in ``work``.

    From its base (tag ``1.<index>`` in ``repo``) to its current render (tag ``2.<index>``), which
    the current template made with ``answers`` (migrate_answers): copier's three-way merge of the
    two. Returns the updated copy's files.
    """
    work.mkdir(parents=True)
    for relative, path in {**before, **missing}.items():
        (work / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, work / relative, follow_symlinks=False)
    recorded = {**answers, "_src_path": str(repo), "_commit": f"1.{index}"}
    (work / ANSWERS_FILE).write_text(yaml.safe_dump(recorded, sort_keys=False))
    _git("init", "--quiet", cwd=work)
    _commit_all(work, "the folder before the update")
    run_copier("run_update", str(work), conflict="inline", vcs_ref=f"2.{index}", failure=folder.failure)
    return _Folder(folder.name, work, "", lambda path: path.name == ".git" or _is_product(path)).files()


def _outcome(
    folder: _Folder,
    before: Mapping[str, Path],
    after: Mapping[str, Path],
    base: Mapping[str, Path],
    current: Mapping[str, Path],
) -> _Outcome:
    """What updating ``folder`` from ``before`` to ``after`` changes, its ``base`` and ``current`` render known.

    Edits the current template has no place for are returned as ``stranded``: an edited file it no
    longer renders (copier deletes those even when edited), or a conflict in a file it rewrote
    (``current`` keeps less than half the lines of ``base``).
    """
    stranded: dict[str, tuple[str, str]] = {}
    for relative in sorted(before.keys() - after.keys()):
        if relative not in base or base[relative].read_bytes() != before[relative].read_bytes():
            why = "the current template no longer renders this file, and you had edited it"
            stranded[_inside(folder, relative)] = (
                why,
                _edit(base.get(relative), before[relative], _inside(folder, relative)),
            )
    changes, changed = [], {}
    for relative in sorted(before.keys() | after.keys()):
        old = before[relative].read_bytes() if relative in before else None
        new = after[relative].read_bytes() if relative in after else None
        if old == new and (new is None or _executable(before[relative]) == _executable(after[relative])):
            continue
        status: ChangeStatus = "added" if old is None else "deleted" if new is None else "modified"
        added, removed = _line_counts(old or b"", new or b"")
        conflict = new is not None and _conflicts(new) > _conflicts(old or b"")
        if conflict and relative in base and relative in before:
            kept, lines = _kept_lines(
                base[relative].read_bytes(), current[relative].read_bytes() if relative in current else b""
            )
            if kept < _REWRITTEN_BELOW * lines:
                why = (
                    f"the current template rewrote this file (it keeps {kept} of the {lines} lines opgen rendered) "
                    "and your edit collides with the new version"
                )
                stranded[_inside(folder, relative)] = (
                    why,
                    _edit(base[relative], before[relative], _inside(folder, relative)),
                )
        changes.append(FileChange(_inside(folder, relative), status, added, removed, conflict))
        if new is not None:
            changed[relative] = after[relative]
    return _Outcome(tuple(changes), changed, stranded)


def _same_render(base: Mapping[str, Path], current: Mapping[str, Path]) -> bool:
    """Whether two renders hold the same files (names, bytes, executable bits), answers files aside."""
    names = (base.keys() | current.keys()) - {ANSWERS_FILE}
    return all(name in base and name in current and _same_file(base[name], current[name]) for name in names)


def _unedited(files: Mapping[str, Path], base: Mapping[str, Path], current: Mapping[str, Path]) -> bool:
    """Whether a folder's ``files`` hold its ``base`` render as rendered, and nothing where ``current`` renders a file.

    Every file of the base is there with its bytes and executable bit, and no file the current
    render adds was made by the user: a three-way merge of such a folder is the current render
    (the answers files aside: the current render's is the record).
    """
    rendered = base.keys() - {ANSWERS_FILE}
    return all(name in files and _same_file(files[name], base[name]) for name in rendered) and not any(
        name in files for name in current.keys() - base.keys() - {ANSWERS_FILE}
    )


def _same_file(a: Path, b: Path) -> bool:
    """The same bytes and executable bit: what makes two files one to git, and so to copier's merge."""
    return a.read_bytes() == b.read_bytes() and _executable(a) == _executable(b)


def _executable(path: Path) -> bool:
    """Whether ``path`` is executable: the one permission git, and so copier's merge, keeps."""
    return bool(path.lstat().st_mode & stat.S_IXUSR)


def _kept_lines(base: bytes, new: bytes) -> tuple[int, int]:
    """How many of ``base``'s lines ``new`` keeps (in order), and how many ``base`` has."""
    old_lines, new_lines = base.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()), len(old_lines)


def _edit(base: Path | None, yours: Path, path: str) -> str:
    """The user's edit of ``path``: a unified diff from what opgen rendered to the user's version."""
    try:
        old = base.read_text().splitlines(keepends=True) if base is not None else []
        new = yours.read_text().splitlines(keepends=True)
    except UnicodeDecodeError:
        return ""
    diff = difflib.unified_diff(old, new, f"{path} (as opgen rendered it)", f"{path} (yours)")
    return "".join(line if line.endswith("\n") else line + "\n" for line in diff)


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
            source = sources[change.path]
            shutil.copyfile(source, temporary, follow_symlinks=False)
            # A modified file keeps its permissions (the merge knows only the executable bit).
            keep = change.status == "modified" and _executable(target) == _executable(source)
            shutil.copymode(target if keep else source, temporary)
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

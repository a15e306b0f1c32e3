from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import venv
from collections.abc import Callable, Iterable
from pathlib import Path

import copier
import pytest
import yaml
from typer.testing import CliRunner

from opgen.cli import app
from opgen.errors import NoTemplateHistory, UpdateCannotCarryOver, UpdateFailed
from opgen.render import SNAPSHOTS, TEMPLATE_ENV, new_op, snapshot_id, template_dir
from opgen.update import migrate_answers, template_needs, update_ops
from opgen.workspace import ANSWERS_FILE, Workspace, read_answers

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()
pytestmark = pytest.mark.heavy  # most tests here render twice and merge

KERNEL = "softmax/csrc/softmax_cuda.cu"
TESTS = "softmax/test_softmax.py"
TEMPLATE_KERNEL = "ops/softmax/csrc/softmax_cuda.cu.jinja"
TEMPLATE_TESTS = "ops/softmax/test_{{op_name}}.py.jinja"
SHARED_HEADER = "include/opgen/checks.h"  # a shared file: updated the same way
# What the "new template" adds, and what the user changes: far apart, so they merge cleanly.
TEMPLATE_COMMENT = "// The new template's comment."
TEMPLATE_TEST = (
    "\n\ndef test_rows_sum_to_one_added_by_the_new_template() -> None:\n"
    "    x = torch.randn(4, 7, dtype=torch.float64)\n"
    "    torch.testing.assert_close({{ op_name }}(x).sum(-1), torch.ones(4, dtype=torch.float64))\n"
)
USER_KERNEL_EDIT = "  // my kernel edit"
USER_TEST_EDIT = "import pytest  # my test edit\n"
# A line both sides change: the update must leave it between conflict markers.
CONTESTED = "#include <ATen/Dispatch.h>\n"


@pytest.fixture(autouse=True)
def _current_template(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TEMPLATE_ENV, raising=False)


def new_template(source: Path, destination: Path, *, contested: bool = False) -> Path:
    """A copy of the template at ``source`` with a new kernel comment and a new test (or a contested line)."""
    shutil.copytree(source, destination)
    kernel = destination / TEMPLATE_KERNEL
    if contested:
        assert CONTESTED in kernel.read_text()
        kernel.write_text(kernel.read_text().replace(CONTESTED, CONTESTED.rstrip("\n") + "  // the template's\n", 1))
        return destination
    lines = kernel.read_text().splitlines(keepends=True)
    kernel.write_text("".join([lines[0], TEMPLATE_COMMENT + "\n", *lines[1:]]))
    tests = destination / TEMPLATE_TESTS
    tests.write_text(tests.read_text() + TEMPLATE_TEST)
    header = destination / "workspace" / SHARED_HEADER
    lines = header.read_text().splitlines(keepends=True)
    header.write_text("".join([lines[0], TEMPLATE_COMMENT + "\n", *lines[1:]]))
    return destination


def edit_as_user(ws: Path, *, contested: bool = False) -> None:
    kernel = ws / KERNEL
    if contested:
        kernel.write_text(kernel.read_text().replace(CONTESTED, CONTESTED.rstrip("\n") + "  // mine\n", 1))
        return
    kernel.write_text(kernel.read_text().rstrip("\n") + USER_KERNEL_EDIT + "\n")
    tests = ws / TESTS
    assert "import pytest\n" in tests.read_text()
    tests.write_text(tests.read_text().replace("import pytest\n", USER_TEST_EDIT, 1))
    setup = ws / "setup.py"
    setup.write_text(setup.read_text() + "# my setup.py note\n")


def assert_merged(ws: Path) -> None:
    kernel, tests = (ws / KERNEL).read_text(), (ws / TESTS).read_text()
    assert TEMPLATE_COMMENT in kernel.splitlines()  # the template's change
    assert kernel.rstrip("\n").endswith(USER_KERNEL_EDIT)  # the user's edit
    assert USER_TEST_EDIT in tests
    assert "def test_rows_sum_to_one_added_by_the_new_template" in tests
    assert "<<<<<<<" not in kernel + tests
    assert TEMPLATE_COMMENT in (ws / SHARED_HEADER).read_text().splitlines()
    assert (ws / "setup.py").read_text().endswith("# my setup.py note\n")


def tree_state(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        path.relative_to(root).as_posix(): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_update_keeps_user_edits_and_applies_template_changes(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rendered: Callable[..., Workspace]
) -> None:
    rendered(workspace.path, "softmax", "relu")
    old_snapshot = read_answers(workspace.path / "softmax")["_commit"]
    assert (workspace.path / SNAPSHOTS / str(old_snapshot) / "copier.yml").is_file()
    edit_as_user(workspace.path)
    (workspace.path / "softmax" / "notes.md").write_text("my own file\n")
    relu_before = tree_state(workspace.path / "relu")
    monkeypatch.setenv(TEMPLATE_ENV, str(new_template(template_dir(), tmp_path / "template_v2")))

    # --dry-run lists the changes and writes nothing.
    before = tree_state(workspace.path)
    result = runner.invoke(app, ["update", "softmax", "--dry-run", "-w", str(workspace.path)])
    assert result.exit_code == 0, result.output
    for path in (KERNEL, TESTS, SHARED_HEADER):
        assert f"M {path}" in result.stdout
    assert "would change" in result.stdout and "nothing written" in result.stdout
    assert tree_state(workspace.path) == before

    report = update_ops(workspace, ["softmax"])

    assert_merged(workspace.path)
    assert (workspace.path / "softmax" / "notes.md").read_text() == "my own file\n"
    assert tree_state(workspace.path / "relu") == relu_before  # not named: untouched
    assert report.conflicts == []
    changed = {change.path for change in report.changes}
    assert {KERNEL, TESTS, SHARED_HEADER, "softmax/.copier-answers.yml", ".copier-answers.yml"} <= changed
    assert "setup.py" not in changed  # the user's edit there, and no template change
    # The softmax folder and the shared files now merge from the new template's snapshot; relu
    # still names the old one, so both are kept, and nothing else.
    new_snapshot = snapshot_id(tmp_path / "template_v2")
    assert report.snapshot == new_snapshot
    assert read_answers(workspace.path / "softmax")["_commit"] == new_snapshot
    assert read_answers(workspace.path)["_commit"] == new_snapshot
    assert read_answers(workspace.path / "relu")["_commit"] == old_snapshot
    assert sorted(p.name for p in (workspace.path / SNAPSHOTS).iterdir()) == sorted([new_snapshot, old_snapshot])
    # Once more: nothing left to do, nothing written.
    state = tree_state(workspace.path)
    assert update_ops(workspace, ["softmax"]).changes == []
    assert tree_state(workspace.path) == state
    # Updating relu too (the new template renders it as before: no merge) keeps the user's edit
    # there, records the new snapshot, and leaves the old one unused: it is deleted.
    math = workspace.path / "relu" / "csrc" / "relu_math.h"
    math.write_text(math.read_text() + "// my relu note\n")
    report = update_ops(workspace)
    assert {change.path for change in report.changes} == {"relu/.copier-answers.yml"}
    assert math.read_text().endswith("// my relu note\n")
    assert read_answers(workspace.path / "relu")["_commit"] == new_snapshot
    assert [p.name for p in (workspace.path / SNAPSHOTS).iterdir()] == [new_snapshot]


def test_only_a_folder_holding_its_render_untouched_takes_the_new_render_unmerged(tmp_path: Path) -> None:
    from opgen.update import _unedited

    base, current, mine = tmp_path / "base", tmp_path / "current", tmp_path / "mine"
    for folder, files in ((base, {"a.py": "a\n", "b.h": "b\n"}), (current, {"a.py": "a2\n", "b.h": "b\n", "new.h": "n\n"})):
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
    shutil.copytree(base, mine)
    (mine / "notes.md").write_text("my own file\n")

    def unedited() -> bool:
        files = {path.name: path for path in mine.iterdir()}
        return _unedited(files, {p.name: p for p in base.iterdir()}, {p.name: p for p in current.iterdir()})

    assert unedited()  # the render as it was, and a file of the user's that neither render has
    (mine / "a.py").write_text("a, edited\n")
    assert not unedited()
    (mine / "a.py").write_text("a\n")
    (mine / "b.h").chmod(0o755)  # the executable bit: the one mode a merge carries
    assert not unedited()
    (mine / "b.h").chmod(0o644)
    (mine / "b.h").unlink()  # a rendered file deleted
    assert not unedited()
    (mine / "b.h").write_text("b\n")
    (mine / "new.h").write_text("mine\n")  # where the current template adds a file: the user's would be replaced
    assert not unedited()
    (mine / "new.h").unlink()
    assert unedited()


def test_a_colliding_edit_is_left_as_conflict_markers_listed_and_exits_1(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rendered: Callable[..., Workspace]
) -> None:
    rendered(workspace.path, "softmax")
    edit_as_user(workspace.path, contested=True)
    monkeypatch.setenv(TEMPLATE_ENV, str(new_template(template_dir(), tmp_path / "template_v2", contested=True)))

    result = runner.invoke(app, ["update", "softmax", "--workspace", str(workspace.path)])

    assert result.exit_code == 1, result.output
    assert f"M {KERNEL}" in result.stdout and "conflict" in result.stdout
    assert "hold conflicts" in result.stderr and KERNEL in result.stderr
    kernel = (workspace.path / KERNEL).read_text()
    mine, theirs = CONTESTED.rstrip("\n") + "  // mine", CONTESTED.rstrip("\n") + "  // the template's"
    assert f"<<<<<<< before updating\n{mine}\n=======\n{theirs}\n>>>>>>> after updating\n" in kernel
    assert not list(workspace.path.rglob("*.rej"))


def test_a_file_the_template_drops_is_deleted_and_an_edited_one_stops_the_update(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rendered: Callable[..., Workspace]
) -> None:
    rendered(workspace.path, "softmax")
    bench = workspace.path / "softmax" / "bench_softmax.py"
    bench.write_text(bench.read_text() + "# my tuning notes\n")
    template = tmp_path / "template_v2"
    shutil.copytree(template_dir(), template)
    (template / "ops/softmax/bench_{{op_name}}.py.jinja").unlink()
    (template / "ops/softmax/reference.py.jinja").unlink()
    monkeypatch.setenv(TEMPLATE_ENV, str(template))
    before = tree_state(workspace.path)

    # The edited file has no place in the new template: listed with the edit, exit 1, nothing written.
    result = runner.invoke(app, ["update", "softmax", "-w", str(workspace.path)])

    assert result.exit_code == 1, result.output
    assert "cannot carry over softmax/bench_softmax.py: the current template no longer renders" in result.stdout
    assert "+# my tuning notes" in result.stdout
    assert "nothing was changed" in result.stderr and "delete the file" in result.stderr
    assert tree_state(workspace.path) == before

    # Done as the hint says (the notes moved elsewhere, the file deleted), the update goes through.
    bench.unlink()
    result = runner.invoke(app, ["update", "softmax", "-w", str(workspace.path)])

    assert result.exit_code == 0, result.output
    assert "D softmax/reference.py" in result.stdout and "bench_softmax" not in result.stdout
    assert not (workspace.path / "softmax" / "reference.py").exists() and not bench.exists()


def test_an_unknown_op_exits_2_and_touches_nothing(workspace: Workspace, rendered: Callable[..., Workspace]) -> None:
    rendered(workspace.path, "softmax")
    before = tree_state(workspace.path)
    result = runner.invoke(app, ["update", "softmax", "nope", "-w", str(workspace.path)])
    assert result.exit_code == 2
    assert "no op named 'nope'" in result.stderr and "softmax" in result.stderr
    assert tree_state(workspace.path) == before


def test_a_failure_midway_changes_nothing(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rendered: Callable[..., Workspace]
) -> None:
    rendered(workspace.path, "softmax")
    edit_as_user(workspace.path)
    monkeypatch.setenv(TEMPLATE_ENV, str(new_template(template_dir(), tmp_path / "template_v2")))
    before = tree_state(workspace.path)
    real_update, calls = copier.run_update, []

    def update_then_fail(*args: object, **kwargs: object) -> object:
        calls.append(args)
        if len(calls) == 2:  # the shared files went through; softmax fails
            raise OSError("disk full")
        return real_update(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(copier, "run_update", update_then_fail)
    with pytest.raises(UpdateFailed, match=r"op 'softmax'.*disk full"):
        update_ops(workspace)
    assert tree_state(workspace.path) == before


def test_an_unchanged_template_changes_nothing_even_for_a_formula_op(
    workspace: Workspace, rendered: Callable[..., Workspace]
) -> None:
    rendered(
        workspace.path,
        ("mish", {"formula": "x*tanh(log(1+exp(x)))"}),
        ("scaled", {"formula": "max(x, 0)*alpha", "params": ["alpha=1.5"]}),
    )
    before = tree_state(workspace.path)
    report = update_ops(workspace)
    assert [folder.name for folder in report.folders] == [workspace.package, "mish", "scaled"]
    assert report.changes == []
    assert tree_state(workspace.path) == before


def legacy(workspace: Workspace) -> None:
    """Make the workspace look rendered by opgen before it kept template snapshots."""
    for folder in [workspace.path, *(workspace.op_dir(op) for op in workspace.ops())]:
        text = (folder / ANSWERS_FILE).read_text()
        (folder / ANSWERS_FILE).write_text(
            "".join(line for line in text.splitlines(keepends=True) if not line.startswith("_commit:"))
        )
    shutil.rmtree(workspace.path / ".opgen")


def test_a_workspace_from_before_snapshots_gets_the_current_template_as_its_base_when_unedited(
    workspace: Workspace, rendered: Callable[..., Workspace]
) -> None:
    rendered(workspace.path, "relu")
    legacy(workspace)
    (workspace.path / "include" / "opgen" / "checks.h").unlink()  # deleted: rendered afresh

    report = update_ops(workspace)

    assert all(folder.baseline for folder in report.folders)
    assert {change.path for change in report.changes} == {
        ".copier-answers.yml", "relu/.copier-answers.yml", "include/opgen/checks.h",
    }  # fmt: skip
    assert (workspace.path / "include" / "opgen" / "checks.h").is_file()
    snapshot = read_answers(workspace.path)["_commit"]
    assert read_answers(workspace.path / "relu")["_commit"] == snapshot
    assert (workspace.path / SNAPSHOTS / str(snapshot) / "copier.yml").is_file()


def test_a_workspace_from_before_snapshots_with_edits_is_refused_and_untouched(
    workspace: Workspace, rendered: Callable[..., Workspace]
) -> None:
    rendered(workspace.path, "relu")
    legacy(workspace)
    reference = workspace.path / "relu" / "reference.py"
    reference.write_text(reference.read_text() + "# my edit\n")
    before = tree_state(workspace.path)

    result = runner.invoke(app, ["update", "-w", str(workspace.path)])

    assert result.exit_code == 2
    assert "before opgen kept template snapshots" in result.stderr and "relu/reference.py" in result.stderr
    assert "opgen new relu --force" in result.stderr
    assert tree_state(workspace.path) == before
    with pytest.raises(NoTemplateHistory):
        update_ops(workspace, dry_run=True)


def test_a_missing_snapshot_is_named_with_its_fix(workspace: Workspace, rendered: Callable[..., Workspace]) -> None:
    rendered(workspace.path, "relu")
    answers_file = workspace.path / "relu" / ANSWERS_FILE
    recorded = read_answers(workspace.path / "relu")["_commit"]
    answers_file.write_text(answers_file.read_text().replace(str(recorded), "0123456789ab"))
    before = tree_state(workspace.path)
    result = runner.invoke(app, ["update", "relu", "-w", str(workspace.path)])
    assert result.exit_code == 2
    assert "cannot update op 'relu'" in result.stderr and "(0123456789ab) is missing" in result.stderr
    assert "restore .opgen/templates/0123456789ab" in result.stderr and "opgen new relu --force" in result.stderr
    assert tree_state(workspace.path) == before


def test_a_missing_snapshot_of_the_current_template_is_rebuilt_from_it(
    workspace: Workspace, rendered: Callable[..., Workspace]
) -> None:
    rendered(workspace.path, "relu")
    reference = workspace.path / "relu" / "reference.py"
    reference.write_text(reference.read_text() + "# my edit\n")
    shutil.rmtree(workspace.path / ".opgen")  # e.g. not committed: the ids still name the current template
    report = update_ops(workspace)
    assert not report.changes and not report.conflicts
    assert reference.read_text().endswith("# my edit\n")


def test_opgen_template_must_be_a_template(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TEMPLATE_ENV, str(tmp_path))
    result = runner.invoke(app, ["new", "relu", "-w", str(workspace.path)])
    assert result.exit_code == 2 and "holds no opgen template" in result.stderr
    assert not workspace.path.exists()


# --- A workspace rendered by the previous release (tests/fixtures/README.md) -----------------

PREVIOUS_RELEASE = Path(__file__).parent / "fixtures" / "previous_release.tar.gz"
# Its ops, as rendered: `opgen new` with these arguments. What an update makes of them (the user's
# edits aside) must be what the current template renders afresh from the same arguments.
PREVIOUS_OPS: dict[str, dict[str, str]] = {
    "relu": {},
    "swish_gate": {"formula": "x*sigmoid(y)"},
    "row_op": {"kind": "rowwise"},
    "softmax": {},
}
# Edits of the ops' math and reference, the kind users make: (file, the line as rendered, the user's
# line). Lines the current template renders as the previous release did, so the edits carry over
# (an edit of a line the template changed collides: swish_gate's forward reference, whose printed
# parentheses went, would be left between conflict markers).
MATH_EDITS = [
    (
        "relu/csrc/relu_math.h",
        "    return x < T(0) ? T(0) : x;\n",
        "    return x < T(0) ? T(0.01) * x : x;  // mine: leaky\n",
    ),
    (
        "swish_gate/reference.py",
        "    return grad_output * torch.sigmoid(y), grad_output * (x * (torch.sigmoid(y) * torch.sigmoid(-y)))\n",
        "    return grad_output * torch.sigmoid(y), grad_output * x * torch.sigmoid(y) * torch.sigmoid(-y)  # mine\n",
    ),
]
# An edit of a file the new layout rewrote (relu's tests: 378 lines, now the op's settings over
# opgen.testing.tensor_op_suite): it has no place to go.
TEST_EDIT = ("relu/test_relu.py", "    torch.float16: (2e-3, 1e-3),\n", "    torch.float16: (4e-3, 1e-3),\n")
PRINTED_FORMULA_CODE = (
    "formula_display", "formula_forward_cpp", "formula_backward_cpp", "formula_reference_py", "formula_gradients_py",
)  # fmt: skip


def previous_release(destination: Path) -> Workspace:
    destination.mkdir(parents=True)
    with tarfile.open(PREVIOUS_RELEASE) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(destination, filter="data")
        else:  # Python without extraction filters (before 3.10.12 / 3.11.4): the archive is ours
            archive.extractall(destination)
    return Workspace.locate(destination / "generated_ops")


def fresh_render(destination: Path, ops: Iterable[str] = PREVIOUS_OPS) -> Workspace:
    """The previous release's ``ops`` rendered afresh by the current template."""
    workspace = Workspace.locate(destination / "generated_ops")
    for name in ops:
        new_op(name, workspace=workspace, **PREVIOUS_OPS[name])  # type: ignore[arg-type]
    return workspace


def edit(root: Path, path: str, rendered: str, yours: str) -> None:
    text = (root / path).read_text()
    assert text.count(rendered) == 1, f"{root.parent.name}: {path} does not hold {rendered!r} once: choose another edit"
    (root / path).write_text(text.replace(rendered, yours))


def workspace_files(root: Path) -> dict[str, bytes]:
    """Every file of the workspace but its template snapshots, by path."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".opgen" not in path.relative_to(root).parts
    }


def read_answers_text(text: str) -> dict[str, object]:
    answers = yaml.safe_load(textwrap.dedent(text))
    assert isinstance(answers, dict)
    return answers


def test_the_previous_release_updates_to_the_current_layout_keeping_the_users_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the update must give: the current template's fresh render, with the user's edits made to it.
    fresh = fresh_render(tmp_path / "fresh")
    workspace = previous_release(tmp_path / "old")
    old = read_answers(workspace.path / "swish_gate")
    assert set(PRINTED_FORMULA_CODE) <= old.keys()  # the fixture is what the previous release recorded
    for root in (fresh.path, workspace.path):
        for path, rendered, yours in MATH_EDITS:
            edit(root, path, rendered, yours)
        for op in ("relu", "row_op"):  # an edited op and one as rendered: the user's own file stays in both
            (root / op / "NOTES.md").write_text("my own file\n")
    (workspace.path / "swish_gate" / "reference.py").chmod(0o640)  # the merge must not reset it
    real_update, merged = copier.run_update, []

    def recording_update(destination: str, **kwargs: object) -> object:
        merged.append(Path(destination).name)
        return real_update(destination, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(copier, "run_update", recording_update)

    result = runner.invoke(app, ["update", "-w", str(workspace.path)])

    assert result.exit_code == 0, result.output
    # Only the edited ops needed copier's merge: the shared files, row_op and softmax held their
    # renders untouched, and took the current render as they were.
    assert sorted(merged) == ["relu", "swish_gate"]
    # Every file is what the current template renders afresh, but for the user's edits, which carried over.
    updated, expected = workspace_files(workspace.path), workspace_files(fresh.path)
    assert sorted(updated) == sorted(expected)
    assert [path for path in expected if updated[path] != expected[path]] == []
    # The formula op's answers are the current template's: the formula itself, printed code only if it reads it.
    answers = read_answers(workspace.path / "swish_gate")
    assert answers == read_answers(fresh.path / "swish_gate")
    assert {key: answers[key] for key in ("formula", "formula_inputs", "formula_params")} == {
        key: old[key] for key in ("formula", "formula_inputs", "formula_params")
    }
    assert set(PRINTED_FORMULA_CODE) & answers.keys() <= template_needs(template_dir())
    # Only the current template's snapshot is left; a merged file kept its permissions.
    assert [entry.name for entry in (workspace.path / SNAPSHOTS).iterdir()] == [snapshot_id(template_dir())]
    assert (workspace.path / "swish_gate" / "reference.py").stat().st_mode & 0o777 == 0o640


def test_an_edit_the_current_layout_has_no_place_for_is_listed_and_nothing_changes(tmp_path: Path) -> None:
    workspace = previous_release(tmp_path / "old")
    edit(workspace.path, *MATH_EDITS[0])
    edit(workspace.path, *TEST_EDIT)
    before = tree_state(workspace.path)

    result = runner.invoke(app, ["update", "relu", "-w", str(workspace.path)])

    assert result.exit_code == 1, result.output
    assert "cannot carry over relu/test_relu.py: the current template rewrote this file" in result.stdout
    # The edit, shown to be undone now and redone after the update.
    assert f"-{TEST_EDIT[1].rstrip()}" in result.stdout and f"+{TEST_EDIT[2].rstrip()}" in result.stdout
    assert "relu_math.h" not in result.stdout  # the math edit carries over
    assert "nothing was changed: relu/test_relu.py" in result.stderr and "undo your edit" in result.stderr
    assert tree_state(workspace.path) == before
    with pytest.raises(UpdateCannotCarryOver) as raised:  # a dry run says so too
        update_ops(workspace, ["relu"], dry_run=True)
    assert list(raised.value.files) == ["relu/test_relu.py"]
    assert tree_state(workspace.path) == before

    # Done as the hint says (the test edit undone), the update goes through and keeps the math edit.
    edit(workspace.path, TEST_EDIT[0], TEST_EDIT[2], TEST_EDIT[1])
    result = runner.invoke(app, ["update", "relu", "-w", str(workspace.path)])

    assert result.exit_code == 0, result.output
    fresh = fresh_render(tmp_path / "fresh", ["relu"])
    edit(fresh.path, *MATH_EDITS[0])
    for path in ("relu/csrc/relu_math.h", "relu/test_relu.py"):
        assert (workspace.path / path).read_text() == (fresh.path / path).read_text()


def test_migrate_answers_drops_the_printed_formula_code_the_template_does_not_use() -> None:
    old = read_answers_text(
        """
        formula: x*sigmoid(y)
        formula_backward_cpp: return grad_output;
        formula_display: x * sigmoid(y)
        formula_forward_cpp: return x;
        formula_gradients_py: return grad_output
        formula_inputs: [x, y]
        formula_params: []
        formula_reference_py: return x
        op_name: swish_gate
        recipe: formula
        scope: op
        """
    )
    kept = {key: value for key, value in old.items() if key not in PRINTED_FORMULA_CODE}
    assert migrate_answers(old, needed={"formula", "formula_inputs", "formula_params"}) == kept
    # What a template still reads, it still gets.
    assert migrate_answers(old, needed={"formula_display"}) == {**kept, "formula_display": "x * sigmoid(y)"}
    # Answers without printed code pass unchanged (so a migration applied twice is applied once).
    assert migrate_answers(kept, needed=set()) == kept
    relu = {"op_name": "relu", "opgen_version": "0.1.0", "recipe": "relu", "scope": "op"}
    assert migrate_answers(relu, needed=set()) == relu
    # The current template: every key the migration leaves out is one it does not use.
    needed = template_needs(template_dir())
    assert {"formula", "formula_inputs", "formula_params", "op_name", "recipe"} <= needed
    assert old.keys() - migrate_answers(old, needed).keys() == set(PRINTED_FORMULA_CODE) - needed


def test_template_needs_reads_questions_and_the_variables_templates_read(tmp_path: Path) -> None:
    (tmp_path / "copier.yml").write_text("_subdirectory: ops\nasked:\n  type: str\n")
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "a.txt.jinja").write_text("{% set local = 1 %}{{ read | any_filter(local) }}{{ local }}")
    (tmp_path / "ops" / "b.txt.jinja").write_text("{% if broken %}{{ also_read")  # unparsable: every name counts
    assert {"asked", "read", "broken", "also_read"} <= template_needs(tmp_path)
    assert "local" not in template_needs(tmp_path)  # set by the template itself


def test_the_previous_releases_python_imports_from_opgen_still_resolve(tmp_path: Path) -> None:
    """Its tests and benchmarks import opgen's helpers: the current opgen still has each of them."""
    workspace = previous_release(tmp_path / "old")
    missing = []
    for path in sorted(workspace.path.rglob("*.py")):
        if ".opgen" in path.relative_to(workspace.path).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "opgen":
                module = importlib.import_module(str(node.module))
                missing += [
                    f"{path.relative_to(workspace.path)}: from {node.module} import {alias.name}"
                    for alias in node.names
                    if not hasattr(module, alias.name)
                    and importlib.util.find_spec(f"{node.module}.{alias.name}") is None
                ]
    assert missing == []


# --- Slow: the updated op still builds and passes; a wheel's own template updates it ---------


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True)


@pytest.mark.slow
def test_updated_op_builds_and_passes_its_tests(tmp_path: Path) -> None:
    opgen: list[str | Path] = [sys.executable, "-m", "opgen"]
    env = {key: value for key, value in os.environ.items() if key != TEMPLATE_ENV}
    ws = tmp_path / "generated_ops"
    assert run(*opgen, "new", "softmax", "-w", ws, cwd=tmp_path, env=env).returncode == 0
    edit_as_user(ws)
    env[TEMPLATE_ENV] = str(new_template(template_dir(), tmp_path / "template_v2"))
    updated = run(*opgen, "update", "softmax", "-w", ws, cwd=tmp_path, env=env)
    assert updated.returncode == 0, updated.stdout + updated.stderr
    assert_merged(ws)
    built = run(*opgen, "build", "softmax", "--cpu-only", "-j", "2", "-w", ws, cwd=tmp_path, env=env)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    # Every test, each listed with its outcome (-rA): the one the new template added ran and passed.
    tested = run(*opgen, "test", "softmax", "-w", ws, cwd=tmp_path, env={**env, "PYTEST_ADDOPTS": "-rA"})
    assert tested.returncode == 0, tested.stdout[-5000:] + tested.stderr[-2000:]
    assert " passed" in tested.stdout and " failed" not in tested.stdout
    new_test = re.findall(r"^(\w+) \S*::test_rows_sum_to_one_added_by_the_new_template\b", tested.stdout, re.M)
    assert new_test == ["PASSED"], tested.stdout[-3000:]


@pytest.mark.slow
def test_update_from_opgen_installed_as_a_wheel(tmp_path: Path) -> None:
    # A wheel built from the sources alone (no git checkout travels with it) ...
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    for name in ("opgen", "template"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    wheels = tmp_path / "wheels"
    built = run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        wheels,
        source,
        cwd=tmp_path,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    # pyproject.toml lists every folder of the template: setuptools warns of none at install.
    assert "is absent from the `packages` configuration" not in built.stdout + built.stderr, built.stderr[-2000:]
    # ... installed into a fresh virtual environment that reuses this one's torch and copier.
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True)  # its pip is this one's too
    python, opgen = env_dir / "bin" / "python", env_dir / "bin" / "opgen"
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", TEMPLATE_ENV}}
    installed = run(
        python, "-m", "pip", "install", "--no-deps", "--no-index", *wheels.glob("opgen-*.whl"), cwd=tmp_path, env=env
    )
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    where = run(
        python,
        "-c",
        "import sys, opgen.render as r; print(r.template_dir()); print(r.__file__); print(sys.path)",
        cwd=tmp_path,
        env=env,
    )
    template, module, path = where.stdout.splitlines()
    assert module.startswith(str(env_dir)) and template.startswith(str(env_dir)), where.stdout + where.stderr
    assert str(REPO) not in path

    ws = tmp_path / "project" / "generated_ops"
    ws.parent.mkdir()
    assert run(opgen, "new", "softmax", cwd=ws.parent, env=env).returncode == 0
    edit_as_user(ws)
    env[TEMPLATE_ENV] = str(new_template(Path(template), tmp_path / "template_v2"))
    updated = run(opgen, "update", "softmax", cwd=ws.parent, env=env)
    assert updated.returncode == 0, updated.stdout + updated.stderr
    assert_merged(ws)  # the merge base came from the template inside site-packages

    # A later template change that collides with an edit: markers, the file listed, exit 1.
    edit_as_user(ws, contested=True)
    env[TEMPLATE_ENV] = str(new_template(tmp_path / "template_v2", tmp_path / "template_v3", contested=True))
    conflicted = run(opgen, "update", cwd=ws.parent, env=env)
    assert conflicted.returncode == 1 and KERNEL in conflicted.stderr, conflicted.stdout + conflicted.stderr
    assert "<<<<<<< before updating" in (ws / KERNEL).read_text()

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import copier
import pytest
from typer.testing import CliRunner

from opgen.cli import app
from opgen.errors import NoTemplateHistory, UpdateFailed
from opgen.render import SNAPSHOTS, TEMPLATE_ENV, new_op, snapshot_id, template_dir
from opgen.update import update_ops
from opgen.workspace import ANSWERS_FILE, Workspace, read_answers

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()

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
    assert kernel.splitlines()[1] == TEMPLATE_COMMENT  # the template's change
    assert kernel.rstrip("\n").endswith(USER_KERNEL_EDIT)  # the user's edit
    assert USER_TEST_EDIT in tests
    assert "def test_rows_sum_to_one_added_by_the_new_template" in tests
    assert "<<<<<<<" not in kernel + tests
    assert (ws / SHARED_HEADER).read_text().splitlines()[1] == TEMPLATE_COMMENT
    assert (ws / "setup.py").read_text().endswith("# my setup.py note\n")


def tree_state(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        path.relative_to(root).as_posix(): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_update_keeps_user_edits_and_applies_template_changes(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new_op("softmax", workspace=workspace)
    new_op("relu", workspace=workspace)
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
    # Updating relu too leaves the old snapshot unused: it is deleted.
    update_ops(workspace)
    assert [p.name for p in (workspace.path / SNAPSHOTS).iterdir()] == [new_snapshot]


def test_a_colliding_edit_is_left_as_conflict_markers_listed_and_exits_1(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new_op("softmax", workspace=workspace)
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


def test_a_file_the_template_drops_is_deleted_unless_the_user_edited_it(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new_op("softmax", workspace=workspace)
    bench = workspace.path / "softmax" / "bench_softmax.py"
    bench.write_text(bench.read_text() + "# my tuning notes\n")
    template = tmp_path / "template_v2"
    shutil.copytree(template_dir(), template)
    (template / "ops/softmax/bench_{{op_name}}.py.jinja").unlink()
    (template / "ops/softmax/reference.py.jinja").unlink()
    monkeypatch.setenv(TEMPLATE_ENV, str(template))

    result = runner.invoke(app, ["update", "softmax", "-w", str(workspace.path)])

    assert result.exit_code == 0, result.output
    assert "kept softmax/bench_softmax.py" in result.stdout and "D softmax/reference.py" in result.stdout
    assert bench.read_text().endswith("# my tuning notes\n")
    assert not (workspace.path / "softmax" / "reference.py").exists()


def test_an_unknown_op_exits_2_and_touches_nothing(workspace: Workspace) -> None:
    new_op("softmax", workspace=workspace)
    before = tree_state(workspace.path)
    result = runner.invoke(app, ["update", "softmax", "nope", "-w", str(workspace.path)])
    assert result.exit_code == 2
    assert "no op named 'nope'" in result.stderr and "softmax" in result.stderr
    assert tree_state(workspace.path) == before


def test_a_failure_midway_changes_nothing(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new_op("softmax", workspace=workspace)
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


def test_an_unchanged_template_changes_nothing_even_for_a_formula_op(workspace: Workspace) -> None:
    new_op("mish", workspace=workspace, formula="x*tanh(log(1+exp(x)))")
    new_op("scaled", workspace=workspace, formula="max(x, 0)*alpha", params=["alpha=1.5"])
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
    workspace: Workspace,
) -> None:
    new_op("relu", workspace=workspace)
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


def test_a_workspace_from_before_snapshots_with_edits_is_refused_and_untouched(workspace: Workspace) -> None:
    new_op("relu", workspace=workspace)
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


def test_a_missing_snapshot_is_named_with_its_fix(workspace: Workspace) -> None:
    new_op("relu", workspace=workspace)
    answers_file = workspace.path / "relu" / ANSWERS_FILE
    recorded = read_answers(workspace.path / "relu")["_commit"]
    answers_file.write_text(answers_file.read_text().replace(str(recorded), "0123456789ab"))
    before = tree_state(workspace.path)
    result = runner.invoke(app, ["update", "relu", "-w", str(workspace.path)])
    assert result.exit_code == 2
    assert "cannot update op 'relu'" in result.stderr and "(0123456789ab) is missing" in result.stderr
    assert "restore .opgen/templates/0123456789ab" in result.stderr and "opgen new relu --force" in result.stderr
    assert tree_state(workspace.path) == before


def test_a_missing_snapshot_of_the_current_template_is_rebuilt_from_it(workspace: Workspace) -> None:
    new_op("relu", workspace=workspace)
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

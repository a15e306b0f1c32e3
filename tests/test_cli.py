from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from opgen.cli import app

runner = CliRunner()


def run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("OPGEN_WORKSPACE", raising=False)
    return tmp_path / "generated_ops"


def test_the_documented_commands_run_and_an_unknown_one_is_bad_usage() -> None:
    import typer.main

    commands = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    documented = {"new", "build", "dev", "test", "bench", "list", "remove", "update", "doctor"}
    assert commands == documented
    for command in sorted(documented):
        assert run(command, "--help").exit_code == 0, command
    unknown = run("compile", "relu")
    assert unknown.exit_code == 2 and "compile" in unknown.stderr


def test_new_help_names_every_known_recipe_and_formula_function() -> None:
    from opgen.cli import FORMULA_FUNCTIONS_HELP
    from opgen.formula import FUNCTIONS
    from opgen.recipes import KNOWN_RECIPES

    assert sorted(FORMULA_FUNCTIONS_HELP.split()) == sorted(set(FUNCTIONS) - {"where"})
    help_text = " ".join(run("new", "--help").stdout.split())  # rich wraps it into a box
    for name in KNOWN_RECIPES:
        assert name in help_text, name


@pytest.mark.parametrize(
    "name", ["Softmax", "my-op", "../evil", "a/b", "class", "include", "setup", "build", "template"]
)
def test_new_refuses_bad_names_with_exit_2_and_writes_nothing(ws: Path, name: str) -> None:
    result = run("new", name, "--workspace", str(ws))
    assert result.exit_code == 2
    first_line = result.stderr.splitlines()[0]
    assert first_line.startswith("error: invalid op name")
    assert "hint:" in result.stderr
    assert not ws.exists()


def test_new_then_new_again_needs_force(ws: Path) -> None:
    assert run("new", "relu", "--workspace", str(ws)).exit_code == 0
    again = run("new", "relu", "--workspace", str(ws))
    assert again.exit_code == 2 and "already exists" in again.stderr and "--force" in again.stderr
    assert run("new", "relu", "--workspace", str(ws), "--force").exit_code == 0


def test_new_refuses_a_contradicting_kind(ws: Path) -> None:
    result = run("new", "softmax", "--kind", "elementwise", "--workspace", str(ws))
    assert result.exit_code == 2 and "known rowwise op" in result.stderr
    assert not (ws / "softmax").exists()


def test_new_refuses_an_unknown_kind(ws: Path) -> None:
    assert run("new", "my_op", "--kind", "diagonal", "--workspace", str(ws)).exit_code == 2


def test_workspace_from_environment(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPGEN_WORKSPACE", str(ws))
    assert run("new", "gelu").exit_code == 0
    assert (ws / "gelu" / "csrc" / "gelu_cuda.cu").is_file()


@pytest.mark.parametrize("command", ["build", "test", "dev"])
def test_unknown_op_lists_the_known_ones(ws: Path, command: str) -> None:
    run("new", "relu", "--workspace", str(ws))
    result = run(command, "nope", "--workspace", str(ws))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == "error: no op named 'nope' in the workspace"
    assert "known ops: relu" in result.stderr
    assert not (ws / "build").exists()  # refused before anything was built


@pytest.mark.parametrize("command", [["build"], ["dev", "relu"]])
def test_build_without_a_workspace_says_how_to_make_one(ws: Path, command: list[str]) -> None:
    result = run(*command, "--workspace", str(ws))
    assert result.exit_code == 2 and "no opgen workspace here" in result.stderr and "opgen new" in result.stderr


def test_test_of_an_unbuilt_op_says_to_build_it(ws: Path) -> None:
    run("new", "relu", "--workspace", str(ws))
    result = run("test", "relu", "--workspace", str(ws))
    assert result.exit_code == 1 and "opgen build relu" in result.stderr


def test_list_of_an_empty_workspace_says_how_to_add_an_op(ws: Path) -> None:
    run("new", "relu", "--workspace", str(ws))
    assert run("remove", "relu", "--yes", "--workspace", str(ws)).exit_code == 0
    result = run("list", "--workspace", str(ws))
    assert result.exit_code == 0 and "opgen new" in result.stdout


def test_new_in_a_workspace_missing_a_shared_header_says_to_update(ws: Path) -> None:
    assert run("new", "relu", "--workspace", str(ws)).exit_code == 0
    (ws / "include" / "opgen" / "formula_math.h").unlink()  # as in a workspace an older opgen rendered
    result = run("new", "silu", "--formula", "x*sigmoid(x)", "--workspace", str(ws))
    assert result.exit_code == 0 and (ws / "silu").is_dir()
    assert "note: silu uses opgen/formula_math.h, which this workspace lacks" in result.stderr
    assert "hint: run `opgen update`" in result.stderr
    assert "note:" not in run("new", "softmax", "--workspace", str(ws)).stderr  # softmax needs no formula_math.h

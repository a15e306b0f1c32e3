from __future__ import annotations

from pathlib import Path

import pytest

from opgen.errors import UnknownOp, WorkspaceError
from opgen.workspace import Workspace


def test_default_is_generated_ops_in_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPGEN_WORKSPACE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert Workspace.locate().path == tmp_path / "generated_ops"


def test_environment_variable_then_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPGEN_WORKSPACE", str(tmp_path / "from_env"))
    assert Workspace.locate().path == tmp_path / "from_env"
    assert Workspace.locate(tmp_path / "given").path == tmp_path / "given"


def test_a_name_python_cannot_import_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="not a Python identifier"):
        Workspace.locate(tmp_path / "my-ops")


def test_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ops").write_text("")
    with pytest.raises(WorkspaceError, match="is a file"):
        Workspace.locate(tmp_path / "ops")


def test_ops_are_the_folders_with_init_and_csrc(workspace: Workspace) -> None:
    for name, files in {"good": ["__init__.py", "csrc/a.cpp"], "no_csrc": ["__init__.py"], "include": ["x.h"],
                        ".opgen-new-x-123": ["__init__.py", "csrc/a.cpp"]}.items():  # fmt: skip
        for file in files:
            (workspace.path / name / file).parent.mkdir(parents=True, exist_ok=True)
            (workspace.path / name / file).write_text("")
    assert workspace.ops() == ["good"]


def test_missing_workspace_and_unknown_ops_are_usage_errors(workspace: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="no opgen workspace"):
        workspace.require_ops([])
    (workspace.path / "setup.py").parent.mkdir(parents=True)
    (workspace.path / "setup.py").write_text("")
    (workspace.path / ".copier-answers.yml").write_text("")
    (workspace.path / "relu" / "csrc").mkdir(parents=True)
    (workspace.path / "relu" / "__init__.py").write_text("")
    with pytest.raises(UnknownOp, match="no op named 'gelu'") as raised:
        workspace.require_ops(["gelu"])
    assert raised.value.hint == "known ops: relu"
    assert workspace.require_ops([]) == ["relu"]

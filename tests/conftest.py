from __future__ import annotations

from pathlib import Path

import pytest

from opgen.render import new_op
from opgen.workspace import Workspace


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """A workspace path in a fresh temporary folder (not rendered yet)."""
    monkeypatch.delenv("OPGEN_WORKSPACE", raising=False)
    return Workspace.locate(tmp_path / "ops_ws")


@pytest.fixture
def relu_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """A fresh workspace named generated_ops holding relu (rendered, not built)."""
    monkeypatch.delenv("OPGEN_WORKSPACE", raising=False)
    workspace = Workspace.locate(tmp_path / "generated_ops")
    new_op("relu", workspace=workspace)
    return workspace

from __future__ import annotations

from pathlib import Path

import pytest

from opgen.workspace import Workspace


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """A workspace path in a fresh temporary folder (not rendered yet)."""
    monkeypatch.delenv("OPGEN_WORKSPACE", raising=False)
    return Workspace.locate(tmp_path / "ops_ws")

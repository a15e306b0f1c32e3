from __future__ import annotations

from pathlib import Path

import pytest

from opgen.render import new_op
from opgen.rules import BuildRules
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


@pytest.fixture
def torch_built_with_cuda(monkeypatch: pytest.MonkeyPatch) -> str:
    """The workspace's build settings see a CUDA 13.0 build of torch, whatever torch is installed.

    Tests that mock a CUDA toolkit need this too: with a CPU build of torch the settings rightly
    compile CPU kernels only, since such a torch cannot load CUDA kernels.
    """
    from opgen import build

    load = build.workspace_rules

    def load_with_cuda_torch(workspace: Path) -> BuildRules | None:
        config = load(workspace)
        torch_build = getattr(config, "torch_build", None)  # None too for a test's broken file
        if torch_build is not None:
            version, _, git = torch_build()
            monkeypatch.setattr(config, "torch_build", lambda: (version, "13.0", git))
        return config

    monkeypatch.setattr(build, "workspace_rules", load_with_cuda_torch)
    return "13.0"

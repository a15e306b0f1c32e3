from __future__ import annotations

import shutil
from collections.abc import Callable
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


# An op to render: its name, or its name and new_op's keyword arguments.
OpToRender = str | tuple[str, dict[str, object]]


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Workspace]:
    """``rendered(destination, *ops)``: a fresh copy at ``destination`` of a workspace holding ``ops``.

    Each combination is rendered once per test process (copier takes 1-2 s an op) and copied
    (milliseconds) for every test that asks for it, so tests still own, and may edit, their copy.
    """
    renders: dict[tuple[object, ...], Path] = {}

    def workspace_with(destination: Path, *ops: OpToRender) -> Workspace:
        calls = [(op, {}) if isinstance(op, str) else op for op in ops]
        key = (destination.name, *((name, repr(sorted(kwargs.items()))) for name, kwargs in calls))
        if key not in renders:
            source = tmp_path_factory.mktemp("rendered") / destination.name
            for name, kwargs in calls:
                new_op(name, workspace=Workspace.locate(source), **kwargs)  # type: ignore[arg-type]
            renders[key] = source
        shutil.copytree(renders[key], destination, symlinks=True)
        return Workspace.locate(destination)

    return workspace_with


@pytest.fixture
def relu_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rendered: Callable[..., Workspace]) -> Workspace:
    """A fresh workspace named generated_ops holding relu (rendered, not built)."""
    monkeypatch.delenv("OPGEN_WORKSPACE", raising=False)
    return rendered(tmp_path / "generated_ops", "relu")


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

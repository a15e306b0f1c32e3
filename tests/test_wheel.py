"""The workspace as a wheel: `pip wheel --no-build-isolation ./generated_ops` installs and imports like the workspace."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from opgen.workspace import Workspace


def test_workspace_declares_its_build_backend_without_torch(relu_workspace: Workspace) -> None:
    pyproject = (relu_workspace.path / "pyproject.toml").read_text()
    assert 'build-backend = "setuptools.build_meta"' in pyproject
    assert 'requires = ["setuptools>=64"]' in pyproject  # torch on purpose not: see the next test


def test_build_without_torch_stops_with_the_command_that_works(relu_workspace: Workspace) -> None:
    # What pip's build isolation gives setup.py: an environment without torch.
    without_torch = "import sys, runpy; sys.modules['torch'] = None; runpy.run_path('setup.py', run_name='__main__')"
    result = subprocess.run(
        [sys.executable, "-c", without_torch, "bdist_wheel"], cwd=relu_workspace.path, capture_output=True, text=True
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "setup.py: torch is not importable. The ops must compile against the torch they will run with, "
        "so build without isolation, in the environment that has torch: pip wheel --no-build-isolation ./generated_ops"
    )


@pytest.mark.slow
def test_wheel_installs_into_a_venv_and_its_op_imports_from_anywhere(relu_workspace: Workspace, tmp_path: Path) -> None:
    dist, venv, elsewhere = tmp_path / "dist", tmp_path / "venv", tmp_path / "elsewhere"
    env = {**os.environ, "OPGEN_CUDA": "0", "MAX_JOBS": "2"}
    pip_wheel = ["pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(dist), str(relu_workspace.path)]
    wheel = subprocess.run([sys.executable, "-m", *pip_wheel], env=env, capture_output=True, text=True)
    assert wheel.returncode == 0, wheel.stdout[-3000:] + wheel.stderr[-3000:]
    (wheel_file,) = dist.glob("generated_ops-*.whl")

    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip_install = ["pip", "install", "--no-deps", "--no-index", str(wheel_file)]
    install = subprocess.run([str(python), "-m", *pip_install], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr

    elsewhere.mkdir()
    check = textwrap.dedent(
        """
        import torch, generated_ops
        print(generated_ops.__file__)
        x = torch.randn(100, dtype=torch.float64, requires_grad=True)
        assert generated_ops.built_ops == ["relu"] and not generated_ops.unbuilt_ops
        assert torch.equal(generated_ops.relu(x), torch.relu(x))
        assert torch.equal(torch.ops.generated_ops.relu(x), torch.relu(x))
        generated_ops.relu(x).sum().backward()
        assert torch.equal(x.grad, (x > 0).double())
        """
    )
    clean_env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "OPGEN_WORKSPACE")}
    result = subprocess.run([str(python), "-c", check], cwd=elsewhere, env=clean_env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    installed = Path(result.stdout.strip())
    assert installed.is_relative_to(venv) and installed.parent.name == "generated_ops"
    assert list((installed.parent / "relu").glob("_C*.so"))

"""What tests do to a rendered workspace: run opgen on it, read its build rules, and see broken stand-ins fail."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def opgen(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``opgen ARGS`` in a fresh Python process (as a user runs it), its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "opgen", *args], cwd=cwd, env=None if env is None else dict(env), capture_output=True, text=True
    )


def assert_python_runs(script: str, cwd: Path) -> None:
    """``script`` runs to the end in a fresh Python process in ``cwd`` (a workspace's parent), as a user's code would."""
    result = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


def build_config_module(workspace: Path) -> Any:
    """The workspace's _build_config.py as a module, for what setup.py alone calls (opgen's
    BuildRules, opgen/rules.py, holds only what opgen calls)."""
    spec = importlib.util.spec_from_file_location("workspace_build_config", workspace / "_build_config.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A deliberately broken stand-in: (file in the op's csrc/, the correct text, the wrong text);
# tests/shared_build.py makes it.
BrokenEdit = tuple[str, str, str]


def assert_generated_tests_fail(project: Path, names: Sequence[str], *test_args: str) -> None:
    """Each op's generated tests must fail: one ``opgen test NAMES TEST_ARGS`` run (one pytest
    process, not one a stand-in) exits 1, and its summary lists failed tests of every op's file."""
    result = opgen("test", *names, *test_args, cwd=project)
    assert result.returncode == 1, f"a broken kernel passed its tests ({result.returncode})\n{result.stdout[-3000:]}"
    failed = {line.split()[1].split("/")[0] for line in result.stdout.splitlines() if line.startswith("FAILED ")}
    still_passing = sorted(set(names) - failed)
    assert not still_passing, f"{still_passing}: a broken kernel passed its tests\n{result.stdout[-3000:]}"

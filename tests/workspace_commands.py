"""What the slow tests do to a rendered workspace: run opgen on it, and see broken stand-ins fail."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


def opgen(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``opgen ARGS`` in a fresh Python process (as a user runs it), its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "opgen", *args], cwd=cwd, env=None if env is None else dict(env), capture_output=True, text=True
    )


def assert_python_runs(script: str, cwd: Path) -> None:
    """``script`` runs to the end in a fresh Python process in ``cwd`` (a workspace's parent), as a user's code would."""
    result = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


# A deliberately broken stand-in: (file in the op's csrc/, the correct text, the wrong text);
# tests/shared_build.py makes it.
BrokenEdit = tuple[str, str, str]


def assert_generated_tests_fail(project: Path, names: Sequence[str], *test_args: str) -> None:
    """Each op's generated tests (``opgen test NAME TEST_ARGS``) must fail: exit 1, failures reported."""
    for name in names:
        result = opgen("test", name, *test_args, cwd=project)
        assert result.returncode == 1, f"{name}: a broken kernel passed its tests\n{result.stdout[-3000:]}"
        assert " failed" in result.stdout.strip().splitlines()[-1]

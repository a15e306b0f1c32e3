"""`opgen test`: run the ops' generated tests with pytest."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Sequence

from opgen.errors import BenchFailed, OpNotBuilt, TestsFailed
from opgen.rules import rules_for
from opgen.workspace import Workspace


def is_built(workspace: Workspace, op: str) -> bool:
    """Whether the op has a library this Python loads (the workspace's rule: opgen/rules.py)."""
    return rules_for(workspace.path).op_library(op, workspace.path) is not None


def _workspace_env(workspace: Workspace) -> dict[str, str]:
    env = dict(os.environ)
    # The workspace's parent on sys.path makes the workspace importable as a package.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(workspace.path.parent), env.get("PYTHONPATH")]))
    return env


def _require_built(workspace: Workspace, ops: Sequence[str]) -> None:
    unbuilt = [op for op in ops if not is_built(workspace, op)]
    if unbuilt:
        raise OpNotBuilt(ops=unbuilt)


def run_op_tests(workspace: Workspace, ops: Iterable[str] = (), pytest_args: Sequence[str] = ()) -> None:
    """Run the tests of ``ops`` (all when none are named); TestsFailed if any fail."""
    names = workspace.require_ops(ops)
    _require_built(workspace, names)
    test_files = [str(workspace.op_dir(op) / f"test_{op}.py") for op in names]
    command = [
        sys.executable, "-m", "pytest", *test_files,
        "-c", str(workspace.path / "pytest.ini"), "--rootdir", str(workspace.path),
        "-p", "no:cacheprovider", *pytest_args,
    ]  # fmt: skip
    returncode = subprocess.run(command, cwd=workspace.path, env=_workspace_env(workspace)).returncode
    if returncode != 0:
        raise TestsFailed(ops=names, exit_code=returncode)


def run_op_bench(workspace: Workspace, op: str, bench_args: Sequence[str] = ()) -> None:
    """Run ``<op>/bench_<op>.py`` as a module of the workspace package; BenchFailed if it fails."""
    (name,) = workspace.require_ops([op])
    _require_built(workspace, [name])
    command = [sys.executable, "-m", f"{workspace.package}.{name}.bench_{name}", *bench_args]
    returncode = subprocess.run(command, cwd=workspace.path.parent, env=_workspace_env(workspace)).returncode
    if returncode != 0:
        raise BenchFailed(op=name, exit_code=returncode)

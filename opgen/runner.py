"""`opgen test`: run the ops' generated tests with pytest."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Sequence

from opgen.errors import OpNotBuilt, TestsFailed
from opgen.workspace import Workspace


def is_built(workspace: Workspace, op: str) -> bool:
    return any(workspace.op_dir(op).glob("_C*.so"))


def run_op_tests(workspace: Workspace, ops: Iterable[str] = (), pytest_args: Sequence[str] = ()) -> None:
    """Run the tests of ``ops`` (all when none are named); TestsFailed if any fail."""
    names = workspace.require_ops(ops)
    unbuilt = [op for op in names if not is_built(workspace, op)]
    if unbuilt:
        raise OpNotBuilt(ops=unbuilt)
    test_files = [str(workspace.op_dir(op) / f"test_{op}.py") for op in names]
    env = dict(os.environ)
    # The workspace's parent on sys.path makes the workspace importable as a package.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(workspace.path.parent), env.get("PYTHONPATH")]))
    command = [
        sys.executable, "-m", "pytest", *test_files,
        "-c", str(workspace.path / "pytest.ini"), "--rootdir", str(workspace.path),
        "-p", "no:cacheprovider", *pytest_args,
    ]  # fmt: skip
    returncode = subprocess.run(command, cwd=workspace.path, env=env).returncode
    if returncode != 0:
        raise TestsFailed(ops=names, exit_code=returncode)

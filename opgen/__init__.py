"""opgen: from "I need a custom CUDA op" to a correct, tested, fast PyTorch op.

The command line (``opgen new|build|dev|test|bench|list|remove|update|doctor``) is a thin layer over these
functions.
"""

from __future__ import annotations

__version__ = "0.1.0"

from opgen.build import BuildReport, build_ops
from opgen.doctor import DoctorReport, run_doctor
from opgen.errors import OpgenError
from opgen.inventory import OpInfo, list_ops, remove_op
from opgen.jit import load_op
from opgen.render import new_op
from opgen.runner import run_op_bench, run_op_tests
from opgen.update import UpdateReport, update_ops
from opgen.workspace import Workspace

__all__ = [
    "BuildReport",
    "DoctorReport",
    "OpInfo",
    "OpgenError",
    "UpdateReport",
    "Workspace",
    "__version__",
    "build_ops",
    "list_ops",
    "load_op",
    "new_op",
    "remove_op",
    "run_doctor",
    "run_op_bench",
    "run_op_tests",
    "update_ops",
]

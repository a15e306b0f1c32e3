"""opgen: from "I need a custom CUDA op" to a correct, tested, fast PyTorch op.

The command line (``opgen new|build|dev|test|bench|list|remove|update|doctor``) is a thin layer over these
functions.
"""

from __future__ import annotations

__version__ = "0.1.0"

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Each public name and the module that defines it. They are imported on first use (PEP 562), so
# that what generated tests import (opgen.testing, opgen.bench) does not load the build
# machinery, copier, typer or rich.
_EXPORTS = {
    "BuildReport": "opgen.build",
    "build_ops": "opgen.build",
    "DoctorReport": "opgen.doctor",
    "run_doctor": "opgen.doctor",
    "OpgenError": "opgen.errors",
    "OpInfo": "opgen.inventory",
    "list_ops": "opgen.inventory",
    "remove_op": "opgen.inventory",
    "load_op": "opgen.jit",
    "new_op": "opgen.render",
    "run_op_bench": "opgen.runner",
    "run_op_tests": "opgen.runner",
    "UpdateReport": "opgen.update",
    "update_ops": "opgen.update",
    "Workspace": "opgen.workspace",
}

if TYPE_CHECKING:
    from opgen.build import BuildReport, build_ops
    from opgen.doctor import DoctorReport, run_doctor
    from opgen.errors import OpgenError
    from opgen.inventory import OpInfo, list_ops, remove_op
    from opgen.jit import load_op
    from opgen.render import new_op
    from opgen.runner import run_op_bench, run_op_tests
    from opgen.update import UpdateReport, update_ops
    from opgen.workspace import Workspace


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'opgen' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


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

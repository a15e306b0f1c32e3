"""opgen: from "I need a custom CUDA op" to a correct, tested, fast PyTorch op.

The command line (``opgen new|build|test``) is a thin layer over these functions.
"""

from __future__ import annotations

__version__ = "0.1.0"

from opgen.build import BuildReport, build_ops
from opgen.errors import OpgenError
from opgen.render import new_op
from opgen.runner import run_op_tests
from opgen.workspace import Workspace

__all__ = ["BuildReport", "OpgenError", "Workspace", "__version__", "build_ops", "new_op", "run_op_tests"]

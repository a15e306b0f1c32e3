"""opgen: from "I need a custom CUDA op" to a correct, tested, fast PyTorch op.

The command line (``opgen new|build|test``) is a thin layer over these functions.
"""

from __future__ import annotations

__version__ = "0.1.0"

from opgen.build import BuildReport, build_ops  # noqa: E402
from opgen.errors import OpgenError  # noqa: E402
from opgen.render import new_op  # noqa: E402
from opgen.runner import run_op_tests  # noqa: E402
from opgen.workspace import Workspace  # noqa: E402

__all__ = ["BuildReport", "OpgenError", "Workspace", "__version__", "build_ops", "new_op", "run_op_tests"]

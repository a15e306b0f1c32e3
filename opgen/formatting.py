"""The formatting of rendered code: ruff format for Python, clang-format for C++ and CUDA.

The template runs each rendered file through the ``format_python`` or ``format_cpp`` filter
(opgen.jinja_ext), so what opgen writes is already formatted, however long the names or formulas
it was given, and a formatter run over a user's edits changes only their lines. Both tools are
opgen's dependencies; on a machine where one is missing (opgen installed without its
dependencies), files are written as the template laid them out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import cache, lru_cache
from pathlib import Path

import yaml

from opgen.errors import RenderError

LINE_LENGTH = 120  # Python, as opgen's own
CPP_LINE_LENGTH = 100

# The workspace's C++ style (rendered into its .clang-format, so that the user's clang-format agrees).
CLANG_FORMAT_STYLE: dict[str, object] = {
    "BasedOnStyle": "Google",
    "ColumnLimit": CPP_LINE_LENGTH,
    "DerivePointerAlignment": False,
    "PointerAlignment": "Left",
    "IncludeBlocks": "Preserve",
    "SortIncludes": "Never",
    "AllowShortFunctionsOnASingleLine": "Inline",
    "AllowShortLambdasOnASingleLine": "Inline",
}


def clang_format_style() -> str:
    """The style as a .clang-format file's contents."""
    return yaml.safe_dump(CLANG_FORMAT_STYLE, sort_keys=False)


@cache
def _tool(name: str) -> str | None:
    """The tool's executable: its package's binary, else on PATH, else beside this interpreter (a venv's bin/).

    clang-format's package puts a Python script on PATH that starts an interpreter only to run its
    binary (about 50 ms a call; a render formats every C++ file): opgen runs the binary itself.
    """
    if name == "clang-format":
        try:
            import clang_format

            binary = clang_format.get_executable("clang-format")
        except (ImportError, AttributeError, OSError):
            binary = None
        if binary is not None and os.access(binary, os.X_OK):
            return str(binary)
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def _run(command: list[str], text: str, what: str) -> str:
    result = subprocess.run(command, input=text, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RenderError(
            what=what,
            reason=f"{Path(command[0]).name} could not format the rendered code: {result.stderr.strip()[:500]}",
        )
    return result.stdout


# Both formatters are pure functions of the text (the tool and the style are fixed for the process),
# so a text formatted once is not sent to a subprocess again: an update renders the same files
# several times (its base, the merge's two sides), and a test session renders the same ops often.
@lru_cache(maxsize=4096)
def format_python(text: str) -> str:
    ruff = _tool("ruff")
    if ruff is None or not text.strip():
        return text
    command = [ruff, "format", "--isolated", "--line-length", str(LINE_LENGTH), "--stdin-filename", "op.py", "-"]
    return _run(command, text, "Python")


@lru_cache(maxsize=4096)
def format_cpp(text: str) -> str:
    clang_format = _tool("clang-format")
    if clang_format is None or not text.strip():
        return text
    # The style inline, as JSON (which clang-format reads as YAML): the same dict as the file's.
    style = json.dumps(CLANG_FORMAT_STYLE)
    return _run([clang_format, f"--style={style}", "--assume-filename=op.cpp"], text, "C++")

"""opgen.formatting: rendered code goes through ruff format and clang-format, and the template's files are fixed points."""

from __future__ import annotations

from pathlib import Path

import pytest

from opgen.errors import RenderError
from opgen.formatting import CPP_LINE_LENGTH, LINE_LENGTH, _tool, clang_format_style, format_cpp, format_python

REPO = Path(__file__).resolve().parent.parent
SHARED_HEADERS = sorted((REPO / "template" / "workspace" / "include" / "opgen").iterdir())


def test_both_formatters_are_installed_with_opgen() -> None:
    # They are opgen's dependencies: without them renders are left unformatted, and the tests
    # below would prove nothing.
    assert _tool("ruff") is not None and _tool("clang-format") is not None


def test_python_is_laid_out_by_ruff() -> None:
    messy = "def f( x,y ):\n  return (x+y)\n"
    assert format_python(messy) == "def f(x, y):\n    return x + y\n"
    long_call = "value = function(" + ", ".join(f"argument_{i}" for i in range(20)) + ")\n"
    formatted = format_python(long_call)
    assert max(map(len, formatted.splitlines())) <= LINE_LENGTH and format_python(formatted) == formatted


def test_cpp_is_laid_out_by_clang_format_in_the_workspace_style() -> None:
    messy = "int add(int a,int b){return a+b;}\n"
    assert format_cpp(messy) == "int add(int a, int b) {\n  return a + b;\n}\n"
    long_call = "void g() { f(" + ", ".join(f"argument_{i}" for i in range(20)) + "); }\n"
    formatted = format_cpp(long_call)
    assert max(map(len, formatted.splitlines())) <= CPP_LINE_LENGTH and format_cpp(formatted) == formatted
    assert f"ColumnLimit: {CPP_LINE_LENGTH}" in clang_format_style()


def test_code_a_formatter_cannot_parse_is_a_render_error() -> None:
    with pytest.raises(RenderError, match="could not format"):
        format_python("def broken(:\n")


@pytest.mark.parametrize("header", SHARED_HEADERS, ids=lambda path: path.name)
def test_the_shared_headers_are_in_the_workspace_style(header: Path) -> None:
    # Copied into workspaces as they are: clang-format over a workspace must not touch them.
    text = header.read_text()
    assert format_cpp(text) == text, f"run clang-format -i on {header.relative_to(REPO)}"

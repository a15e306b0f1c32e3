"""The Jinja extension the template loads (copier's ``_jinja_extensions``).

It gives templates the ``op_spec`` filter, which turns the ``spec`` answer (plain data in the
answers file) back into an :class:`opgen.spec.OpSpec`, and ``formula_code``, which prints a formula
op's code from its recorded formula (opgen.formula), and the formatters every rendered file
goes through (opgen.formatting): templates read the op's interface from its
typed description, never from strings printed ahead of time, so `opgen update` re-renders an op
with whatever the current opgen prints.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment
from jinja2.ext import Extension

from opgen.formatting import clang_format_style, format_cpp, format_python
from opgen.spec import OpSpec


class OpSpecExtension(Extension):
    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        environment.filters["op_spec"] = _op_spec
        environment.filters["formula_code"] = _formula_code
        environment.filters["format_python"] = format_python
        environment.filters["format_cpp"] = format_cpp
        environment.globals["clang_format_style"] = clang_format_style


def _op_spec(data: Any) -> OpSpec:
    return data if isinstance(data, OpSpec) else OpSpec.from_answers(data)


def _formula_code(formula: str, params: list[dict[str, Any]]) -> dict[str, Any]:
    """A formula op's code, printed from its recorded formula and params (opgen.formula)."""
    return _printed_formula(formula, tuple((p["name"], float(p["default"])) for p in params))


@cache
def _printed_formula(formula: str, params: tuple[tuple[str, float], ...]) -> dict[str, Any]:
    # Once per formula, not once per rendered file: every file of the op imports the recipe, and
    # sympy's derivation and printing take a good part of a second.
    from opgen.formula import Param, parse_formula, render_formula  # sympy loads only for formula ops

    return render_formula(parse_formula(formula, [Param(name, default) for name, default in params]))

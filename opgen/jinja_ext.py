"""The Jinja extension the template loads (copier's ``_jinja_extensions``).

It gives templates the ``op_spec`` filter, which turns the ``spec`` answer (plain data in the
answers file) back into an :class:`opgen.spec.OpSpec`, and ``formula_code``, which prints a formula
op's code from its recorded formula (opgen.formula), and the formatters every rendered file
goes through (opgen.formatting): templates read the op's interface from its
typed description, never from strings printed ahead of time, so `opgen update` re-renders an op
with whatever the current opgen prints.
"""

from __future__ import annotations

import hashlib
from functools import cache
from types import CodeType
from typing import Any

from jinja2 import Environment
from jinja2.bccache import Bucket, BytecodeCache
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
        environment.bytecode_cache = _COMPILED


# What Jinja's lexer, parser, optimizer and code generator read from an environment: two
# environments that agree on these compile a template's source to the same code.
_COMPILE_SETTINGS = (
    "block_start_string", "block_end_string", "variable_start_string", "variable_end_string",
    "comment_start_string", "comment_end_string", "line_statement_prefix", "line_comment_prefix",
    "trim_blocks", "lstrip_blocks", "newline_sequence", "keep_trailing_newline", "optimized",
    "is_async", "autoescape", "finalize", "sandboxed", "intercepted_binops", "intercepted_unops",
    "code_generator_class", "extensions", "filters", "tests",
)  # fmt: skip


class _CompiledTemplates(BytecodeCache):
    """The template files' compiled code, kept for the process and shared by every render's environment.

    copier makes a new Jinja environment for each render, which compiles every template file it
    loads again (about half of a render's time; `opgen update` renders each folder twice, a test
    session hundreds of times). Keyed by the file's name in the template and the compile settings,
    and checked against the source's hash (Jinja's own check), so an edited file compiles afresh.
    """

    def __init__(self) -> None:
        self.codes: dict[tuple[str, str], CodeType] = {}

    def get_bucket(self, environment: Environment, name: str, filename: str | None, source: str) -> Bucket:
        settings = [_setting(getattr(environment, setting, None)) for setting in _COMPILE_SETTINGS]
        key = hashlib.sha256(repr([name, *settings]).encode()).hexdigest()
        bucket = Bucket(environment, key, self.get_source_checksum(source))
        self.load_bytecode(bucket)
        return bucket

    def load_bytecode(self, bucket: Bucket) -> None:
        bucket.code = self.codes.get((bucket.key, bucket.checksum))

    def dump_bytecode(self, bucket: Bucket) -> None:
        if bucket.code is not None:
            self.codes[(bucket.key, bucket.checksum)] = bucket.code


def _setting(value: Any) -> Any:
    """A compile setting as data that compares: named things by their names, not as objects."""
    if isinstance(value, (dict, set, frozenset)):  # extensions, filters, tests, intercepted operators
        return sorted(value)
    if callable(value):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}"
    return value


_COMPILED = _CompiledTemplates()


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

"""The formula's parser: a whitelisted Python expression, checked node by node and converted to sympy.

The formula is checked with Python's ``ast`` (numbers, names, + - * / **, calls of the language's
functions, comparisons inside ``where``) and converted to sympy by that same walk: no text of the
user's is ever evaluated, and none reaches the rendered files except as code printed from the parse.
"""

from __future__ import annotations

import ast
import functools
import keyword
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy as sp

from opgen.errors import InvalidFormula
from opgen.formula.language import (
    BINARY_FUNCTIONS,
    FUNCTIONS,
    MAX_FORMULA_LENGTH,
    MAX_INPUTS,
    MAX_SIMPLIFY_OPS,
    RESERVED_NAMES,
    UNARY_FUNCTIONS,
    ClampMax,
    ClampMin,
    Maximum,
    Minimum,
)
from opgen.formula.rewrite import stable
from opgen.names import CPP_KEYWORDS


@dataclass(frozen=True)
class Param:
    """A float argument of the op, with its default."""

    name: str
    default: float


@dataclass(frozen=True)
class Formula:
    """A parsed formula: its expression, tensor inputs (in order of appearance) and params."""

    text: str
    expr: sp.Expr
    inputs: tuple[str, ...]
    params: tuple[Param, ...]

    def derivative(self, wrt: str) -> sp.Expr:
        """The derivative with respect to ``wrt``: sympy's, simplified where that makes it shorter."""
        return _derivative(self.expr, wrt)

    def second_derivative(self, first: str, second: str) -> sp.Expr:
        """d/d``second`` of the derivative with respect to ``first``: what double backward computes."""
        return _derivative(_derivative(self.expr, first), second)


@functools.lru_cache(maxsize=256)
def _derivative(expr: sp.Expr, wrt: str) -> sp.Expr:
    """Derived once per render: the kernels, the reference and the double backward share it."""
    return _simplified(sp.diff(expr, sp.Symbol(wrt)))


def _simplified(derivative: sp.Expr) -> sp.Expr:
    """A derivative in stable form (opgen.formula.rewrite), simplified by sympy where that makes it shorter."""
    derivative = stable(derivative)
    if sp.count_ops(derivative) > MAX_SIMPLIFY_OPS:
        return derivative  # sympy's simplify grows slow past this; cse still shares the work
    if derivative.has(sp.Piecewise):
        # sympy spends seconds to minutes simplifying the conditions of a where/min/max (the fuzzer's
        # cos(max(z, cos(x))) took 20 s), and gains little; folding the factors into the pieces is fast.
        folded = stable(sp.piecewise_fold(derivative))
        return folded if sp.count_ops(folded) < sp.count_ops(derivative) else derivative
    simplified = stable(sp.simplify(derivative))
    return simplified if sp.count_ops(simplified) < sp.count_ops(derivative) else derivative



_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")

_COMPARISONS: dict[type, Callable[[sp.Expr, sp.Expr], Any]] = {
    ast.Lt: sp.Lt, ast.LtE: sp.Le, ast.Gt: sp.Gt, ast.GtE: sp.Ge, ast.Eq: sp.Eq, ast.NotEq: sp.Ne,
}  # fmt: skip


def parse_param(text: str) -> Param:
    """``NAME=DEFAULT`` from the command line."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep:
        raise InvalidFormula(
            formula=text, reason="a param is NAME=DEFAULT", hint="for example --param alpha=1.5", what="param"
        )
    _check_name(name, text, what="param")
    try:
        default = float(value)
    except ValueError:
        raise InvalidFormula(
            formula=text, reason=f"the default {value.strip()!r} is not a number", hint="for example --param alpha=1.5",
            what="param",
        ) from None  # fmt: skip
    if not math.isfinite(default):
        raise InvalidFormula(
            formula=text, reason="the default must be finite", hint="for example --param alpha=1.5", what="param"
        )
    return Param(name, default)


def parse_formula(text: str, params: Sequence[Param] = ()) -> Formula:
    """Check and parse ``text``; raise InvalidFormula pointing at the offending part."""
    if len(text) > MAX_FORMULA_LENGTH:
        raise InvalidFormula(formula=text[:40] + "...", reason=f"it is longer than {MAX_FORMULA_LENGTH} characters")
    if not text.strip():
        raise InvalidFormula(formula=text, reason="it is empty", hint='for example --formula "x * sigmoid(x)"')
    seen: set[str] = set()
    for param in params:
        if param.name in seen:
            raise InvalidFormula(formula=text, reason=f"param '{param.name}' is given twice")
        if param.name == "x":
            raise InvalidFormula(
                formula=text, reason="param 'x' is named like an input (x is the op's tensor argument)",
                hint="give the param another name, or drop --param x to make x a tensor input",
            )  # fmt: skip
        seen.add(param.name)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise InvalidFormula(
            formula=text, reason=f"syntax error at column {error.offset or 0}: {error.msg}",
            hint="a formula is one expression, such as x * tanh(log1p(exp(x)))",
        ) from None  # fmt: skip
    walker = _Walker(text.strip(), {p.name for p in params})
    expr = stable(walker.convert(tree.body))
    unused = [p.name for p in params if p.name not in walker.symbols]
    if unused:
        raise InvalidFormula(formula=text, reason=f"param '{unused[0]}' does not appear in the formula")
    inputs = tuple(name for name in walker.symbols if name not in seen)
    if not inputs:
        raise InvalidFormula(
            formula=text, reason="it has no tensor input (every name in it is a param)",
            hint="a name that is not given with --param is a tensor input, such as x",
        )  # fmt: skip
    if len(inputs) > MAX_INPUTS:
        raise InvalidFormula(
            formula=text, reason=f"it has {len(inputs)} tensor inputs ({', '.join(inputs)}); at most {MAX_INPUTS} are supported",
            hint="give some names with --param NAME=DEFAULT to make them float params",
        )  # fmt: skip
    # sympy folds `y - y` to 0: a name that cancels out would be an argument the op ignores.
    remaining = {symbol.name for symbol in expr.free_symbols}  # type: ignore[attr-defined]
    cancelled = [name for name in walker.symbols if name not in remaining]
    if cancelled:
        raise InvalidFormula(
            formula=text, reason=f"'{cancelled[0]}' cancels out of the formula (it simplifies to {sp.sstr(expr)})",
            hint="drop the name, or write the formula so that it matters",
        )  # fmt: skip
    # The generated files call the gradient of input `x` grad_x: no other name may be that.
    for name in walker.symbols:
        owner = name.removeprefix("grad_")
        if owner != name and owner in inputs:
            raise InvalidFormula(
                formula=text, reason=f"'{name}' is the name the generated code gives the gradient of input '{owner}'",
                hint="rename it",
            )  # fmt: skip
    return Formula(text=text, expr=expr, inputs=inputs, params=tuple(params))


def _check_name(name: str, formula: str, *, what: str = "name") -> None:
    reason = None
    if name.startswith("_"):
        reason = f"{what} '{name}' starts with '_'"
    elif not _NAME.fullmatch(name) or len(name) > 32:
        reason = f"{what} '{name}' is not a short identifier (letters, digits and '_')"
    elif keyword.iskeyword(name) or keyword.issoftkeyword(name):
        reason = f"{what} '{name}' is a Python keyword"
    elif name in CPP_KEYWORDS:
        reason = f"{what} '{name}' is a C++ keyword"
    elif name in FUNCTIONS:
        reason = f"{what} '{name}' is a function of the formula language"
    elif name in RESERVED_NAMES:
        reason = f"{what} '{name}' is a name the generated code uses"
    if reason:
        raise InvalidFormula(
            formula=formula, reason=reason, hint="rename it", what="param" if what == "param" else "formula"
        )


class _Walker:
    """Converts a whitelisted Python expression tree into sympy, refusing everything else."""

    def __init__(self, text: str, params: set[str]) -> None:
        self.text = text
        self.params = params
        self.symbols: dict[str, sp.Symbol] = {}  # in order of first appearance

    def refuse(self, node: ast.AST, reason: str, hint: str = "") -> InvalidFormula:
        segment = ast.get_source_segment(self.text, node) or ""
        column = getattr(node, "col_offset", 0) + 1
        where = f" in '{segment}'" if segment and segment != self.text else ""
        return InvalidFormula(
            formula=self.text, reason=f"{reason}{where} (column {column})",
            hint=hint or f"a formula uses numbers, names, + - * / **, comparisons inside where(), and {', '.join(FUNCTIONS)}",
        )  # fmt: skip

    def is_tensor(self, expr: sp.Expr) -> bool:
        return any(symbol.name not in self.params for symbol in expr.free_symbols)  # type: ignore[attr-defined]

    def convert(self, node: ast.expr) -> sp.Expr:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise self.refuse(node, f"{type(node.value).__name__} constants are not allowed")
            if isinstance(node.value, float):
                if not math.isfinite(node.value):
                    raise self.refuse(node, "numbers must be finite")
                return sp.Rational(repr(node.value))
            return sp.Integer(node.value)
        if isinstance(node, ast.Name):
            if node.id == "pi":
                return sp.pi
            if node.id in FUNCTIONS:
                raise self.refuse(node, f"'{node.id}' is a function; call it as {node.id}(...)")
            _check_name(node.id, self.text)
            return self.symbols.setdefault(node.id, sp.Symbol(node.id))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = self.convert(node.operand)
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp):
            left, right = self.convert(node.left), self.convert(node.right)
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.Div):
                if right == 0:
                    raise self.refuse(node, "division by zero")
                return left / right
            if isinstance(node.op, ast.Pow):
                if left.is_number and right.is_number:
                    # Fold in floating point: exact integer powers of literals can be astronomically large.
                    try:
                        value = float(left) ** float(right)
                    except (OverflowError, ZeroDivisionError, TypeError):
                        raise self.refuse(node, "this power of numbers is not a finite real number") from None
                    if isinstance(value, complex) or not math.isfinite(value):
                        raise self.refuse(node, "this power of numbers is not a finite real number")
                    return sp.Float(value, 17)
                return sp.Pow(left, right)
            raise self.refuse(node, f"the operator {type(node.op).__name__} is not allowed")
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Compare):
            raise self.refuse(node, "a comparison is only allowed as the condition of where(cond, a, b)")
        raise self.refuse(node, f"{type(node).__name__} is not allowed (a formula is a pure math expression)")

    def call(self, node: ast.Call) -> sp.Expr:
        if not isinstance(node.func, ast.Name):
            raise self.refuse(node, "only the formula language's functions can be called")
        name = node.func.id
        if name not in FUNCTIONS:
            raise self.refuse(node, f"unknown function '{name}'")
        if node.keywords or any(isinstance(arg, ast.Starred) for arg in node.args):
            raise self.refuse(node, f"{name}() takes positional arguments only")
        arity = 3 if name == "where" else 2 if name in ("min", "max", *BINARY_FUNCTIONS) else 1
        if len(node.args) != arity:
            raise self.refuse(node, f"{name}() takes {arity} argument{'s' if arity > 1 else ''}, got {len(node.args)}")
        if name == "where":
            condition = self.condition(node.args[0])
            return sp.Piecewise((self.convert(node.args[1]), condition), (self.convert(node.args[2]), True))
        args = [self.convert(arg) for arg in node.args]
        if name in UNARY_FUNCTIONS:
            return UNARY_FUNCTIONS[name](args[0])
        if name in BINARY_FUNCTIONS:
            return BINARY_FUNCTIONS[name](*args)
        a, b = args
        if not self.is_tensor(a):
            a, b = b, a  # the constant goes second
        if self.is_tensor(b):
            return Maximum(a, b) if name == "max" else Minimum(a, b)
        return ClampMin(a, b) if name == "max" else ClampMax(a, b)

    def condition(self, node: ast.expr) -> Any:
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            raise self.refuse(node, "the condition of where() must be one comparison, such as x > 0")
        operator = _COMPARISONS.get(type(node.ops[0]))
        if operator is None:
            raise self.refuse(node, f"the comparison {type(node.ops[0]).__name__} is not allowed")
        left, right = self.convert(node.left), self.convert(node.comparators[0])
        if not (left.free_symbols or right.free_symbols):  # sympy could take minutes to decide it
            raise self.refuse(node, "this condition holds no name, so it is always true or always false")
        result = operator(left, right)
        if result in (sp.true, sp.false):
            raise self.refuse(node, "this condition is always true or always false")
        return result

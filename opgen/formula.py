"""Elementwise ops from a formula: parse it, differentiate it, print it as C++ and as PyTorch.

The formula is a Python expression in a small math language. It is checked node by node with
Python's ``ast`` (a whitelist: numbers, names, + - * / **, calls of the functions below,
comparisons inside ``where``) and converted to sympy by that same walk: no text of the user's is
ever evaluated, and none reaches the rendered files except as code printed from the parse.

Every function is a sympy ``Function`` of this module with its own derivative and no evaluation
rules of its own, so sympy never rewrites the user's math into a form that overflows sooner
(sympy's own ``tanh(log(u))`` becomes ``(u**2 - 1)/(u**2 + 1)``). The sub-gradients where a
function has no derivative are PyTorch's: ``max(x, c)`` with a constant ``c`` as ``torch.relu``
(0 at the tie, the constant wins), ``max(x, y)`` of two tensors as ``torch.maximum`` (a tie
splits the gradient in half), ``abs`` as ``torch.abs`` (0 at 0); ``where`` sends the gradient to
the branch it picked, as ``torch.where`` does.

``log(1 + exp(u))`` and ``log1p(exp(u))`` are read as ``softplus(u)`` and computed in its stable
form (``max(u, 0) + log1p(exp(-|u|))``, as ``torch.nn.functional.softplus``): what a user writing
that formula means, where the literal form overflows for ``u`` past 88 in float32 (and its
derivative ``exp(u) / (1 + exp(u))`` turns into inf / inf = NaN).

The names that are not params are the op's tensor inputs, in order of first appearance; an op of
several inputs broadcasts them as PyTorch does, and its backward gives one gradient per input.
"""

from __future__ import annotations

import ast
import keyword
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import sympy as sp

from opgen.errors import InvalidFormula
from opgen.names import CPP_KEYWORDS

MAX_FORMULA_LENGTH = 500
# Tensor inputs of one op. Each is one more pointer the kernel loads from, and one more gradient
# its backward writes; past a handful, registers and the bytes in flight per thread run out.
MAX_INPUTS = 8
# Integer powers up to this are multiplications (opgen::formula::ipow); larger ones use std::pow.
MAX_INTEGER_POWER = 8
# Derivatives up to this many operations are simplified by sympy (a second or so at most).
MAX_SIMPLIFY_OPS = 150

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")

# Names the generated code uses for its own variables, arguments and attributes: a tensor input or
# a param of the same name would shadow or break them. `x` is the op's tensor argument in its
# Python signature, so no param may take it.
RESERVED_NAMES = frozenset(
    """
    grad_output grad_input output inputs ctx self torch math std opgen at c10 T Run run scalar_t
    kFast pi e inf nan forward backward training extra_repr params saved_tensors save_for_backward
    needs_input_grad mark_dirty mark_non_differentiable set_materialize_grads to cuda cpu type half
    train eval apply parameters buffers modules children state_dict ipow sign formula_exp
    broadcast grad grads device_guard shape dtype
    """.split()
)


# --- The math language: sympy functions with their derivatives and nothing else. -----------------


class _Unary(sp.Function):
    """A function of one argument whose derivative is ``_derivative(arg)``."""

    nargs = 1

    @classmethod
    def eval(cls, arg: sp.Expr) -> sp.Expr | None:
        return None  # never rewrite: the user's form is the computed form

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        return self._derivative(self.args[0])

    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        raise NotImplementedError


class Exp(_Unary):
    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return Exp(arg)


class Log(_Unary):
    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return 1 / arg


class Log1p(_Unary):
    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return 1 / (1 + arg)


class Expm1(_Unary):
    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return Exp(arg)


class Sin(_Unary):
    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return Cos(arg)


class Cos(_Unary):
    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return -Sin(arg)


class Tanh(_Unary):
    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return Sech2(arg)


class Sigmoid(_Unary):
    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return SigmoidGrad(arg)


# The derivatives of tanh and sigmoid, 1 - tanh(u)^2 and sigmoid(u) (1 - sigmoid(u)), as functions
# of their own: in float, 1 - tanh(u)^2 and 1 - sigmoid(u) cancel to a few significant digits
# once |u| passes 4 or so, and an op like x * sigmoid(y) multiplies that error by x. The kernels
# compute both from e = exp(-|u|) instead (opgen::formula::sech2, sigmoid_grad), which keeps full
# precision and never overflows.
class Sech2(_Unary):
    """1 - tanh(u)^2 = 1 / cosh(u)^2."""

    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return -2 * Sech2(arg) * Tanh(arg)


class SigmoidGrad(_Unary):
    """sigmoid(u) (1 - sigmoid(u)) = sigmoid(u) sigmoid(-u)."""

    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return SigmoidGrad(arg) * (1 - 2 * Sigmoid(arg))


class Softplus(_Unary):
    """log(1 + e^u), computed without overflow; what log(1 + exp(u)) and log1p(exp(u)) parse to."""

    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return Sigmoid(arg)


class Erf(_Unary):
    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return 2 / sp.sqrt(sp.pi) * Exp(-(arg**2))


class Sign(_Unary):
    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return sp.Integer(0)


class Abs(_Unary):
    @staticmethod
    def _derivative(arg: sp.Expr) -> sp.Expr:
        return Sign(arg)  # sign(0) = 0: torch.abs's gradient at 0


class _Binary(sp.Function):
    nargs = 2

    @classmethod
    def eval(cls, a: sp.Expr, b: sp.Expr) -> sp.Expr | None:
        return None


class ClampMin(_Binary):
    """max(a, c) with c free of tensor inputs: torch.relu's convention, the constant wins ties."""

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        a, c = self.args
        if argindex == 1:
            return sp.Piecewise((0, sp.Le(a, c)), (1, True))
        return sp.Piecewise((1, sp.Le(a, c)), (0, True))


class ClampMax(_Binary):
    """min(a, c) with c free of tensor inputs: the constant wins ties."""

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        a, c = self.args
        if argindex == 1:
            return sp.Piecewise((0, sp.Ge(a, c)), (1, True))
        return sp.Piecewise((1, sp.Ge(a, c)), (0, True))


class Maximum(_Binary):
    """max(a, b) of two tensors: torch.maximum's convention, a tie splits the gradient."""

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        a, b = self.args if argindex == 1 else reversed(self.args)
        return sp.Piecewise((0, sp.Lt(a, b)), (sp.S.Half, sp.Eq(a, b)), (1, True))


class Minimum(_Binary):
    """min(a, b) of two tensors: torch.minimum's convention, a tie splits the gradient."""

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        a, b = self.args if argindex == 1 else reversed(self.args)
        return sp.Piecewise((0, sp.Gt(a, b)), (sp.S.Half, sp.Eq(a, b)), (1, True))


UNARY_FUNCTIONS: dict[str, Callable[[sp.Expr], sp.Expr]] = {
    "exp": Exp,
    "log": Log,
    "log1p": Log1p,
    "expm1": Expm1,
    "sqrt": lambda arg: sp.Pow(arg, sp.S.Half),
    "rsqrt": lambda arg: sp.Pow(arg, -sp.S.Half),
    "sin": Sin,
    "cos": Cos,
    "tanh": Tanh,
    "sigmoid": Sigmoid,
    "softplus": Softplus,
    "erf": Erf,
    "abs": Abs,
}
FUNCTIONS = (*UNARY_FUNCTIONS, "min", "max", "where")

# sympy's own functions, for folding subexpressions that hold no symbol into a number.
_NUMERIC: dict[type, Callable[..., sp.Expr]] = {
    Exp: sp.exp, Log: sp.log, Log1p: lambda a: sp.log(1 + a), Expm1: lambda a: sp.exp(a) - 1, Sin: sp.sin,
    Cos: sp.cos, Tanh: sp.tanh, Sigmoid: lambda a: 1 / (1 + sp.exp(-a)), Softplus: lambda a: sp.log(1 + sp.exp(a)),
    Erf: sp.erf, Sign: sp.sign, Abs: sp.Abs, Sech2: lambda a: 1 / sp.cosh(a) ** 2,
    SigmoidGrad: lambda a: sp.exp(-a) / (1 + sp.exp(-a)) ** 2,
    ClampMin: sp.Max, Maximum: sp.Max, ClampMax: sp.Min, Minimum: sp.Min,
}  # fmt: skip

_COMPARISONS: dict[type, Callable[[sp.Expr, sp.Expr], Any]] = {
    ast.Lt: sp.Lt, ast.LtE: sp.Le, ast.Gt: sp.Gt, ast.GtE: sp.Ge, ast.Eq: sp.Eq, ast.NotEq: sp.Ne,
}  # fmt: skip


# --- Parsing. -------------------------------------------------------------------------------------


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
        derivative = sp.diff(self.expr, sp.Symbol(wrt))
        if sp.count_ops(derivative) > MAX_SIMPLIFY_OPS:
            return derivative  # sympy's simplify grows slow past this; cse still shares the work
        simplified = sp.simplify(derivative)
        return simplified if sp.count_ops(simplified) < sp.count_ops(derivative) else derivative


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
    expr = walker.convert(tree.body)
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


def _stable(expr: sp.Expr) -> sp.Expr:
    """``log(1 + exp(u))`` and ``log1p(exp(u))`` as ``softplus(u)``, which does not overflow."""
    if isinstance(expr, Log1p) and isinstance(expr.args[0], Exp):
        return Softplus(expr.args[0].args[0])
    if isinstance(expr, Log) and isinstance(expr.args[0], sp.Add):
        terms = sp.Add.make_args(expr.args[0])
        if len(terms) == 2 and sp.Integer(1) in terms:
            other = terms[0] if terms[1] == 1 else terms[1]
            if isinstance(other, Exp):
                return Softplus(other.args[0])
    return expr


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
        arity = 3 if name == "where" else 2 if name in ("min", "max") else 1
        if len(node.args) != arity:
            raise self.refuse(node, f"{name}() takes {arity} argument{'s' if arity > 1 else ''}, got {len(node.args)}")
        if name == "where":
            condition = self.condition(node.args[0])
            return sp.Piecewise((self.convert(node.args[1]), condition), (self.convert(node.args[2]), True))
        args = [self.convert(arg) for arg in node.args]
        if name in UNARY_FUNCTIONS:
            return _stable(UNARY_FUNCTIONS[name](args[0]))
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
        result = operator(self.convert(node.left), self.convert(node.comparators[0]))
        if result in (sp.true, sp.false):
            raise self.refuse(node, "this condition is always true or always false")
        return result


# --- Printing. ------------------------------------------------------------------------------------


def _number(expr: sp.Expr) -> float:
    """A subexpression without symbols, as a float."""
    folded = expr.replace(lambda e: type(e) in _NUMERIC, lambda e: _NUMERIC[type(e)](*e.args))
    value = complex(sp.N(folded, 20))
    if value.imag != 0 or not math.isfinite(value.real):
        raise InvalidFormula(formula=str(expr), reason="a constant part of the formula is not a finite real number")
    return value.real


class _Printer:
    """Prints a sympy expression from this module's language; subclasses name the target."""

    functions: ClassVar[dict[type, str]] = {}

    def __init__(self, params: Iterable[str]) -> None:
        self.params = set(params)

    def __call__(self, expr: Any) -> str:
        if isinstance(expr, sp.Symbol):
            return self.symbol(expr.name)
        if expr.is_number and not isinstance(expr, sp.Piecewise):
            return self.literal(_number(expr))
        if isinstance(expr, sp.Add):
            terms = [self(term) for term in sp.Add.make_args(expr)]
            return "(" + " + ".join(terms) + ")"
        if isinstance(expr, sp.Mul):
            return self.mul(expr)
        if isinstance(expr, sp.Pow):
            return self.pow(expr.base, expr.exp)
        if isinstance(expr, sp.Piecewise):
            return self.piecewise(list(expr.args))
        if isinstance(expr, sp.core.relational.Relational):
            return f"({self(expr.lhs)} {expr.rel_op} {self(expr.rhs)})"
        if isinstance(expr, ClampMin | ClampMax | Maximum | Minimum):
            return self.extremum(type(expr), self(expr.args[0]), self(expr.args[1]))
        if type(expr) in self.functions:
            return self.function(type(expr), self(expr.args[0]))
        raise TypeError(f"cannot print {expr!r} ({type(expr).__name__})")  # a bug: the parser admits only the above

    def mul(self, expr: sp.Expr) -> str:
        # Numeric factors fold into one literal; negative powers go below the line.
        coefficient, numerator, denominator = sp.Integer(1), [], []
        for factor in sp.Mul.make_args(expr):
            if factor.is_number and not isinstance(factor, sp.Piecewise):
                coefficient *= factor
            elif isinstance(factor, sp.Pow) and factor.exp.is_number and factor.exp < 0:
                denominator.append(self(sp.Pow(factor.base, -factor.exp)))
            else:
                numerator.append(self(factor))
        if coefficient != 1 or not numerator:
            numerator.insert(0, self.literal(_number(coefficient)))
        top = " * ".join(numerator)
        return f"({top} / ({' * '.join(denominator)}))" if denominator else f"({top})"

    def symbol(self, name: str) -> str:
        return name

    def literal(self, value: float) -> str:
        raise NotImplementedError

    def pow(self, base: sp.Expr, exponent: sp.Expr) -> str:
        raise NotImplementedError

    def piecewise(self, pieces: list[Any]) -> str:
        raise NotImplementedError

    def extremum(self, kind: type, a: str, b: str) -> str:
        raise NotImplementedError

    def function(self, kind: type, arg: str) -> str:
        raise NotImplementedError


class CppPrinter(_Printer):
    """C++ for host and device: math in ``T`` (float or double); params are double members."""

    functions: ClassVar[dict[type, str]] = {
        Exp: "opgen::formula::exp<kFast>", Log: "opgen::formula::log<kFast>", Log1p: "opgen::formula::log1p<kFast>",
        Expm1: "std::expm1", Sin: "std::sin", Cos: "std::cos", Tanh: "opgen::formula::tanh<kFast>", Erf: "std::erf",
        Abs: "std::abs",
        Sign: "opgen::formula::sign", Sigmoid: "opgen::formula::sigmoid<kFast>", Softplus: "opgen::formula::softplus<kFast>",
        Sech2: "opgen::formula::sech2<kFast>", SigmoidGrad: "opgen::formula::sigmoid_grad<kFast>",
    }  # fmt: skip

    def symbol(self, name: str) -> str:
        return f"T({name})" if name in self.params else name

    def literal(self, value: float) -> str:
        return f"T({value!r})"

    def pow(self, base: sp.Expr, exponent: sp.Expr) -> str:
        b = self(base)
        if exponent == sp.S.Half:
            return f"std::sqrt({b})"
        if exponent == -sp.S.Half:
            return f"(T(1) / std::sqrt({b}))"
        if exponent.is_Integer and 0 < abs(int(exponent)) <= MAX_INTEGER_POWER:
            power = f"opgen::formula::ipow<{abs(int(exponent))}>({b})"
            return power if int(exponent) > 0 else f"(T(1) / {power})"
        return f"std::pow({b}, {self(exponent)})"

    def piecewise(self, pieces: list[Any]) -> str:
        (value, condition), *rest = pieces
        if condition == sp.true:
            return self(value)
        return f"({self.condition(condition)} ? {self(value)} : {self.piecewise(rest)})"

    def condition(self, condition: Any) -> str:
        if isinstance(condition, sp.And | sp.Or):
            joiner = " && " if isinstance(condition, sp.And) else " || "
            return "(" + joiner.join(self.condition(arg) for arg in condition.args) + ")"
        if isinstance(condition, sp.Not):
            return f"(!{self.condition(condition.args[0])})"
        return self(condition)

    def extremum(self, kind: type, a: str, b: str) -> str:
        # NaN propagates from either side, as in torch.relu / torch.maximum.
        if kind is ClampMin:
            return f"(({a} <= {b}) ? {b} : {a})"
        if kind is ClampMax:
            return f"(({a} >= {b}) ? {b} : {a})"
        if kind is Maximum:
            return f"opgen::formula::maximum({a}, {b})"
        return f"opgen::formula::minimum({a}, {b})"

    def function(self, kind: type, arg: str) -> str:
        return f"{self.functions[kind]}({arg})"


class TorchPrinter(_Printer):
    """PyTorch: tensors in, tensors out; params are 0-d tensors of the input's dtype."""

    # Sech2 and SigmoidGrad have no torch function of their own: function() prints them.
    functions: ClassVar[dict[type, str]] = {
        Exp: "torch.exp", Log: "torch.log", Log1p: "torch.log1p", Expm1: "torch.expm1", Sin: "torch.sin",
        Cos: "torch.cos", Tanh: "torch.tanh", Erf: "torch.erf", Abs: "torch.abs", Sign: "torch.sign",
        Sigmoid: "torch.sigmoid", Softplus: "torch.nn.functional.softplus", Sech2: "", SigmoidGrad: "",
    }  # fmt: skip

    def __init__(self, params: Iterable[str], like: str) -> None:
        super().__init__(params)
        self.like = like  # a tensor input, whose dtype and device literals in torch.where take

    def literal(self, value: float) -> str:
        return repr(value)

    def pow(self, base: sp.Expr, exponent: sp.Expr) -> str:
        if exponent == sp.S.Half:
            return f"torch.sqrt({self(base)})"
        if exponent == -sp.S.Half:
            return f"torch.rsqrt({self(base)})"
        if exponent.is_Integer:
            return f"({self(base)} ** {int(exponent)})"
        return f"({self(base)} ** {self(exponent)})"

    def branch(self, value: Any) -> str:
        return f"{self.like}.new_tensor({self(value)})" if value.is_number else self(value)

    def piecewise(self, pieces: list[Any]) -> str:
        (value, condition), *rest = pieces
        if condition == sp.true:
            return self.branch(value)
        return f"torch.where({self.condition(condition)}, {self.branch(value)}, {self.piecewise(rest)})"

    def condition(self, condition: Any) -> str:
        if isinstance(condition, sp.And | sp.Or):
            joiner = " & " if isinstance(condition, sp.And) else " | "
            return "(" + joiner.join(self.condition(arg) for arg in condition.args) + ")"
        if isinstance(condition, sp.Not):
            return f"(~{self.condition(condition.args[0])})"
        return self(condition)

    def extremum(self, kind: type, a: str, b: str) -> str:
        if kind is ClampMin:
            return f"torch.where({a} <= {b}, {b}, {a})"  # the tie picks the constant: no gradient, as torch.relu
        if kind is ClampMax:
            return f"torch.where({a} >= {b}, {b}, {a})"
        return f"torch.{'maximum' if kind is Maximum else 'minimum'}({a}, {b})"

    def function(self, kind: type, arg: str) -> str:
        if kind is Sech2:
            return f"(torch.cosh({arg}) ** -2)"
        if kind is SigmoidGrad:
            return f"(torch.sigmoid({arg}) * torch.sigmoid(-{arg}))"
        return f"{self.functions[kind]}({arg})"


class DisplayPrinter(TorchPrinter):
    """The formula as people write it, for comments and docstrings (never the user's raw text)."""

    functions: ClassVar[dict[type, str]] = {
        **{kind: name for name, kind in UNARY_FUNCTIONS.items() if isinstance(kind, type)},
        Sign: "sign",
    }

    def __init__(self) -> None:
        super().__init__((), like="")

    def literal(self, value: float) -> str:
        return f"{value:g}"

    def pow(self, base: sp.Expr, exponent: sp.Expr) -> str:
        if exponent == sp.S.Half:
            return f"sqrt({self(base)})"
        if exponent == -sp.S.Half:
            return f"rsqrt({self(base)})"
        return f"({self(base)} ** {self(exponent)})"

    def branch(self, value: Any) -> str:
        return self(value)

    def piecewise(self, pieces: list[Any]) -> str:
        (value, condition), *rest = pieces
        if condition == sp.true:
            return self.branch(value)
        return f"where({self.condition(condition)}, {self(value)}, {self.piecewise(rest)})"

    def extremum(self, kind: type, a: str, b: str) -> str:
        return f"{'max' if kind in (ClampMin, Maximum) else 'min'}({a}, {b})"


def _statements(
    exprs: Sequence[sp.Expr], printer: _Printer, declare: str, declare_condition: str = ""
) -> tuple[list[str], list[str]]:
    """Common subexpressions as temporaries ``_t0, _t1, ...`` and the printed results.

    A temporary is declared with ``declare`` (``const T `` in C++), or ``declare_condition`` when
    it holds a comparison (``const bool ``).
    """
    temporaries, reduced = sp.cse(list(exprs), symbols=sp.numbered_symbols("_t"), optimizations="basic")
    lines = []
    for symbol, value in temporaries:
        is_condition = isinstance(value, sp.core.relational.Relational | sp.logic.boolalg.Boolean)
        lines.append(f"{declare_condition if is_condition else declare}{symbol.name} = {printer(value)}")
    return lines, [printer(expr) for expr in reduced]


def _without_outer_parentheses(text: str) -> str:
    """``(a * b)`` as ``a * b``; ``(a) * (b)`` as it is."""
    depth = 0
    for position, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and position < len(text) - 1:
            return text  # the first parenthesis closes before the end
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


def formula_answers(formula: Formula) -> dict[str, Any]:
    """What a formula op records in its answers: the formula, its inputs and params (never code)."""
    return {
        "formula": formula.text,
        "formula_inputs": list(formula.inputs),
        "formula_params": [{"name": p.name, "default": p.default} for p in formula.params],
    }


def render_formula(formula: Formula) -> dict[str, Any]:
    """The formula's code in C++ and PyTorch, printed at every render of its op (opgen.jinja_ext).

    The backward computes the gradients of every input in one pass: one set of common
    subexpressions for all of them, returned together (``opgen::Results``) when there are several.
    """
    params = [p.name for p in formula.params]
    derivatives = [formula.derivative(name) for name in formula.inputs]
    cpp = CppPrinter(params)
    forward_lines, (forward,) = _statements([formula.expr], cpp, "const T ", "const bool ")
    backward_lines, backward = _statements(derivatives, cpp, "const T ", "const bool ")
    gradients_cpp = [f"grad_output * {derivative}" for derivative in backward]
    if len(gradients_cpp) == 1:
        backward_return = f"return {gradients_cpp[0]};"
    else:
        backward_return = f"return opgen::Results<T, {len(gradients_cpp)}>{{{', '.join(gradients_cpp)}}};"
    torch_printer = TorchPrinter(params, like=formula.inputs[0])
    reference_lines, (reference,) = _statements([formula.expr], torch_printer, "")
    gradient_lines, gradients = _statements(derivatives, torch_printer, "")
    return {
        "formula_display": _without_outer_parentheses(DisplayPrinter()(formula.expr)),
        "formula_forward_cpp": "\n".join([*(line + ";" for line in forward_lines), f"return {forward};"]),
        "formula_backward_cpp": "\n".join([*(line + ";" for line in backward_lines), backward_return]),
        "formula_reference_py": "\n".join([*reference_lines, f"return {reference}"]),
        "formula_gradients_py": "\n".join(
            [*gradient_lines, "return " + ", ".join(f"grad_output * {gradient}" for gradient in gradients)]
        ),
    }


def torch_function(expr: sp.Expr, formula: Formula) -> str:
    """``expr`` (the formula or a derivative) as a PyTorch expression over its inputs and params."""
    return TorchPrinter([p.name for p in formula.params], like=formula.inputs[0])(expr)

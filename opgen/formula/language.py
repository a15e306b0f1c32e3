"""The formula language: one table of functions, each with its derivative, C++ and torch forms.

Every function is a sympy ``Function`` made from its row of :data:`TABLE`, with the derivative of
the row and no evaluation rules of its own, so sympy never rewrites the user's math into a form
that overflows sooner (sympy's own ``tanh(log(u))`` becomes ``(u**2 - 1)/(u**2 + 1)``). The
sub-gradients where a function has no derivative are PyTorch's: ``max(x, c)`` with a constant
``c`` as ``torch.relu`` (0 at the tie, the constant wins), ``max(x, y)`` of two tensors as
``torch.maximum`` (a tie splits the gradient in half), ``abs`` as ``torch.abs`` (0 at 0).

A row's forms are format strings over its printed arguments (``{0}``, ``{1}``): ``cpp`` for the
kernels (math in ``T``; ``kFast`` picks the hardware's approximations for 16-bit types, see the
workspace's ``opgen/formula_math.h``), ``torch`` for the reference, ``display`` for comments and
docstrings (None: as ``torch``), and ``numeric`` sympy's own function, to fold constants.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import sympy as sp

from opgen.errors import InvalidFormula

MAX_FORMULA_LENGTH = 500
# Tensor inputs of one op. Each is one more pointer the kernel loads from, and one more gradient
# its backward writes; past a handful, registers and the bytes in flight per thread run out.
MAX_INPUTS = 8
# Integer powers up to this are multiplications (opgen::formula::ipow); larger ones use std::pow.
MAX_INTEGER_POWER = 8
# Derivatives up to this many operations are simplified by sympy (a second or so at most).
MAX_SIMPLIFY_OPS = 150

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


@dataclass(frozen=True)
class FunctionSpec:
    """One row of the table: a function's derivatives (one per argument) and printed forms."""

    derivatives: tuple[Callable[..., sp.Expr], ...]
    cpp: str
    torch: str
    numeric: Callable[..., sp.Expr]
    display: str | None = None
    # The torch form takes tensors only (torch.hypot, torch.logaddexp): numbers become 0-d tensors.
    tensor_args: bool = False


class FormulaFunction(sp.Function):
    """A function of the language: derivative from its row, never rewritten by sympy."""

    spec: ClassVar[FunctionSpec]

    @classmethod
    def eval(cls, *args: sp.Expr) -> sp.Expr | None:
        return None  # never rewrite: the user's form is the computed form

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        return self.spec.derivatives[argindex - 1](*self.args)


# Every function of the language, by its class name.
TABLE: dict[str, type[FormulaFunction]] = {}


def _define(name: str, spec: FunctionSpec) -> Any:
    kind = type(name, (FormulaFunction,), {"nargs": len(spec.derivatives), "spec": spec, "__module__": __name__})
    TABLE[name] = kind
    return kind


def _unary(cpp: str, torch: str) -> tuple[str, str]:
    return f"{cpp}({{0}})", f"{torch}({{0}})"


def _fast(name: str) -> str:
    return f"opgen::formula::{name}<kFast>"


Exp: Any = _define("Exp", FunctionSpec((lambda u: Exp(u),), *_unary(_fast("exp"), "torch.exp"), sp.exp, "exp({0})"))
Log: Any = _define("Log", FunctionSpec((lambda u: 1 / u,), *_unary(_fast("log"), "torch.log"), sp.log, "log({0})"))
Log1p: Any = _define(
    "Log1p",
    FunctionSpec((lambda u: 1 / (1 + u),), *_unary(_fast("log1p"), "torch.log1p"), lambda a: sp.log(1 + a), "log1p({0})"),
)
Expm1: Any = _define(
    "Expm1",
    FunctionSpec((lambda u: Exp(u),), *_unary("std::expm1", "torch.expm1"), lambda a: sp.exp(a) - 1, "expm1({0})"),
)
Sin: Any = _define("Sin", FunctionSpec((lambda u: Cos(u),), *_unary("std::sin", "torch.sin"), sp.sin, "sin({0})"))
Cos: Any = _define("Cos", FunctionSpec((lambda u: -Sin(u),), *_unary("std::cos", "torch.cos"), sp.cos, "cos({0})"))
Tanh: Any = _define("Tanh", FunctionSpec((lambda u: Sech2(u),), *_unary(_fast("tanh"), "torch.tanh"), sp.tanh, "tanh({0})"))
Sigmoid: Any = _define(
    "Sigmoid",
    FunctionSpec(
        (lambda u: SigmoidGrad(u),), *_unary(_fast("sigmoid"), "torch.sigmoid"), lambda a: 1 / (1 + sp.exp(-a)),
        "sigmoid({0})",
    ),
)  # fmt: skip
# The derivatives of tanh and sigmoid, 1 - tanh(u)^2 and sigmoid(u) (1 - sigmoid(u)), as functions
# of their own: in float, 1 - tanh(u)^2 and 1 - sigmoid(u) cancel to a few significant digits
# once |u| passes 4 or so, and an op like x * sigmoid(y) multiplies that error by x. The kernels
# compute both from e = exp(-|u|) instead (opgen::formula::sech2, sigmoid_grad), which keeps full
# precision and never overflows. Neither has a torch function of its own.
Sech2: Any = _define(  # 1 - tanh(u)^2 = 1 / cosh(u)^2
    "Sech2",
    FunctionSpec(
        (lambda u: -2 * Sech2(u) * Tanh(u),), f"{_fast('sech2')}({{0}})", "(torch.cosh({0}) ** -2)",
        lambda a: 1 / sp.cosh(a) ** 2,
    ),
)  # fmt: skip
# tanh(u) in a kernel that also computes sech2(u) (the derivative of anything with a tanh): for
# 16-bit types from sech2's own exp and reciprocal, one special-function instruction fewer than
# the approximate tanh (opgen::formula::tanh_beside_sech2). Printers put it in, never a formula.
TanhBesideSech2: Any = _define(
    "TanhBesideSech2",
    FunctionSpec((lambda u: Sech2(u),), *_unary(_fast("tanh_beside_sech2"), "torch.tanh"), sp.tanh, "tanh({0})"),
)
SigmoidGrad: Any = _define(  # sigmoid(u) (1 - sigmoid(u)) = sigmoid(u) sigmoid(-u)
    "SigmoidGrad",
    FunctionSpec(
        (lambda u: SigmoidGrad(u) * (1 - 2 * Sigmoid(u)),), f"{_fast('sigmoid_grad')}({{0}})",
        "(torch.sigmoid({0}) * torch.sigmoid(-{0}))", lambda a: sp.exp(-a) / (1 + sp.exp(-a)) ** 2,
    ),
)  # fmt: skip
# log(1 + e^u), computed without overflow; what log(1 + exp(u)) and log1p(exp(u)) parse to.
Softplus: Any = _define(
    "Softplus",
    FunctionSpec(
        (lambda u: Sigmoid(u),), *_unary(_fast("softplus"), "torch.nn.functional.softplus"),
        lambda a: sp.log(1 + sp.exp(a)), "softplus({0})",
    ),
)  # fmt: skip
Erf: Any = _define(
    "Erf",
    FunctionSpec((lambda u: 2 / sp.sqrt(sp.pi) * Exp(-(u**2)),), *_unary("std::erf", "torch.erf"), sp.erf, "erf({0})"),
)
Sign: Any = _define("Sign", FunctionSpec((lambda u: sp.Integer(0),), *_unary("opgen::formula::sign", "torch.sign"), sp.sign, "sign({0})"))
# sign(0) = 0: torch.abs's gradient at 0.
Abs: Any = _define("Abs", FunctionSpec((lambda u: Sign(u),), *_unary("std::abs", "torch.abs"), sp.Abs, "abs({0})"))
# max(a, c) / min(a, c) with c free of tensor inputs: torch.relu's convention, the constant wins
# ties. NaN propagates from either side, as in torch.relu / torch.maximum.
ClampMin: Any = _define(
    "ClampMin",
    FunctionSpec(
        (lambda a, c: sp.Piecewise((0, sp.Le(a, c)), (1, True)), lambda a, c: sp.Piecewise((1, sp.Le(a, c)), (0, True))),
        "(({0} <= {1}) ? {1} : {0})", "torch.where({0} <= {1}, {1}, {0})", sp.Max, "max({0}, {1})",
    ),
)  # fmt: skip
ClampMax: Any = _define(
    "ClampMax",
    FunctionSpec(
        (lambda a, c: sp.Piecewise((0, sp.Ge(a, c)), (1, True)), lambda a, c: sp.Piecewise((1, sp.Ge(a, c)), (0, True))),
        "(({0} >= {1}) ? {1} : {0})", "torch.where({0} >= {1}, {1}, {0})", sp.Min, "min({0}, {1})",
    ),
)  # fmt: skip


def _tie_split(a: sp.Expr, b: sp.Expr, loses: Callable[..., Any]) -> sp.Expr:
    return sp.Piecewise((0, loses(a, b)), (sp.S.Half, sp.Eq(a, b)), (1, True))


# max(a, b) / min(a, b) of two tensors: torch.maximum's convention, a tie splits the gradient.
Maximum: Any = _define(
    "Maximum",
    FunctionSpec(
        (lambda a, b: _tie_split(a, b, sp.Lt), lambda a, b: _tie_split(b, a, sp.Lt)),
        "opgen::formula::maximum({0}, {1})", "torch.maximum({0}, {1})", sp.Max, "max({0}, {1})",
    ),
)  # fmt: skip
Minimum: Any = _define(
    "Minimum",
    FunctionSpec(
        (lambda a, b: _tie_split(a, b, sp.Gt), lambda a, b: _tie_split(b, a, sp.Gt)),
        "opgen::formula::minimum({0}, {1})", "torch.minimum({0}, {1})", sp.Min, "min({0}, {1})",
    ),
)  # fmt: skip

# The stable forms the rewrites (opgen.formula.rewrite) turn textbook formulas into; a formula may
# also call them by name.
Erfc: Any = _define(  # 1 - erf(u), without the cancellation of 1 + erf(u) for very negative u
    "Erfc",
    FunctionSpec(
        (lambda u: -2 / sp.sqrt(sp.pi) * Exp(-(u**2)),), *_unary("std::erfc", "torch.special.erfc"), sp.erfc,
        "erfc({0})",
    ),
)  # fmt: skip
LogSigmoid: Any = _define(  # log(sigmoid(u)) = -softplus(-u): never log(0) = -inf for very negative u
    "LogSigmoid",
    FunctionSpec(
        (lambda u: Sigmoid(-u),), *_unary(_fast("log_sigmoid"), "torch.nn.functional.logsigmoid"),
        lambda a: -sp.log(1 + sp.exp(-a)), "logsigmoid({0})",
    ),
)  # fmt: skip
Hypot: Any = _define(  # sqrt(a^2 + b^2) without the overflow of the squares
    "Hypot",
    FunctionSpec(
        (lambda a, b: a / Hypot(a, b), lambda a, b: b / Hypot(a, b)), "std::hypot({0}, {1})",
        "torch.hypot({0}, {1})", lambda a, b: sp.sqrt(a**2 + b**2), "hypot({0}, {1})", tensor_args=True,
    ),
)  # fmt: skip
LogAddExp: Any = _define(  # log(e^a + e^b) = max(a, b) + log1p(e^-|a - b|), without overflow
    "LogAddExp",
    FunctionSpec(
        (lambda a, b: Sigmoid(a - b), lambda a, b: Sigmoid(b - a)), f"{_fast('logaddexp')}({{0}}, {{1}})",
        "torch.logaddexp({0}, {1})", lambda a, b: sp.log(sp.exp(a) + sp.exp(b)), "logaddexp({0}, {1})",
        tensor_args=True,
    ),
)  # fmt: skip

# The functions a formula calls, by the name it calls them.
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
    "erfc": Erfc,
    "logsigmoid": LogSigmoid,
    "abs": Abs,
}
BINARY_FUNCTIONS: dict[str, Callable[[sp.Expr, sp.Expr], sp.Expr]] = {"hypot": Hypot, "logaddexp": LogAddExp}
FUNCTIONS = (*UNARY_FUNCTIONS, *BINARY_FUNCTIONS, "min", "max", "where")


def number(expr: sp.Expr) -> float:
    """A subexpression without symbols, as a float."""
    folded = expr.replace(
        lambda e: isinstance(e, FormulaFunction), lambda e: type(e).spec.numeric(*e.args)  # type: ignore[attr-defined]
    )
    value = complex(sp.N(folded, 20))
    if value.imag != 0 or not math.isfinite(value.real):
        raise InvalidFormula(formula=str(expr), reason="a constant part of the formula is not a finite real number")
    return value.real

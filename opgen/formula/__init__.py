"""Elementwise ops from a formula: parse it, differentiate it, print it as C++ and as PyTorch.

The package is the language (``language``: one table of functions, each with its derivative and
its C++ and torch forms), the parser (``parser``: a whitelisted Python expression converted to
sympy) and the printers (``printers``: the kernels' C++, the reference's PyTorch and the formula
for comments). ``where`` sends the gradient to the branch it picked, as ``torch.where`` does.

``log(1 + exp(u))`` and ``log1p(exp(u))`` are read as ``softplus(u)`` and computed in its stable
form (``max(u, 0) + log1p(exp(-|u|))``, as ``torch.nn.functional.softplus``): what a user writing
that formula means, where the literal form overflows for ``u`` past 88 in float32 (and its
derivative ``exp(u) / (1 + exp(u))`` turns into inf / inf = NaN).

The names that are not params are the op's tensor inputs, in order of first appearance; an op of
several inputs broadcasts them as PyTorch does, and its backward gives one gradient per input.
"""

from opgen.formula.language import (
    FUNCTIONS,
    MAX_FORMULA_LENGTH,
    MAX_INPUTS,
    MAX_INTEGER_POWER,
    MAX_SIMPLIFY_OPS,
    RESERVED_NAMES,
    TABLE,
    UNARY_FUNCTIONS,
    FormulaFunction,
    FunctionSpec,
)
from opgen.formula.parser import Formula, Param, parse_formula, parse_param
from opgen.formula.printers import (
    CppPrinter,
    DisplayPrinter,
    TorchPrinter,
    formula_answers,
    render_formula,
    torch_function,
)
from opgen.formula.rewrite import stable

__all__ = [
    "FUNCTIONS",
    "MAX_FORMULA_LENGTH",
    "MAX_INPUTS",
    "MAX_INTEGER_POWER",
    "MAX_SIMPLIFY_OPS",
    "RESERVED_NAMES",
    "TABLE",
    "UNARY_FUNCTIONS",
    "CppPrinter",
    "DisplayPrinter",
    "Formula",
    "FormulaFunction",
    "FunctionSpec",
    "Param",
    "TorchPrinter",
    "formula_answers",
    "parse_formula",
    "parse_param",
    "render_formula",
    "stable",
    "torch_function",
]

"""The formula's printers: C++ for the kernels, PyTorch for the reference, and the formula as people write it.

Each function prints from its row of the language's table (opgen.formula.language); common
subexpressions become temporaries shared by all the expressions of one block.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import sympy as sp

from opgen.formula.language import (
    MAX_INTEGER_POWER,
    FormulaFunction,
    FunctionSpec,
    Sech2,
    Tanh,
    TanhBesideSech2,
    number,
)
from opgen.formula.parser import Formula


class _Printer:
    """Prints a sympy expression from this module's language; subclasses name the target."""

    def __init__(self, params: Iterable[str]) -> None:
        self.params = set(params)

    def __call__(self, expr: Any) -> str:
        if isinstance(expr, sp.Symbol):
            return self.symbol(expr.name)
        if expr.is_number and not isinstance(expr, sp.Piecewise):
            return self.literal(number(expr))
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
        if isinstance(expr, sp.And | sp.Or | sp.Not | sp.ITE | sp.Xor):  # a condition cse made a temporary
            return self.condition(expr)
        if isinstance(expr, FormulaFunction):
            return self.function(expr.spec, list(expr.args))
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
            numerator.insert(0, self.literal(number(coefficient)))
        top = " * ".join(numerator)
        return f"({top} / ({' * '.join(denominator)}))" if denominator else f"({top})"

    def symbol(self, name: str) -> str:
        return name

    def literal(self, value: float) -> str:
        raise NotImplementedError

    def pow(self, base: sp.Expr, exponent: sp.Expr) -> str:
        raise NotImplementedError

    # The target's logical operators, for where()'s conditions; select() is its if-then-else.
    AND: ClassVar[str]
    OR: ClassVar[str]
    XOR: ClassVar[str]
    NOT: ClassVar[str]

    def select(self, test: str, then: str, otherwise: str) -> str:
        raise NotImplementedError

    def branch(self, value: Any) -> str:
        """A where() branch (a tensor target makes a number branch a tensor)."""
        return self(value)

    def piecewise(self, pieces: list[Any]) -> str:
        (value, condition), *rest = pieces
        if condition == sp.true:
            return self.branch(value)
        return self.select(self.condition(condition), self.branch(value), self.piecewise(rest))

    def condition(self, condition: Any) -> str:
        if isinstance(condition, sp.And | sp.Or):
            joiner = self.AND if isinstance(condition, sp.And) else self.OR
            return "(" + joiner.join(self.condition(arg) for arg in condition.args) + ")"
        if isinstance(condition, sp.Not):
            return f"({self.NOT}{self.condition(condition.args[0])})"
        if isinstance(condition, sp.ITE):  # sympy's if-then-else of conditions (a where() in a condition)
            return self.select(*(self.condition(arg) for arg in condition.args))
        if isinstance(condition, sp.Xor):
            return "(" + self.XOR.join(self.condition(arg) for arg in condition.args) + ")"
        return self(condition)

    def function(self, spec: FunctionSpec, args: list[Any]) -> str:
        raise NotImplementedError


class CppPrinter(_Printer):
    """C++ for host and device: math in ``T`` (float or double); params are double members."""

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
            power = f"opgen::formula::ipow<{abs(int(exponent))}>({b})" if abs(int(exponent)) > 1 else b
            return power if int(exponent) > 0 else f"(T(1) / {power})"
        return f"std::pow({b}, {self(exponent)})"

    AND, OR, XOR, NOT = " && ", " || ", " != ", "!"

    def select(self, test: str, then: str, otherwise: str) -> str:
        return f"({test} ? {then} : {otherwise})"

    def function(self, spec: FunctionSpec, args: list[Any]) -> str:
        return spec.cpp.format(*(self(arg) for arg in args))


class TorchPrinter(_Printer):
    """PyTorch: tensors in, tensors out; params are 0-d tensors of the input's dtype."""

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

    AND, OR, XOR, NOT = " & ", " | ", " ^ ", "~"

    def select(self, test: str, then: str, otherwise: str) -> str:
        return f"torch.where({test}, {then}, {otherwise})"

    def branch(self, value: Any) -> str:
        return f"{self.like}.new_tensor({self(value)})" if value.is_number else self(value)

    def function(self, spec: FunctionSpec, args: list[Any]) -> str:
        return spec.torch.format(*(self.branch(arg) if spec.tensor_args else self(arg) for arg in args))


class DisplayPrinter(TorchPrinter):
    """The formula as people write it, for comments and docstrings (never the user's raw text)."""

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

    def select(self, test: str, then: str, otherwise: str) -> str:
        return f"where({test}, {then}, {otherwise})"

    def branch(self, value: Any) -> str:
        return self(value)

    def function(self, spec: FunctionSpec, args: list[Any]) -> str:
        return (spec.display or spec.torch).format(*(self(arg) for arg in args))


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


def _tanh_beside_sech2(exprs: Sequence[sp.Expr]) -> list[sp.Expr]:
    """``exprs`` with each tanh(u) whose sech2(u) they also compute as TanhBesideSech2(u).

    The kernels then take both from one exp and one reciprocal (opgen/formula_math.h).
    """
    sech2_arguments = {sech2.args[0] for expr in exprs for sech2 in expr.atoms(Sech2)}
    return [
        expr.replace(lambda e: isinstance(e, Tanh) and e.args[0] in sech2_arguments, lambda e: TanhBesideSech2(*e.args))
        for expr in exprs
    ]


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
    backward_lines, backward = _statements(_tanh_beside_sech2(derivatives), cpp, "const T ", "const bool ")
    gradients_cpp = [f"grad_output * {derivative}" for derivative in backward]
    if len(gradients_cpp) == 1:
        backward_return = f"return {gradients_cpp[0]};"
    else:
        backward_return = f"return opgen::Results<T, {len(gradients_cpp)}>{{{', '.join(gradients_cpp)}}};"
    torch_printer = TorchPrinter(params, like=formula.inputs[0])
    reference_lines, (reference,) = _statements([formula.expr], torch_printer, "")
    gradient_lines, gradients = _statements(derivatives, torch_printer, "")
    return {
        "formula_double_backward_py": _double_backward(formula, derivatives, torch_printer),
        "formula_display": _without_outer_parentheses(DisplayPrinter()(formula.expr)),
        "formula_forward_cpp": "\n".join([*(line + ";" for line in forward_lines), f"return {forward};"]),
        "formula_backward_cpp": "\n".join([*(line + ";" for line in backward_lines), backward_return]),
        "formula_reference_py": "\n".join([*reference_lines, f"return {reference}"]),
        "formula_gradients_py": "\n".join(
            [*gradient_lines, "return " + ", ".join(f"grad_output * {gradient}" for gradient in gradients)]
        ),
    }


def _double_backward(formula: Formula, derivatives: Sequence[sp.Expr], printer: TorchPrinter) -> str:
    """The body of ``reference_<op>_double_backward``: the backward op's gradients, from second derivatives.

    The backward op maps (grad_output, inputs) to ``grad_output * d_i`` for each input i. Given the
    gradients ``gg_i`` of those outputs, its own gradients are ``sum_i gg_i d_i`` for grad_output
    and ``grad_output * sum_i gg_i d_ij`` for input j, with ``d_ij`` the second derivatives.
    """
    grad_grads = [sp.Symbol(f"_gg{i}") for i in range(len(formula.inputs))]
    grad_output = sp.Symbol("grad_output")
    results = [sp.Add(*(gg * d for gg, d in zip(grad_grads, derivatives, strict=True)))]
    for second in formula.inputs:
        seconds = [formula.second_derivative(first, second) for first in formula.inputs]
        results.append(grad_output * sp.Add(*(gg * d for gg, d in zip(grad_grads, seconds, strict=True))))
    lines, printed = _statements(results, printer, "")
    names = ", ".join(g.name for g in grad_grads)
    unpack = f"{names}{',' if len(grad_grads) == 1 else ''} = grad_grads"
    return "\n".join([unpack, *lines, "return " + ", ".join(printed) + ("," if len(printed) == 1 else "")])


def torch_function(expr: sp.Expr, formula: Formula) -> str:
    """``expr`` (the formula or a derivative) as a PyTorch expression over its inputs and params."""
    return TorchPrinter([p.name for p in formula.params], like=formula.inputs[0])(expr)

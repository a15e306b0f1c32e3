"""Textbook forms rewritten into the stable forms a careful numerics person would write.

Applied to the parsed formula and to every derivative, before anything is printed, so the kernels
and the reference compute the same stable form:

==============================  ===================  =====================================================
written                         computed as          why
==============================  ===================  =====================================================
``c + c*erf(u)``, ``c - c*erf(u)``  ``c*erfc(-u)``, ``c*erfc(u)``  ``1 + erf(u)`` cancels to 0 for u below -4 or so
``log(1 + u)``                  ``log1p(u)``         ``1 + u`` drops the digits of a small ``u``
``log1p(exp(u))``               ``softplus(u)``      ``exp(u)`` overflows past 88 (float32)
``c*exp(u) - c``                ``c*expm1(u)``       cancels for small ``u``
``1 / (1 + exp(-u))``           ``sigmoid(u)``       inf / inf, and a division less
``exp(u) * sigmoid(-u)``        ``sigmoid(u)``       inf * 0 = NaN for large ``u``
``log(sigmoid(u))``             ``logsigmoid(u)``    ``sigmoid`` rounds to 0, then log gives -inf
``log(exp(u))``                 ``u``                overflow, then log of inf
``log(c*exp(u))``               ``log(c) + u``       the same (``log(exp(u) + exp(u))``)
``sqrt(a**2 + b**2)``           ``hypot(a, b)``      the squares overflow past 1.8e19 (float32)
``log(exp(a) + exp(b))``        ``logaddexp(a, b)``  both exponentials overflow
==============================  ===================  =====================================================

``rsqrt(a**2 + b**2)`` becomes ``1 / hypot(a, b)``; a positive number ``c`` counts as the square
of ``sqrt(c)`` (``sqrt(x**2 + 1)`` is ``hypot(x, 1)``).
"""

from __future__ import annotations

from typing import Any

import sympy as sp

from opgen.formula.language import (
    Erf,
    Erfc,
    Exp,
    Expm1,
    Hypot,
    Log,
    Log1p,
    LogAddExp,
    LogSigmoid,
    Sigmoid,
    Softplus,
)


def stable(expr: Any) -> Any:
    """``expr`` with every textbook form above replaced by its stable form, bottom up."""
    if not isinstance(expr, sp.Basic) or expr.is_Atom:
        return expr
    args = tuple(stable(arg) for arg in expr.args)
    rebuilt = expr.func(*args) if args != expr.args else expr
    rewritten = _rewrite(rebuilt)
    return stable(rewritten) if rewritten is not None else rebuilt


def _split(term: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """``3*exp(u)`` as (3, exp(u))."""
    coefficient, rest = term.as_coeff_Mul()
    return coefficient, rest


def _rewrite(expr: Any) -> Any | None:
    """One rewrite at the top of ``expr`` (its arguments are already stable), or None."""
    if isinstance(expr, sp.Add):
        return _rewrite_sum(expr)
    if isinstance(expr, Log):
        return _rewrite_log(expr.args[0])
    if isinstance(expr, Log1p) and isinstance(expr.args[0], Exp):
        return Softplus(expr.args[0].args[0])
    if isinstance(expr, sp.Pow):
        return _rewrite_power(expr.base, expr.exp)
    if isinstance(expr, sp.Mul):
        factors = sp.Mul.make_args(expr)
        for factor in factors:
            if isinstance(factor, Exp) and Sigmoid(-factor.args[0]) in factors:
                rest = [f for f in factors if f not in (factor, Sigmoid(-factor.args[0]))]
                return sp.Mul(*rest, Sigmoid(factor.args[0]))
    return None


def _rewrite_sum(expr: sp.Add) -> Any | None:
    terms = list(sp.Add.make_args(expr))
    constants = [term for term in terms if term.is_number]
    if len(constants) != 1 or constants[0] == 0:
        return None
    c = constants[0]
    for term in terms:
        coefficient, rest = _split(term)
        replacement = None
        if isinstance(rest, Erf) and coefficient == c:
            replacement = c * Erfc(-rest.args[0])  # c + c erf(u) = c erfc(-u)
        elif isinstance(rest, Erf) and coefficient == -c:
            replacement = c * Erfc(rest.args[0])  # c - c erf(u) = c erfc(u)
        elif isinstance(rest, Exp) and coefficient == -c:
            replacement = coefficient * Expm1(rest.args[0])  # k exp(u) - k = k expm1(u)
        if replacement is not None:
            others = [t for t in terms if t is not term and t is not c]
            return sp.Add(*others, replacement)
    return None


def _rewrite_log(arg: Any) -> Any | None:
    if isinstance(arg, Exp):
        return arg.args[0]
    if isinstance(arg, sp.Mul):  # log(c exp(u)) = log(c) + u for a number c > 0 (sympy's exp(u) + exp(u))
        coefficient, rest = arg.as_coeff_Mul()
        if coefficient.is_positive and coefficient != 1 and isinstance(rest, Exp):
            return sp.log(coefficient) + rest.args[0]
    if isinstance(arg, Sigmoid):
        return LogSigmoid(arg.args[0])
    if isinstance(arg, sp.Add):
        terms = sp.Add.make_args(arg)
        if sp.Integer(1) in terms:
            return Log1p(sp.Add(*(t for t in terms if t != 1)))
        if len(terms) == 2 and all(isinstance(t, Exp) for t in terms):
            return LogAddExp(terms[0].args[0], terms[1].args[0])
    return None


def _square_root_of(term: sp.Expr) -> sp.Expr | None:
    """``u`` for ``u**2``, ``sqrt(c)`` for a positive number ``c``; else None."""
    if isinstance(term, sp.Pow) and term.exp == 2:
        return term.base
    if term.is_number and term.is_positive:
        return sp.sqrt(term)
    return None


def _rewrite_power(base: Any, exponent: Any) -> Any | None:
    if exponent == -1 and isinstance(base, sp.Add):
        terms = sp.Add.make_args(base)
        if len(terms) == 2 and sp.Integer(1) in terms:
            other = terms[0] if terms[1] == 1 else terms[1]
            if isinstance(other, Exp):
                return Sigmoid(-other.args[0])  # 1 / (1 + exp(-u)) = sigmoid(u)
    if exponent in (sp.S.Half, -sp.S.Half) and isinstance(base, sp.Add):
        terms = sp.Add.make_args(base)
        if len(terms) == 2:
            roots = [_square_root_of(term) for term in terms]
            if all(root is not None for root in roots) and not all(term.is_number for term in terms):
                a, b = roots if not roots[0].is_number else roots[::-1]  # type: ignore[union-attr]
                hypot = Hypot(a, b)
                return hypot if exponent == sp.S.Half else 1 / hypot
    return None

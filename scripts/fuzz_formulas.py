"""Fuzz the formula compiler: draw formulas with hypothesis, then render, build and test them with opgen.

Every formula goes through opgen's normal commands, all in one workspace and one build.

    python3 scripts/fuzz_formulas.py --count 200 --seed 0 --workspace /tmp/fuzz/generated_ops -j 16
    python3 scripts/fuzz_formulas.py --count 8 --list        # only print the formulas

Formulas: 1 to 3 inputs (x, y, z), 0 to 2 params (alpha, beta), depth up to 4, every function of
the language (opgen.formula.FUNCTIONS), where() with every comparison. They are drawn to be
defined on all reals (a log, sqrt or rsqrt takes a positive argument, an exp a bounded one), so
that gradcheck's finite differences and the float64 reference are meaningful at random inputs.
Exit status 1 if any op fails to render, build or pass its tests; the failing ops are listed.
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from opgen.errors import InvalidFormula
from opgen.formula import Param, parse_formula

INPUTS = ("x", "y", "z")
PARAMS = {"alpha": 1.5, "beta": 0.75}
NUMBERS = ("0.5", "2", "3", "0.25", "1.5")
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
ANY_REAL = ("tanh", "sin", "cos", "sigmoid", "softplus", "erf", "erfc", "abs", "logsigmoid")


@dataclass(frozen=True)
class Case:
    formula: str
    params: tuple[Param, ...]

    def command(self, name: str) -> list[str]:
        options = [f"--param={p.name}={p.default}" for p in self.params]
        return ["opgen", "new", name, "--formula", self.formula, *options]


def expression(rng: random.Random, depth: int, names: tuple[str, ...]) -> str:
    """A random formula of depth at most ``depth`` over ``names``, defined on all reals."""
    if depth == 0 or rng.random() < 0.15:
        return rng.choice(names) if depth == 0 or rng.random() < 0.8 else rng.choice(NUMBERS)

    def sub() -> str:
        return expression(rng, depth - 1, names)

    kind = rng.choice(KINDS)
    if kind == "arithmetic":
        return f"({sub()} {rng.choice(('+', '-', '*'))} {sub()})"
    if kind == "divide":  # by something positive
        return f"({sub()} / (({sub()})**2 + 1))"
    if kind == "power":
        return f"({sub()})**{rng.choice(('2', '3'))}"
    if kind == "unary":
        return f"{rng.choice(ANY_REAL)}({sub()})"
    if kind == "positive":  # log, sqrt, rsqrt of something positive
        argument = rng.choice(("({})**2 + 1", "abs({}) + 0.5", "exp({}) + 1", "sigmoid({})", "softplus({}) + 0.25"))
        return f"{rng.choice(('log', 'sqrt', 'rsqrt'))}({argument.format(sub())})"
    if kind == "log1p":
        return f"log1p(({sub()})**2)"
    if kind == "exp":  # of something bounded above
        argument = rng.choice(("{}", "3*tanh({})", "2*sin({})", "-abs({})", "-({})**2", "4*sigmoid({})", "erfc({})"))
        inner = rng.choice(names) if argument == "{}" else sub()
        return f"{rng.choice(('exp', 'expm1'))}({argument.format(inner)})"
    if kind == "binary":
        return f"{rng.choice(('min', 'max', 'hypot', 'logaddexp'))}({sub()}, {sub()})"
    if kind == "where":
        return f"where({sub()} {rng.choice(COMPARISONS)} {sub()}, {sub()}, {sub()})"
    # kind == "textbook": the forms the compiler rewrites, with random arguments
    a, b = sub(), sub()
    return rng.choice((
        f"{rng.choice(names)}*0.5*(1 + erf(({a})/sqrt(2)))", f"1/(1 + exp(-({a})))", f"(1 - erf({a}))",
        f"sqrt(({a})*({a}) + ({b})*({b}))", f"log(exp({a}) + exp({b}))", f"log(sigmoid({a}))",
        f"(exp(-abs({a})) - 1)", f"log(1 + ({a})**2)", f"log(1 + exp({a}))",
    ))  # fmt: skip


KINDS = ("arithmetic", "arithmetic", "divide", "power", "unary", "unary", "positive", "log1p", "exp", "binary",
         "where", "textbook")  # fmt: skip


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A formula: hypothesis draws its inputs, params and depth, and the seed of its tree's shape."""
    inputs = INPUTS[: draw(st.integers(1, 3))]
    params = tuple(draw(st.lists(st.sampled_from(tuple(PARAMS)), max_size=2, unique=True)))
    rng = draw(st.randoms(use_true_random=False))
    text = expression(rng, draw(st.integers(1, 4)), inputs + params)
    return Case(text, tuple(Param(name, PARAMS[name]) for name in params if re.search(rf"\b{name}\b", text)))


def sample(count: int, seed_value: int) -> list[Case]:
    """``count`` distinct formulas that parse, drawn reproducibly from ``seed_value``.

    Each formula is the last of a short hypothesis run with its own seed: the first examples of a
    run are hypothesis's simplest (``x``) and the next ones mutations of each other.
    """
    found: dict[str, Case] = {}
    attempt = 0
    while len(found) < count and attempt < count * 20:
        drawn: list[Case] = []

        @seed(seed_value * 100_003 + attempt)
        @settings(
            max_examples=3, database=None, deadline=None, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )  # fmt: skip
        @given(cases())
        def collect(case: Case) -> None:
            drawn.append(case)  # noqa: B023 (run at once, in this iteration)

        collect()
        attempt += 1
        case = drawn[-1]
        if case.formula in found or len(case.formula) > 400:
            continue
        try:
            parse_formula(case.formula, case.params)
        except InvalidFormula:
            continue  # a name cancelled out, a param left unused: not an op
        found[case.formula] = case
    return list(found.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workspace", default="generated_ops")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("-k", default="", help="pytest -k selection for each op's tests (all when empty)")
    parser.add_argument("--cpu-only", action="store_true")
    parser.add_argument("--list", action="store_true", help="print the formulas and their commands, then stop")
    args = parser.parse_args()
    chosen = sample(args.count, args.seed)
    names = [f"fuzz{index:03d}" for index in range(len(chosen))]
    for name, case in zip(names, chosen, strict=True):
        print(name, case.formula, " ".join(f"{p.name}={p.default}" for p in case.params), flush=True)
    if args.list:
        return 0
    failed: list[str] = []
    for name, case in zip(names, chosen, strict=True):
        if subprocess.run([*case.command(name), "--workspace", args.workspace, "--force"]).returncode != 0:
            failed.append(f"{name} (render)")
    build = ["opgen", "build", *names, "-j", str(args.jobs), "--workspace", args.workspace]
    subprocess.run(build + (["--cpu-only"] if args.cpu_only else []))
    for name in names:
        test = ["opgen", "test", name, "--workspace", args.workspace, *(["-k", args.k] if args.k else [])]
        if subprocess.run(test).returncode != 0:
            failed.append(name)
    print(f"{len(names) - len(failed)} of {len(names)} fuzzed formulas pass", *failed, sep="\n  ", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

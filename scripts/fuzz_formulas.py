"""Fuzz the formula compiler: hypothesis draws formulas over the whole language, opgen renders,
builds and tests each one through its normal commands (one workspace, one build).

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
SMOOTH_BOUNDED = ("tanh", "sin", "cos", "sigmoid", "erf", "erfc")  # bounded results: safe inside exp
ANY_REAL = ("tanh", "sin", "cos", "sigmoid", "softplus", "erf", "erfc", "abs", "logsigmoid")


@dataclass(frozen=True)
class Case:
    formula: str
    params: tuple[Param, ...]

    def command(self, name: str) -> list[str]:
        options = [f"--param={p.name}={p.default}" for p in self.params]
        return ["opgen", "new", name, "--formula", self.formula, *options]


def expressions(depth: int, names: tuple[str, ...]) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(names + NUMBERS) if depth > 0 else st.sampled_from(names)
    if depth == 0:
        return leaf
    sub = st.deferred(lambda: expressions(depth - 1, names))
    positive = st.one_of(  # arguments of log, sqrt, rsqrt: never <= 0
        sub.map(lambda e: f"({e})**2 + 1"), sub.map(lambda e: f"abs({e}) + 0.5"), sub.map(lambda e: f"exp({e}) + 1"),
        sub.map(lambda e: f"sigmoid({e})"), sub.map(lambda e: f"softplus({e}) + 0.25"),
    )  # fmt: skip
    bounded = st.one_of(  # arguments of exp and expm1: never far past 20
        st.sampled_from(names), st.tuples(st.sampled_from(SMOOTH_BOUNDED), sub).map(lambda p: f"3*{p[0]}({p[1]})"),
        sub.map(lambda e: f"-abs({e})"), sub.map(lambda e: f"-({e})**2"),
    )  # fmt: skip
    return st.one_of(
        leaf,
        st.tuples(sub, st.sampled_from(("+", "-", "*")), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(sub, sub).map(lambda t: f"({t[0]} / (({t[1]})**2 + 1))"),
        st.tuples(sub, st.sampled_from(("2", "3"))).map(lambda t: f"({t[0]})**{t[1]}"),
        st.tuples(st.sampled_from(ANY_REAL), sub).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(st.sampled_from(("log", "sqrt", "rsqrt")), positive).map(lambda t: f"{t[0]}({t[1]})"),
        sub.map(lambda e: f"log1p(({e})**2)"),
        st.tuples(st.sampled_from(("exp", "expm1")), bounded).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(st.sampled_from(("min", "max", "hypot", "logaddexp")), sub, sub).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
        st.tuples(sub, st.sampled_from(COMPARISONS), sub, sub, sub).map(
            lambda t: f"where({t[0]} {t[1]} {t[2]}, {t[3]}, {t[4]})"
        ),
        # The textbook forms the compiler rewrites, with random arguments.
        sub.map(lambda e: f"x*0.5*(1 + erf(({e})/sqrt(2)))"), sub.map(lambda e: f"1/(1 + exp(-({e})))"),
        st.tuples(sub, sub).map(lambda t: f"sqrt(({t[0]})*({t[0]}) + ({t[1]})*({t[1]}))"),
        st.tuples(sub, sub).map(lambda t: f"log(exp({t[0]}) + exp({t[1]}))"),
        sub.map(lambda e: f"log(sigmoid({e}))"), sub.map(lambda e: f"(exp(-abs({e})) - 1)"),
    )


@st.composite
def cases(draw: st.DrawFn) -> Case:
    inputs = INPUTS[: draw(st.integers(1, 3))]
    params = tuple(draw(st.lists(st.sampled_from(tuple(PARAMS)), max_size=2, unique=True)))
    text = draw(expressions(draw(st.integers(1, 4)), inputs + params))
    return Case(text, tuple(Param(name, PARAMS[name]) for name in params if name in text))


def sample(count: int, seed_value: int) -> list[Case]:
    """``count`` distinct formulas that parse, drawn reproducibly from ``seed_value``."""
    found: dict[str, Case] = {}

    @seed(seed_value)
    @settings(
        max_examples=count * 20, database=None, deadline=None, phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(cases())
    def collect(case: Case) -> None:
        if len(found) >= count or case.formula in found or len(case.formula) > 400:
            return
        try:
            parse_formula(case.formula, case.params)
        except InvalidFormula:
            return  # a name cancelled out, a param left unused: not an op
        found[case.formula] = case

    collect()
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

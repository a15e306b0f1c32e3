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
import concurrent.futures
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

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


def read_list(path: str) -> list[tuple[str, Case]]:
    """The ``--list`` output read back: lines ``NAME FORMULA [PARAM=DEFAULT ...]``."""
    cases = []
    for line in open(path):
        name, _, rest = line.rstrip("\n").partition(" ")
        words, params = rest.split(" "), []
        while words and (not words[-1] or re.fullmatch(r"(alpha|beta)=[0-9.]+", words[-1])):
            if word := words.pop():
                params.insert(0, Param(*word.split("=")[:1], float(word.split("=")[1])))
        cases.append((name, Case(" ".join(words), tuple(params))))
    return cases


def run_all(commands: list[tuple[str, list[str]]], parallel: int, logs: Path | None) -> list[str]:
    """Run the commands, ``parallel`` at a time; the names of those that fail."""

    def run(item: tuple[str, list[str]]) -> tuple[str, int]:
        name, command = item
        result = subprocess.run(command, capture_output=True, text=True)
        if logs is not None:
            (logs / f"{name}.log").write_text(result.stdout + result.stderr)
        elif result.returncode != 0:
            print(result.stdout[-3000:], result.stderr[-3000:], sep="\n", flush=True)
        return name, result.returncode

    with concurrent.futures.ThreadPoolExecutor(max(1, parallel)) as pool:
        return [name for name, code in pool.map(run, commands) if code != 0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--from-list", help="the formulas of a --list output instead of drawing them")
    parser.add_argument("--workspace", default="generated_ops")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="parallel compile jobs of the one build")
    parser.add_argument("--parallel", type=int, default=1, help="ops rendered and tested at once")
    parser.add_argument("-k", default="", help="pytest -k selection for each op's tests (all when empty)")
    parser.add_argument("--cpu-only", action="store_true")
    parser.add_argument("--logs", type=Path, help="a folder for each op's test log")
    parser.add_argument("--list", action="store_true", help="print the formulas and their commands, then stop")
    parser.add_argument("--steps", default="render,build,test",
                        help="which of render, build, test, large to run (large: the tests of 2^31 elements, "
                             "one op at a time in one process, since each needs most of the GPU's memory)")
    parser.add_argument("--slice", default=":", help="START:STOP[,START:STOP...], the parts of the formulas to run (chunks of a list)")
    args = parser.parse_args()
    steps = set(args.steps.split(","))
    if args.from_list:
        chosen = read_list(args.from_list)
    else:
        chosen = [(f"fuzz{index:03d}", case) for index, case in enumerate(sample(args.count, args.seed))]
    parts = []
    for part in args.slice.split(","):
        start_text, _, stop_text = part.partition(":")
        parts += chosen[int(start_text) if start_text else None : int(stop_text) if stop_text else None]
    chosen = parts
    for name, case in chosen:
        print(name, case.formula, " ".join(f"{p.name}={p.default}" for p in case.params), flush=True)
    if args.list:
        return 0
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    names = [name for name, _ in chosen]
    workspace = ["--workspace", args.workspace]
    failed: list[str] = []
    start = time.perf_counter()
    if "render" in steps:
        renders = [(name, [*case.command(name), *workspace, "--force"]) for name, case in chosen]
        # The first creates the workspace when it is missing; the others render their own folders at once.
        rendered = run_all(renders[:1], 1, None) + run_all(renders[1:], args.parallel, None)
        failed += [f"{name} (render)" for name in rendered]
        print(f"render: {time.perf_counter() - start:.0f} s", flush=True)
    if "build" in steps:
        build = ["opgen", "build", *names, "-j", str(args.jobs), *workspace, *(["--cpu-only"] if args.cpu_only else [])]
        built = subprocess.run(build, capture_output=True, text=True)
        print(built.stdout[-2000:], built.stderr[-2000:], f"build: {time.perf_counter() - start:.0f} s", sep="\n", flush=True)
    if "test" in steps:
        selection = ["-k", args.k] if args.k else []
        tests = [(name, ["opgen", "test", name, *workspace, *selection]) for name in names]
        failed += run_all(tests, args.parallel, args.logs)
        print(f"tests: {time.perf_counter() - start:.0f} s", flush=True)
    if "large" in steps:
        large = ["opgen", "test", *names, *workspace, "-k", "2_31"]
        failed += run_all([("large", large)], 1, args.logs)
        print(f"large tests: {time.perf_counter() - start:.0f} s", flush=True)
    print(f"{len(names) - len(failed)} of {len(names)} fuzzed formulas pass", *failed, sep="\n  ", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Formula ops built and tested as a user would: the textbook forms opgen rewrites (GeGLU's among
them) and a seeded sample of the fuzzer's formulas (scripts/fuzz_formulas.py), built for the CPU in
the slow tests' shared workspace (tests/shared_build.py); their generated tests (gradgradcheck
included) must pass."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import shared_build
from shared_build import SharedProject
from workspace_commands import opgen as run_opgen

ROOT = Path(__file__).resolve().parent.parent
TEXTBOOK = {
    "geglu": "x*0.5*(1+erf(y/sqrt(2)))",
    "textbook": "log(1 + x*x) + (exp(x) - 1) + 1/(1 + exp(-x)) + log(sigmoid(y)) + sqrt(x*x + y*y) + log(exp(x) + exp(y))",
}
# Two ops keep the CI build short; scripts/fuzz_formulas.py runs larger samples (docs/fuzz).
FUZZ_SAMPLE, FUZZ_SEED = 2, 2


def fuzz_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("fuzz_formulas", ROOT / "scripts" / "fuzz_formulas.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def opgen(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_opgen(*args, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})


FUZZ_OPS = {f"fuzz{index}": case.command(f"fuzz{index}")[3:] for index, case in enumerate(fuzz_module().sample(FUZZ_SAMPLE, FUZZ_SEED))}
OPS = shared_build.join({**{name: ["--formula", formula] for name, formula in TEXTBOOK.items()}, **FUZZ_OPS}, workspace="one")


@pytest.fixture
def built(shared_projects: Callable[[str], SharedProject]) -> tuple[Path, list[str]]:
    return shared_projects("one").root, OPS


@pytest.mark.slow
def test_textbook_forms_and_the_fuzz_sample_pass_their_generated_tests(built: tuple[Path, list[str]]) -> None:
    root, names = built
    # The checks against the reference, hostile values, gradcheck and gradgradcheck, on the CPU.
    selection = "cpu and (matches_reference or nan_and_infinities or gradcheck or gradgradcheck)"
    result = opgen("test", *names, "-k", selection, cwd=root)
    assert result.returncode == 0, result.stdout[-4000:]
    assert " passed" in result.stdout and " failed" not in result.stdout, result.stdout[-4000:]

from __future__ import annotations

import ast
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from opgen.cli import app
from opgen.errors import InvalidFormula, UsageError
from opgen.formula import Formula, Param, parse_formula, parse_param, render_formula, torch_function
from opgen.render import new_op
from opgen.workspace import Workspace

JINJA_RESIDUE = re.compile(r"\{\{|\{%|\{#|%\}|#\}")

# The seeds' ops: name -> (formula, params, the same function written by hand in torch).
SEEDS: dict[str, tuple[str, list[Param], Any]] = {
    "mish": ("x*tanh(log(1+exp(x)))", [], lambda x: torch.nn.functional.mish(x)),
    "relu_scale": ("max(x, 0)*alpha", [Param("alpha", 1.5)], lambda x: torch.relu(x) * 1.5),
    "silu": ("x*sigmoid(x)", [], torch.nn.functional.silu),
    "softplus": ("log(1 + exp(x))", [], torch.nn.functional.softplus),
    "gelu_tanh": (
        "0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x**3)))",
        [],
        lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    ),
}


def compile_torch(source: str, formula: Formula) -> Any:
    """A Python function of the formula's input and params from printed PyTorch code."""
    names = [*formula.inputs, *(p.name for p in formula.params)]
    code = f"lambda {', '.join(names)}: {source}"
    ast.parse(code, mode="eval")
    return eval(code, {"torch": torch})  # our own printer's output, never the user's text


def reference_of(formula: Formula) -> Any:
    """The rendered reference function, executed from the answers the template receives."""
    answers = render_formula(formula)
    params = ", ".join(f"{p.name}={p.default!r}" for p in formula.params)
    conversions = "".join(f"    {p.name} = {formula.inputs[0]}.new_tensor({p.name})\n" for p in formula.params)
    body = "\n".join("    " + line for line in answers["formula_reference_py"].splitlines())
    source = f"def reference({formula.inputs[0]}{', ' if params else ''}{params}):\n{conversions}{body}\n"
    namespace: dict[str, Any] = {"torch": torch}
    exec(source, namespace)
    return namespace["reference"]


def probe_points() -> torch.Tensor:
    # Random values, the non-differentiable points and ties, and large magnitudes.
    values = torch.randn(200, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 3
    return torch.cat([values, torch.tensor([0.0, -0.0, 1.0, -1.0, 8.0, -8.0, 20.0, -20.0], dtype=torch.float64)])


@pytest.mark.parametrize("name", list(SEEDS))
def test_seed_reference_matches_torch(name: str) -> None:
    text, params, by_hand = SEEDS[name]
    reference = reference_of(parse_formula(text, params))
    x = probe_points()
    torch.testing.assert_close(reference(x), by_hand(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(SEEDS))
def test_derivative_matches_autograd_of_the_reference(name: str) -> None:
    text, params, by_hand = SEEDS[name]
    formula = parse_formula(text, params)
    derivative = compile_torch(torch_function(formula.derivative("x"), formula), formula)
    x = probe_points().requires_grad_()
    reference_of(formula)(x).sum().backward()
    assert x.grad is not None
    values = [x.detach().new_tensor(p.default) for p in formula.params]
    expected = derivative(x.detach(), *values) * torch.ones_like(x)
    torch.testing.assert_close(expected, x.grad, rtol=1e-10, atol=1e-12)
    # and against torch's own op, including its sub-gradient at 0
    x_hand = x.detach().clone().requires_grad_()
    by_hand(x_hand).sum().backward()
    torch.testing.assert_close(expected, x_hand.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    ("text", "params", "torch_form"),
    [
        ("abs(x)", [], torch.abs),
        ("max(x, 0)", [], torch.relu),
        ("min(x, 1) + max(2, x)", [], lambda x: torch.where(x >= 1, 1.0, x) + torch.where(x <= 2, 2.0, x)),
        ("where(x > 0, x, alpha*expm1(x))", [Param("alpha", 1.0)], torch.nn.functional.elu),
        ("log1p(x*x) + rsqrt(1 + x**2) + sqrt(abs(x)) + sin(x)*cos(x) + erf(x) + x**-2",
         [], lambda x: torch.log1p(x * x) + torch.rsqrt(1 + x**2) + torch.sqrt(x.abs()) + x.sin() * x.cos() + torch.erf(x) + x**-2),
        ("exp(beta)*x/(1 + alpha) - pi", [Param("alpha", 0.5), Param("beta", -1.0)], lambda x: math.exp(-1) * x / 1.5 - math.pi),
    ],
)  # fmt: skip
def test_language_values_and_gradients(text: str, params: list[Param], torch_form: Any) -> None:
    formula = parse_formula(text, params)
    x = torch.cat([probe_points()[probe_points() != 0], torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)])
    x = x.requires_grad_()
    reference = reference_of(formula)(x)
    torch.testing.assert_close(reference, torch_form(x.detach()), rtol=1e-12, atol=1e-12, equal_nan=True)
    reference.sum().backward()
    values = [x.new_tensor(p.default) for p in formula.params]
    derivative = compile_torch(torch_function(formula.derivative("x"), formula), formula)
    expected = derivative(x.detach(), *values) * torch.ones_like(x)
    torch.testing.assert_close(expected, x.grad, rtol=1e-10, atol=1e-12, equal_nan=True)


def test_inputs_and_params_in_order_of_appearance() -> None:
    formula = parse_formula("alpha * z + z**2", [Param("alpha", 2.0)])
    assert formula.inputs == ("z",)
    assert [p.name for p in formula.params] == ["alpha"]
    answers = render_formula(formula)
    assert answers["formula_inputs"] == ["z"]
    assert answers["formula_params"] == [{"name": "alpha", "default": 2.0}]


def test_functions_are_not_rewritten_by_sympy() -> None:
    # sympy's own tanh(log(u)) is (u**2 - 1)/(u**2 + 1), which overflows long before mish does.
    answers = render_formula(parse_formula("x*tanh(log(1+exp(x)))"))
    assert "std::tanh(std::log(" in answers["formula_forward_cpp"]
    assert "torch.tanh(torch.log(" in answers["formula_reference_py"]


def test_printed_code_holds_only_code_from_the_parse() -> None:
    # Comments and odd spacing in the user's text never reach the generated code.
    answers = render_formula(parse_formula('x *  (1 + x) # evil */ """ import os'))
    generated = "".join(str(value) for key, value in answers.items() if key != "formula")
    assert "evil" not in generated and "import" not in generated and "#" not in generated


def test_parse_param() -> None:
    assert parse_param("alpha=1.5") == Param("alpha", 1.5)
    assert parse_param(" eps = 1e-6") == Param("eps", 1e-6)
    for bad in ["alpha", "alpha=abc", "alpha=nan", "alpha=inf", "class=1", "_a=1", "2a=1", "exp=1"]:
        with pytest.raises(InvalidFormula):
            parse_param(bad)


BAD_FORMULAS: dict[str, tuple[str, list[str], str]] = {
    # class: (formula, --param options, a part of the message)
    "syntax error": ("x * (1 +", [], "syntax error"),
    "unknown function": ("x * foo(x)", [], "unknown function 'foo'"),
    "no tensor input": ("alpha * 2", ["alpha=1"], "no tensor input"),
    "param named like an input": ("z * x", ["x=1"], "named like an input"),
    "python keyword": ("x + lambda_ + None", [], "NoneType constants are not allowed"),
    "python keyword name": ("x + match", [], "Python keyword"),
    "c++ keyword": ("x * float", [], "C++ keyword"),
    "c++ keyword param": ("x * template", ["template=1"], "C++ keyword"),
    "dunder call": ("__import__('os')", [], "unknown function '__import__'"),
    "dunder name": ("x + __builtins__", [], "starts with '_'"),
    "attribute": ("x.real", [], "Attribute is not allowed"),
    "attribute call": ("torch.exp(x)", [], "only the formula language's functions"),
    "lambda": ("lambda: x", [], "Lambda is not allowed"),
    "assignment": ("x = 1", [], "syntax error"),
    "walrus": ("(y := x)", [], "NamedExpr is not allowed"),
    "import": ("import os", [], "syntax error"),
    "string": ("x + 'a'", [], "str constants"),
    "subscript": ("x[0]", [], "Subscript is not allowed"),
    "comprehension": ("[x for x in y]", [], "ListComp is not allowed"),
    "bare comparison": ("x > 0", [], "only allowed as the condition of where"),
    "keyword argument": ("exp(x=1)", [], "positional arguments only"),
    "wrong arity": ("max(x)", [], "takes 2 arguments"),
    "function as a name": ("exp * x", [], "is a function"),
    "reserved name": ("grad_output * 2", [], "generated code uses"),
    "unused param": ("x * 2", ["alpha=1"], "does not appear"),
    "duplicate param": ("x * alpha", ["alpha=1", "alpha=2"], "given twice"),
    "huge power": ("x * 9**9**9", [], "not a finite real number"),
    "two inputs (not yet)": ("x * sigmoid(y)", [], "only unary formulas"),
    "floor division": ("x // 2", [], "FloorDiv is not allowed"),
    "empty": ("  ", [], "empty"),
}


@pytest.mark.parametrize("case", list(BAD_FORMULAS))
def test_bad_formulas_exit_2_and_write_nothing(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPGEN_WORKSPACE", raising=False)
    text, params, message = BAD_FORMULAS[case]
    ws = tmp_path / "generated_ops"
    args = ["new", "my_formula", "--formula", text, "--workspace", str(ws)]
    for param in params:
        args += ["--param", param]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0].startswith("error: invalid"), result.stderr
    assert message in result.stderr, result.stderr
    assert "hint:" in result.stderr
    assert not ws.exists()


def test_invalid_formula_is_a_usage_error() -> None:
    with pytest.raises(InvalidFormula) as caught:
        parse_formula("x * foo(x)")
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, UsageError)
    assert caught.value.exit_code == 2 and "column" in str(caught.value)


def test_param_without_formula_and_rowwise_formula_are_refused(workspace: Workspace) -> None:
    with pytest.raises(InvalidFormula, match="--param needs --formula"):
        new_op("my_op", workspace=workspace, params=["alpha=1"])
    with pytest.raises(InvalidFormula, match="not rowwise"):
        new_op("my_op", kind="rowwise", workspace=workspace, formula="x * 2")
    assert not workspace.path.exists()


def test_formula_op_renders_clean_files(workspace: Workspace) -> None:
    folder = new_op("relu_scale", workspace=workspace, formula="max(x, 0)*alpha", params=["alpha=1.5"])
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        text = path.read_text()
        assert not JINJA_RESIDUE.search(text), path.name
        if path.suffix == ".py":
            ast.parse(text, filename=str(path))
    schema = (folder / "csrc" / "relu_scale.cpp").read_text()
    assert "relu_scale(Tensor x, float alpha=1.5) -> Tensor" in schema
    module = (folder / "__init__.py").read_text()
    assert "def relu_scale(x: torch.Tensor, alpha: float = 1.5)" in module
    answers = (folder / ".copier-answers.yml").read_text()
    assert "recipe: formula" in answers and "formula: max(x, 0)*alpha" in answers
    assert "formula_forward_cpp" in answers and "formula_params" in answers
    tests = (folder / "test_relu_scale.py").read_text()
    assert 'PARAMS: list[dict[str, Any]] = [{"alpha": 1.5}]' in tests
    assert "test_bad_alpha" not in tests  # a float has no bad value


def test_several_params_all_reach_the_tests(workspace: Workspace) -> None:
    folder = new_op("scaled", workspace=workspace, formula="alpha*x + beta", params=["alpha=2", "beta=-0.5"])
    tests = (folder / "test_scaled.py").read_text()
    assert 'PARAMS: list[dict[str, Any]] = [{"alpha": 2.0, "beta": -0.5}]' in tests
    schema = (folder / "csrc" / "scaled.cpp").read_text()
    assert "float alpha=2.0, float beta=-0.5" in schema


# --- Slow: build and run the generated tests (CPU kernels; gradcheck in float64). --------------------


def opgen(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "opgen", *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.slow
def test_formula_ops_build_and_pass_their_tests(tmp_path: Path) -> None:
    assert opgen("new", "mish", "--formula", "x*tanh(log(1+exp(x)))", cwd=tmp_path).returncode == 0
    made = opgen("new", "relu_scale", "--formula", "max(x, 0)*alpha", "--param", "alpha=1.5", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    build = opgen("build", "mish", "relu_scale", "--cpu-only", cwd=tmp_path)
    assert build.returncode == 0, build.stdout + build.stderr
    result = opgen("test", "mish", "relu_scale", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
    gradcheck = opgen("test", "mish", "relu_scale", "-k", "gradcheck", cwd=tmp_path)
    assert gradcheck.returncode == 0 and " passed" in gradcheck.stdout, gradcheck.stdout[-3000:]

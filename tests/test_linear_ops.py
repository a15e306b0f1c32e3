"""linear_gelu and `opgen new --kind linear --activation`, for real: render, build once (in the
slow tests' shared workspace, tests/shared_build.py), pass the generated tests, and fail them once
a kernel is edited but not the reference; and the refusals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import shared_build
from shared_build import SharedProject
from workspace_commands import assert_generated_tests_fail, assert_python_runs, opgen

LINEAR_OPS = {
    "linear_gelu": [],
    "lin_relu": ["--kind", "linear", "--activation", "relu"],
}


@pytest.fixture
def project(shared_projects: Callable[[str], SharedProject]) -> Path:
    """linear_gelu builds as `opgen build` decides (its cuBLASLt host code compiles and links where a
    CUDA toolkit is found, as in CI); lin_relu for the CPU only."""
    return shared_projects("two").root


@pytest.mark.slow
def test_linear_ops_pass_their_generated_tests_as_generated(project: Path) -> None:
    result = opgen("test", *LINEAR_OPS, cwd=project)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary, summary


@pytest.mark.slow
def test_module_is_an_nn_linear_drop_in(project: Path) -> None:
    check = (
        "import torch, torch.nn.functional as F, generated_ops as g\n"
        "from generated_ops.linear_gelu import LinearGelu\n"
        "plain = torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.GELU(approximate='tanh'))\n"
        "fused = LinearGelu(16, 24)\n"
        "fused.load_state_dict(plain[0].state_dict())\n"
        "x = torch.randn(2, 3, 16)\n"
        "torch.testing.assert_close(fused(x), plain(x))\n"
        "assert isinstance(fused, torch.nn.Linear) and 'approximate' in repr(fused)\n"
        "y = g.lin_relu(x, plain[0].weight, plain[0].bias)\n"
        "torch.testing.assert_close(y, F.relu(plain[0](x)))\n"
    )
    assert_python_runs(check, project)


# Deliberately broken stand-ins: a kernel edited, its reference not. The generated tests must fail.
BROKEN = {
    # the forward computes exact GELU where the op's `approximate` asks for the tanh form
    "linear_gelu": (
        "linear_gelu_cpu.cpp",
        "opgen::linear::forward_aten(activation, x, weight, bias, out2, pre2);",
        "opgen::linear::forward_aten(opgen::linear::Activation::kGelu, x, weight, bias, out2, pre2);",
    ),
    # the backward forgets ReLU's derivative
    "lin_relu": (
        "lin_relu_cpu.cpp",
        "opgen::linear::activation_backward(\n      activation, grad2, pre2, opgen::linear::as_rows(out, rows, features));",
        "grad2.contiguous();",
    ),
}


shared_build.join(LINEAR_OPS, workspace="two", cuda=["linear_gelu"], broken=BROKEN)


@pytest.mark.slow
def test_broken_stand_ins_fail_their_generated_tests(project: Path) -> None:
    # -k: the CPU checks that see these two mistakes, not the whole file again.
    broken = [shared_build.broken_name(name) for name in BROKEN]
    assert_generated_tests_fail(project, broken, "-k", "cpu and (matches_reference or gradcheck)")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--kind", "linear", "--activation", "x*y"], "a formula of one input"),
        (["--kind", "linear", "--activation", "x**"], "invalid formula"),
        (["--kind", "rowwise", "--activation", "relu"], "make a linear op, not rowwise"),
        (["--kind", "linear", "--formula", "x*2"], "--kind linear takes no --formula"),
    ],
)
def test_bad_linear_options_are_refused_and_write_nothing(tmp_path: Path, options: list[str], message: str) -> None:
    result = opgen("new", "lin_bad", *options, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr, result.stderr
    assert not (tmp_path / "generated_ops" / "lin_bad").exists()

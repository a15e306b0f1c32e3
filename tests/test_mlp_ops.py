"""`opgen new --kind mlp`, for real: render a 2-layer and an 8-layer network, build once for the
CPU (in the slow tests' shared workspace, tests/shared_build.py), pass their generated CPU tests,
fail them once a kernel is edited but not the reference; and the refusals of bad options."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import shared_build
from shared_build import SharedProject
from workspace_commands import assert_generated_tests_fail, assert_python_runs, opgen

MLP_OPS = {
    # 2 layers, odd widths like the seeds' (100 in, 10 out), no bias, SiLU (its derivative reads the
    # pre-activation)
    "mlp_two": ["--kind", "mlp", "--widths", "100,7,10", "--activation", "silu", "--no-bias"],
    # 8 layers, odd widths, tanh GELU between layers and SiLU after the last; narrow, so that float64
    # gradcheck of every weight (a numerical derivative per element) stays under a minute on a CPU
    "mlp_deep": "--kind mlp --widths 9,16,33,8,16,12,12,20,5 --activation gelu_tanh --output-activation silu".split(),
}


@pytest.fixture
def project(shared_projects: Callable[[str], SharedProject]) -> Path:
    """Both ops built for the CPU (the GPU session builds and tests their CUDA kernels)."""
    return shared_projects("one").root


@pytest.mark.slow
def test_mlp_ops_pass_their_generated_cpu_tests(project: Path) -> None:
    # The CPU half of the generated tests: forward for every dtype, gradients and float64
    # gradcheck of x and every weight and bias, batches 0, 1 and past a block, opcheck, the
    # nn.Sequential drop-in, refused arguments.
    result = opgen("test", *MLP_OPS, "-k", "cpu", cwd=project)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary, summary


@pytest.mark.slow
def test_module_loads_an_nn_sequential(project: Path) -> None:
    check = (
        "import torch\n"
        "from generated_ops.mlp_two import MlpTwo\n"
        "plain = torch.nn.Sequential(torch.nn.Linear(100, 7, bias=False), torch.nn.SiLU(), torch.nn.Linear(7, 10, bias=False))\n"
        "fused = MlpTwo.from_sequential(plain)\n"
        "x = torch.randn(4, 7, 100)\n"
        "torch.testing.assert_close(fused(x), plain(x))\n"
        "fused.load_state_dict(plain.state_dict())\n"
        "torch.testing.assert_close(fused.to_sequential()(x), plain(x))\n"
    )
    assert_python_runs(check, project)


# Deliberately broken stand-ins: a kernel edited, its reference not. The generated tests must fail.
BROKEN = {
    # the 16-bit forward is 2% off everywhere: inside bfloat16's elementwise tolerance (6%), not in
    # norm (the test class's forward_norm_tolerance: 1%, eager's own error about 0.3%)
    "mlp_two": ("mlp_two_cpu.cpp", "  return {y, saved};", "  if (x.element_size() == 2) y.mul_(1.02);\n  return {y, saved};"),
    # the backward doubles the incoming gradient
    "mlp_deep": ("mlp_deep_cpu.cpp", "_op::network(), grad_y, x,", "_op::network(), grad_y.mul(2), x,"),
}


shared_build.join(MLP_OPS, workspace="one", broken=BROKEN)


@pytest.mark.slow
def test_broken_stand_ins_fail_their_generated_tests(project: Path) -> None:
    broken = [shared_build.broken_name(name) for name in BROKEN]
    assert_generated_tests_fail(project, broken, "-k", "cpu and (matches_reference or gradcheck)")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--kind", "mlp", "--widths", "100,129,10"], "each width must be 1 to 128"),
        (["--kind", "mlp", "--widths", "100,10"], "2 to 8 layers"),
        (["--kind", "mlp", "--widths", "1,2,3,4,5,6,7,8,9,10"], "2 to 8 layers"),
        (["--kind", "mlp", "--widths", "100,x,10"], "positive integers"),
        (["--kind", "mlp"], "needs the network's widths"),
        (["--kind", "mlp", "--widths", "8,8,8", "--activation", "tanh"], "one of none, relu"),
        (["--kind", "mlp", "--widths", "8,8,8", "--output-activation", "softmax"], "one of none, relu"),
        (["--kind", "rowwise", "--widths", "8,8,8"], "use --kind mlp"),
        (["--kind", "mlp", "--widths", "8,8,8", "--formula", "x*2"], "--kind mlp takes no --formula"),
    ],
)
def test_bad_mlp_options_are_refused_and_write_nothing(tmp_path: Path, options: list[str], message: str) -> None:
    result = opgen("new", "mlp_bad", *options, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr, result.stderr
    assert not (tmp_path / "generated_ops" / "mlp_bad").exists()

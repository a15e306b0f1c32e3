"""layernorm, rmsnorm and their --residual forms (`--recipe`), for real: render, build once (CPU
kernels, in the slow tests' shared workspace, tests/shared_build.py; the GPU session builds and
tests the CUDA ones), pass the generated tests, and fail them once a kernel is edited but not the
reference."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import shared_build
import yaml
from shared_build import SharedProject
from workspace_commands import assert_generated_tests_fail, assert_python_runs, opgen

from opgen.errors import NoResidualForm, UnknownRecipe
from opgen.render import new_op
from opgen.workspace import Workspace

NORMS = {
    "layernorm": [],
    "rmsnorm": [],
    "add_rmsnorm": ["--recipe", "rmsnorm", "--residual"],
}
# What CI runs of the generated tests: every kind of check on the CPU, each kernel path in float64
# (the run on the GPU machine takes them all).
SELECTION = (
    "cpu and (forward_matches or backward_matches or gradcheck or parameters_absent or constant or huge "
    "or one_row or default_eps or outputs_and_their or deterministic or drop_in or opcheck "
    "or (every_kernel_path and float64))"
)


@pytest.fixture
def project(shared_projects: Callable[[str], SharedProject]) -> Path:
    return shared_projects("one").root


@pytest.mark.slow
def test_norms_pass_their_generated_tests_as_generated(project: Path) -> None:
    result = opgen("test", *NORMS, "-k", SELECTION, cwd=project)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary, summary


@pytest.mark.slow
def test_rendered_interfaces(project: Path) -> None:
    check = (
        "import torch, torch.nn.functional as F, generated_ops as g\n"
        "x, r = torch.randn(4, 6, dtype=torch.bfloat16), torch.randn(4, 6, dtype=torch.bfloat16)\n"
        "w = torch.randn(6)  # float32 parameters beside bfloat16 x\n"
        "y = g.layernorm(x, w, torch.randn(6)); assert y.dtype == torch.bfloat16\n"
        "out = g.add_rmsnorm(x, r, w); assert torch.equal(out.residual_out, x + r)\n"
        "from generated_ops.rmsnorm import Rmsnorm\n"
        "m = Rmsnorm(6); m.load_state_dict(torch.nn.RMSNorm(6).state_dict())\n"
        "assert torch.equal(m(x.float()), g.rmsnorm(x.float(), torch.ones(6)))\n"
        "try:\n"
        "    g.layernorm(x, torch.ones(6, dtype=torch.float16))\n"
        "except RuntimeError as error:\n"
        "    assert \"argument 'weight' must have x's dtype (BFloat16) or float32\" in str(error), error\n"
        "else:\n"
        "    raise AssertionError('a float16 weight beside a bfloat16 x was accepted')\n"
    )
    assert_python_runs(check, project)


# Deliberately broken stand-ins: a kernel edited, its reference not. The generated tests must fail.
BROKEN = {
    # Bessel's correction: the sample variance where F.layer_norm takes the population's
    "layernorm": (
        "layernorm_cpu.cpp",
        "squares / static_cast<Acc>(cols)",
        "squares / static_cast<Acc>(cols > 1 ? cols - 1 : 1)",
    ),
    # a weight gradient 1% too large
    "rmsnorm": ("rmsnorm_cpu.cpp", "chunk_w[c] += static_cast<Acc>(dy * xhat);", "chunk_w[c] += static_cast<Acc>(dy * xhat * M(1.01));"),
    # the sum output's gradient dropped from x's and residual's
    "add_rmsnorm": ("add_rmsnorm_cpu.cpp", "if (dsums) dx +=", "if (false) dx +="),
}


shared_build.join(NORMS, workspace="one", broken=BROKEN)


@pytest.mark.slow
def test_broken_stand_ins_fail_their_generated_tests(project: Path) -> None:
    assert_generated_tests_fail(project, [shared_build.broken_name(name) for name in BROKEN], "-k", SELECTION)


def test_recipe_renders_a_known_recipe_under_another_name(tmp_path: Path) -> None:
    workspace = Workspace.locate(tmp_path / "generated_ops")
    folder = new_op("add_rmsnorm", workspace=workspace, recipe="rmsnorm", residual=True)
    answers = yaml.safe_load((folder / ".copier-answers.yml").read_text())
    assert answers["recipe"] == "rmsnorm"
    spec = answers["spec"]
    assert spec["extra"] == {"centered": False, "residual": True}
    assert [a["name"] for a in spec["arguments"]] == ["x", "residual", "weight", "eps"]
    assert [o["name"] for o in spec["outputs"]] == ["output", "residual_out"]
    assert "def add_rmsnorm(" in (folder / "__init__.py").read_text()
    # --recipe works for any recipe: a second softmax under its own name
    assert (new_op("my_softmax", workspace=workspace, recipe="softmax") / "csrc" / "softmax_cuda.cu").exists()


def test_recipe_and_residual_refusals(tmp_path: Path) -> None:
    workspace = Workspace.locate(tmp_path / "generated_ops")
    with pytest.raises(UnknownRecipe, match="no recipe named 'nrom'"):
        new_op("x_norm", workspace=workspace, recipe="nrom")
    with pytest.raises(NoResidualForm, match="recipe 'softmax' has no --residual form"):
        new_op("x_softmax", workspace=workspace, recipe="softmax", residual=True)
    assert not (tmp_path / "generated_ops" / "x_norm").exists()
    result = opgen("new", "y_norm", "--recipe", "relu", "--residual", cwd=tmp_path)
    assert result.returncode == 2 and "--residual works with layernorm, rmsnorm" in result.stderr, result.stderr

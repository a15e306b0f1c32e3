"""`opgen new --signature`, bitonic_sort and matmul, for real: render, build once (in the slow
tests' shared workspace, tests/shared_build.py), pass the generated tests, and fail them once a
kernel is edited but not the reference."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import shared_build
from shared_build import SharedProject
from workspace_commands import assert_generated_tests_fail, assert_python_runs, opgen

pytestmark = pytest.mark.slow

SIGNATURES = {
    # every supported type, an optional tensor, keyword-only, two outputs one of them integer
    "sig_rich": [
        "--signature",
        "(Tensor x, Tensor? weight, int k, float eps=1e-5, bool largest=True, int[] dims=[0, 1], "
        "*, float? scale=None, int? limit=None, bool? flag=None) -> (Tensor values, Tensor indices)",
    ],
    "sig_plain": ["--signature", "(Tensor x, Tensor y) -> Tensor"],  # one output, two required tensors
    "sig_route": ["--signature", "(Tensor logits, int k=2, str mode=\"top\") -> (Tensor probs, Tensor expert)", "--int-output", "expert"],
    "sig_nograd": ["--signature", "(Tensor x, float alpha=2.0) -> (Tensor a, Tensor b)", "--no-grad"],
    "bitonic_sort": [],
    "matmul": [],  # CPU only here (ATen); its tensor-core kernels are tested on the GPU machine
}
# CI compiles the CUDA kernels of these (bitonic_sort's own, and the richest placeholder); the others
# build for the CPU only, to keep the run short: the GPU session builds and tests them all.
CUDA_OPS = ["sig_rich", "bitonic_sort"]


@pytest.fixture
def project(shared_projects: Callable[[str], SharedProject]) -> Path:
    return shared_projects("two").root


def test_each_signature_passes_its_generated_tests_as_generated(project: Path) -> None:
    result = opgen("test", *SIGNATURES, cwd=project)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary, summary


def test_rendered_interfaces(project: Path) -> None:
    check = (
        "import torch, generated_ops as g\n"
        "x = torch.randn(4, 6)\n"
        "r = g.sig_route(x); assert r.expert.dtype == torch.int64 and r.probs.dtype == torch.float32\n"
        "n = g.sig_nograd(x.requires_grad_()); assert not n.a.requires_grad and not n.b.requires_grad\n"
        "v = g.sig_rich(x, None, 3, scale=0.5); assert v.indices.dtype == torch.int64\n"
        "s = g.bitonic_sort(torch.tensor([3.0, float('nan'), -1.0, 2.0]), descending=True)\n"
        "assert s.indices.tolist() == [1, 0, 3, 2]\n"
        "try:\n"
        "    g.sig_plain(x, torch.ones(4, 6, dtype=torch.float64))\n"
        "except RuntimeError as error:\n"
        "    assert \"arguments 'y' and 'x' must have the same dtype\" in str(error), error\n"
        "else:\n"
        "    raise AssertionError('a float64 y beside a float32 x was accepted')\n"
    )
    assert_python_runs(check, project)


# Deliberately broken stand-ins: a kernel edited, its reference not. The generated tests must fail.
BROKEN = {
    "sig_rich": ("sig_rich_cpu.cpp", "values_data[i] = x_data[i];", "values_data[i] = x_data[i] * 2;"),
    "sig_route": ("sig_route_cpu.cpp", "expert_data[i] = i;", "expert_data[i] = i + (i == 5);"),
    "sig_plain": (
        "sig_plain_cpu.cpp",
        "grad_x_data[i] = static_cast<scalar_t>(static_cast<math_t>(grad_output_data[i]));",
        "grad_x_data[i] = static_cast<scalar_t>(1.5f * static_cast<math_t>(grad_output_data[i]));",
    ),
    # a sort that is no longer stable: equal keys in reverse order of position
    "bitonic_sort": ("bitonic_sort_cpu.cpp", "return keys[a] < keys[b];", "return keys[a] < keys[b] || (keys[a] == keys[b] && a > b);"),
    # b's gradient off by 1%: a^T @ (1.01 * grad_output)
    "matmul": ("matmul_cpu.cpp", "at::matmul_out(grad_b, a.mT(), grad_output);", "at::matmul_out(grad_b, a.mT(), grad_output.mul(1.01));"),
}


shared_build.join(SIGNATURES, workspace="two", cuda=CUDA_OPS, broken=BROKEN)


def test_broken_stand_ins_fail_their_generated_tests(project: Path) -> None:
    # -k: the CPU checks that see these mistakes (bitonic_sort's lost stability: its ties), not the whole files again.
    selection = "cpu and (matches_reference or gradcheck or ties)"
    assert_generated_tests_fail(project, [shared_build.broken_name(name) for name in BROKEN], "-k", selection)

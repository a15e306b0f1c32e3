"""NormSuite's tolerances: torch's own float32 norms pass them, a wrong gradient does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from opgen.testing.norm_suite import NormSuite
from opgen.testing.op_suite import load_spec

GOLDEN = Path(__file__).parent / "golden"


def _layer_norm(x: torch.Tensor, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


class _ScaledGradient(torch.autograd.Function):
    """The identity whose gradient is 2% too large: a backward that is wrong but close."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 1.02


def _layer_norm_wrong_dx(x: torch.Tensor, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> torch.Tensor:
    return _layer_norm(_ScaledGradient.apply(x), weight, bias, eps)


def _suite(op: Any) -> NormSuite:
    members = {
        "spec": load_spec(GOLDEN / "layernorm"),
        "op": staticmethod(op),
        "reference": staticmethod(_layer_norm),
        "torch_module": torch.nn.LayerNorm,
    }
    return type("Suite", (NormSuite,), members)()


def _nearly_constant_rows() -> dict[str, Any]:
    """Rows of three values near 5.56 and 0.026 apart (|x| * rstd about 218), as an H200 test drew."""
    x = torch.tensor([[5.5615, 5.5869, 5.5246]] * 4)
    weight = torch.tensor([1.6117, 0.5949, 4.2439])
    bias = torch.tensor([-0.7937, -2.9798, 0.4930])
    return {"x": x, "weight": weight, "bias": bias, "eps": 1e-5}


@pytest.mark.parametrize("seed", range(5))
def test_torchs_float32_layer_norm_passes_on_rows_that_cancel(seed: int) -> None:
    # x - mean rounds at x's ulp: every gradient's error grows with |x| * rstd, not only y's.
    torch.manual_seed(seed)
    _suite(_layer_norm).check_step(_nearly_constant_rows(), torch.float32)


@pytest.mark.parametrize("arguments", [_nearly_constant_rows, lambda: {"x": torch.randn(4, 64), "eps": 1e-5}])
def test_a_gradient_two_percent_off_fails(arguments: Any) -> None:
    torch.manual_seed(0)
    with pytest.raises(AssertionError, match="gradient of 'x'"):
        _suite(_layer_norm_wrong_dx).check_step(arguments(), torch.float32)

from __future__ import annotations

import math

import torch

from opgen.testing.tf32 import EmulatedTf32, round_to_tf32


def test_round_to_tf32_keeps_ten_mantissa_bits_rounding_ties_to_even() -> None:
    step = 2**-10  # one TF32 step at 1
    values = torch.tensor(
        [1 + step / 2, 1 + 3 * step / 2, -(1 + 3 * step / 2), 1 + step / 4, 1 + 3 * step / 4, 2 - step / 4, 0.0, math.inf],
        dtype=torch.float64,
    )
    expected = torch.tensor([1.0, 1 + 2 * step, -(1 + 2 * step), 1.0, 1 + step, 2.0, 0.0, math.inf], dtype=torch.float64)
    assert torch.equal(round_to_tf32(values), expected)
    largest = torch.tensor([torch.finfo(torch.float32).max], dtype=torch.float32)
    assert torch.isinf(round_to_tf32(largest)).all()  # to nearest, as cvt.rn.tf32.f32 without .satfinite
    assert torch.isnan(round_to_tf32(torch.tensor([math.nan]))).all()


def test_products_and_their_gradients_read_tf32_operands() -> None:
    x = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, dtype=torch.float64)
    grad = torch.randn(5, 3, dtype=torch.float64)
    with EmulatedTf32():
        out = torch.nn.functional.linear(x, w, b)
        dx, dw = torch.autograd.grad(out, [x, w], grad)
    tf32 = round_to_tf32
    torch.testing.assert_close(out, tf32(x.detach()) @ tf32(w.detach()).T + b, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dx, tf32(grad) @ tf32(w.detach()), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dw, tf32(grad).T @ tf32(x.detach()), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(out, x.detach() @ w.detach().T + b, rtol=1e-9, atol=0)  # it did round

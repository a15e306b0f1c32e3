"""opgen.testing: the input helpers the generated tests share."""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any

import pytest
import torch

from opgen.testing import (
    FLOAT_DTYPES,
    assert_forward_mode_refused,
    gradients_of,
    gradients_under_compiled_autograd,
    misaligned,
    non_contiguous,
    python_autograd_calls,
    random_tensor,
    shapes_filled_by,
)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(), (1,), (3, 5), (2, 0)], ids=str)
def test_misaligned_keeps_values_and_shape_off_a_16_byte_boundary(dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    tensor = random_tensor(shape, dtype, "cpu")
    moved = misaligned(tensor)
    assert moved.is_contiguous() and moved.shape == tensor.shape and torch.equal(moved, tensor)
    if tensor.numel():
        assert moved.data_ptr() % 16 != 0


def test_random_tensor_is_never_all_zero_and_has_both_signs() -> None:
    values = random_tensor((1000,), torch.float32, "cpu")
    assert (values > 0).any() and (values < 0).any()


def test_non_contiguous_keeps_values() -> None:
    tensor = random_tensor((4, 6), torch.float64, "cpu")
    view = non_contiguous(tensor)
    assert not view.is_contiguous() and torch.equal(view, tensor)


@pytest.mark.heavy
def test_shapes_filled_by_sees_autograds_zero_gradients_and_nothing_else() -> None:
    # A non-differentiable second output: autograd hands the backward zeros of its shape.
    class TwoOutputs(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            kept = torch.ones(3, 7)
            ctx.mark_non_differentiable(kept)
            return x * 2, kept

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor, _kept: torch.Tensor) -> torch.Tensor:
            return grad * 2

    x = torch.randn(5, requires_grad=True)
    y, _ = TwoOutputs.apply(x)
    assert [3, 7] in shapes_filled_by(lambda: torch.autograd.grad(y, [x], torch.ones_like(y)))
    assert shapes_filled_by(lambda: torch.sin(torch.randn(4))) == []


def test_what_generated_tests_import_loads_no_build_machinery() -> None:
    # A generated test imports opgen.testing (and its bench opgen.bench): neither may pull in the
    # build, rendering, the CLI or their libraries, which cost startup time in every test process.
    script = (
        "import sys, opgen.testing, opgen.testing.op_suite, opgen.testing.tensor_op_suite, opgen.bench\n"
        "heavy = {'opgen.build', 'opgen.cli', 'opgen.render', 'opgen.update', 'opgen.jit', 'rich', 'typer', 'copier'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
        "import opgen\n"
        "assert opgen.new_op.__module__ == 'opgen.render'  # still there, on first use\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# -- gradients of formulas that use an input only in a condition (found by the H200 fuzz run) --------
def _where_only(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.where(y > 0, x, x.new_tensor(1.5))  # y decides, it is never differentiated


def _constant_pieces(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.where(x > y, x.new_tensor(1.0), x.new_tensor(2.0))  # no input is differentiated


def _suite(reference):  # type: ignore[no-untyped-def]
    from opgen.testing.tensor_op_suite import TensorOpSuite

    return type("Suite", (TensorOpSuite,), {"name": "suite", "inputs": ("x", "y"), "reference": reference})()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_input_used_only_in_a_condition_has_a_zero_gradient(dtype: torch.dtype) -> None:
    suite = _suite(_where_only)
    x, y = random_tensor((3, 70), dtype, "cpu"), random_tensor((3, 70), dtype, "cpu")
    grad_output = random_tensor((3, 70), dtype, "cpu")
    right = [torch.where(y > 0, grad_output, 0), torch.zeros_like(y)]
    suite.assert_gradients_close(right, [x, y], _where_only(x, y), grad_output, {})
    with pytest.raises(AssertionError, match="gradient of 'y'"):
        suite.assert_gradients_close([right[0], grad_output], [x, y], _where_only(x, y), grad_output, {})


def test_a_formula_differentiable_in_no_input_has_zero_gradients() -> None:
    suite = _suite(_constant_pieces)
    x, y = random_tensor((50,), torch.float64, "cpu"), random_tensor((50,), torch.float64, "cpu")
    grads = suite.reference_gradients([x.requires_grad_(), y.requires_grad_()], torch.ones(50, dtype=torch.float64), {})
    assert all(torch.equal(g, torch.zeros(50, dtype=torch.float64)) for g in grads)
    with pytest.raises(AssertionError, match="gradient of 'x'"):
        suite.assert_gradients_close([x.detach(), torch.zeros_like(y)], [x, y], x, torch.ones_like(x), {})


# -- a finite value beyond the dtype's range (found by the H200 fuzz run: fuzz194) ----------------------
def _beyond_range(y: torch.Tensor) -> torch.Tensor:
    return torch.sin(torch.erfc(torch.sigmoid(y))) - y**2 / (torch.log1p(y.abs() ** 2) ** 2 + 1)


def _in_float32(y: torch.Tensor) -> torch.Tensor:  # what the kernels do: compute in float32
    return _beyond_range(y.float()).to(y.dtype)


def _zero_where_beyond(y: torch.Tensor) -> torch.Tensor:  # wrong: neither -inf nor float32's NaN there
    out = _in_float32(y)
    return torch.where(torch.isnan(out) & torch.isfinite(y), torch.zeros_like(out), out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_value_beyond_the_dtypes_range_may_be_pytorchs_own_result(dtype: torch.dtype) -> None:
    from opgen.testing.tensor_op_suite import TensorOpSuite

    def suite(op):  # type: ignore[no-untyped-def]
        return type("Suite", (TensorOpSuite,), {"name": "suite", "inputs": ("y",), "reference": _beyond_range, "op": op})()

    # At the dtype's largest values the float64 reference is -3.7e72 (-inf in the dtype); in float32
    # y^2 / (...) is inf / inf = NaN, as PyTorch's own float32 gives.
    suite(_in_float32).test_nan_and_infinities_propagate_as_in_the_reference("cpu", dtype)
    with pytest.raises(AssertionError, match="beyond the dtype's range"):
        suite(_zero_where_beyond).test_nan_and_infinities_propagate_as_in_the_reference("cpu", dtype)


# -- a forward whose terms cancel (found by the H200 fuzz run: fuzz132) ----------------------------------
def _cancelling(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.expm1(4 * torch.sigmoid(x**3)) + y


def _sigmoid_rounded_once_more(v: torch.Tensor) -> torch.Tensor:
    e = torch.exp(-v.abs())
    reciprocal = 1 / (1 + e)
    return torch.where(v >= 0, reciprocal, e * reciprocal)


def _cancelling_another_order(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # A faithful kernel that rounds as fuzz132's did: e^-|v| * 1/(1 + e^-|v|) for sigmoid.
    x, y = x.float(), y.float()
    return (torch.expm1(4 * _sigmoid_rounded_once_more(x**3)) + y).to(x.dtype)


def _cancelling_off(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # wrong: y scaled by 1 + 1e-3
    return _cancelling_another_order(x, y * 1.001)


def test_a_forward_whose_terms_cancel_may_round_as_another_order_does() -> None:
    # y + expm1(4 sigmoid(x^3)) is ~0.02 where both terms are ~20: an ulp of sigmoid more than
    # PyTorch's rounding is 1e-6 in the result, beyond the bound at a few elements in a million
    # (4 to 11 in each of 25 draws) where PyTorch's own float32 happened to land inside it.
    from opgen.testing.tensor_op_suite import TensorOpSuite

    def suite(op):  # type: ignore[no-untyped-def]
        return type("Suite", (TensorOpSuite,), {"name": "suite", "inputs": ("x", "y"), "reference": _cancelling, "op": op})()

    suite(_cancelling_another_order).test_forward_matches_reference("cpu", torch.float32, (1, 1048579), {})
    with pytest.raises(AssertionError, match="elements differ from the reference"):
        suite(_cancelling_off).test_forward_matches_reference("cpu", torch.float32, (1, 1048579), {})


def test_a_finite_value_where_the_reference_is_infinite_fails() -> None:
    from opgen.testing import assert_close_or_as_pytorch

    expected = torch.tensor([1.0, math.inf, -math.inf], dtype=torch.float64)
    tolerances = {torch.float32: (1e-5, 1e-6)}
    assert_close_or_as_pytorch(expected.float(), expected, expected.float(), tolerances)
    with pytest.raises(AssertionError, match="1 of 3 elements"):
        assert_close_or_as_pytorch(torch.tensor([1.0, 3.0e38, -math.inf]), expected, None, tolerances)


def test_gradients_under_compiled_autograd_are_autograds() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * w

    torch._dynamo.reset()
    for _ in range(2):  # the second call reuses the first one's compiled graph
        arguments = {"x": torch.randn(5, 3), "w": torch.randn(3)}
        grad = torch.randn(5, 3)
        expected = gradients_of(fn, arguments, ("x", "w"), grad)
        got = gradients_under_compiled_autograd(fn, arguments, ("x", "w"), grad)
        for g, e in zip(got, expected, strict=True):
            assert torch.allclose(g, e)


@torch.library.custom_op("opgen_testing::scaled_sum", mutates_args=())
def _scaled_sum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 2 * x + y


_scaled_sum.register_autograd(lambda ctx, grad: (2 * grad, grad))


def _guarded(*guarded: str) -> Any:
    """The custom op behind a guard that refuses a tangent on the arguments ``guarded``, as generated ops do."""
    from torch.autograd import forward_ad

    def call(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        for name, t in (("x", x), ("y", y)):
            if name in guarded and forward_ad.unpack_dual(t).tangent is not None:
                raise RuntimeError("scaled_sum: forward-mode AD (torch.func.jvp) is not supported")
        return _scaled_sum(x, y)

    return call


def test_forward_mode_refusal_passes_for_an_op_that_refuses_every_tangent() -> None:
    x, y = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    assert_forward_mode_refused("scaled_sum", _guarded("x", "y"), {"x": x, "y": y})


@pytest.mark.parametrize("guarded", [(), ("x",)], ids=["no guard", "x only"])
def test_forward_mode_refusal_fails_for_an_op_that_drops_a_tangent(guarded: tuple[str, ...]) -> None:
    # A custom op's reverse-mode autograd drops the tangent without a word: the check must notice.
    x, y = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        assert_forward_mode_refused("scaled_sum", _guarded(*guarded), {"x": x, "y": y})


def _workspace_registration() -> Any:
    """The workspace's _registration.py (generated_ops/, as the template renders it), loaded alone."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "generated_ops" / "_registration.py"
    spec = importlib.util.spec_from_file_location("workspace_registration", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_python_autograd_calls_sees_torch_library_s_kernel_which_call_op_goes_past() -> None:
    # The generated tests assert that a call needing no gradient runs none of torch.library's
    # Python autograd: the check must see that kernel where a plain call runs it.
    call_op = _workspace_registration().call_op
    op = torch.ops.opgen_testing.scaled_sum.default
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    with torch.no_grad():
        assert python_autograd_calls(lambda: op(x, y))
        assert python_autograd_calls(lambda: call_op(op, x, y)) == []
    assert python_autograd_calls(lambda: op(x, y))
    assert python_autograd_calls(lambda: call_op(op, x, y)) == []
    assert torch.equal(call_op(op, x, y), 2 * x + y)
    # A gradient will be needed: through the autograd kernel, which records it.
    w = y.clone().requires_grad_()
    assert python_autograd_calls(lambda: call_op(op, x, w).sum().backward())
    assert torch.equal(w.grad, torch.ones_like(w))

"""The generic tests of ops whose one output has the broadcast shape of their tensor inputs.

relu, gelu, formula ops, the elementwise and rowwise skeletons and softmax: tensor inputs
(``inputs``), float/int/str params (each test runs with every set in ``params``), one output. A
generated test file subclasses :class:`TensorOpSuite` (and :class:`BroadcastSuite` for ops of
several inputs), sets the op, its reference, tolerances, shapes and params, and adds the tests that
are the op's own; the checks here then run for it: forward and backward against the float64
reference for every dtype, shape and param set on the CPU and CUDA, gradcheck, opcheck,
torch.compile, hostile values (NaN, infinities, the dtype's extremes), refused arguments, side
streams and CUDA graphs, compute-sanitizer, more than 2^31 elements, a second GPU and DDP.

The module's :func:`pytest_generate_tests` hook, which the test file imports, parametrizes the
tests by the class's ``params`` and ``shapes``.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch

from opgen.testing import (
    DEFAULT_TOLERANCES,
    DEVICES,
    FLOAT_DTYPES,
    assert_close,
    assert_close_or_as_pytorch,
    assert_forward_mode_refused,
    assert_past_python_autograd,
    compute_dtype,
    misaligned,
    non_contiguous,
    poison_allocator,
    random_tensor,
    requires_two_gpus,
    same_or_both_nan,
)
from opgen.testing.distributed import check_ddp_training_step
from opgen.testing.sanitizer import TOOLS as SANITIZER_TOOLS
from opgen.testing.sanitizer import assert_clean_under_sanitizer

Shapes = tuple[int, ...] | Sequence[tuple[int, ...]]

# Shapes that broadcast: input k takes pattern[k % len(pattern)]. Size-1 dimensions on either
# side, missing leading dimensions, 0-d and empty tensors.
BROADCAST_PATTERNS: list[list[tuple[int, ...]]] = [
    [(4, 5), (5,)],
    [(4, 1), (1, 5)],
    [(3, 1, 7), (4, 1)],
    [(), (2, 3)],
    [(2, 3), ()],
    [(0, 5), (1, 5)],
    [(1,), (6,)],
    [(2, 1, 1, 33), (1, 3, 17, 1)],
]

on_devices = pytest.mark.parametrize("device", DEVICES)
on_cuda = pytest.mark.parametrize("device", [case for case in DEVICES if case.id == "cuda"])
on_dtypes = pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)


def params_id(params: Mapping[str, Any]) -> str:
    return ",".join(f"{key}={value}" for key, value in params.items()) or "default"


def shapes_id(shapes: Any) -> str:
    return "-".join(str(list(shape)) for shape in shapes) if shapes and not isinstance(shapes[0], int) else str(shapes)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize a suite's tests by its class's ``params``, ``shapes`` and broadcast shapes."""
    suite = metafunc.cls
    if suite is None or not issubclass(suite, TensorOpSuite):
        return
    if "params" in metafunc.fixturenames:
        metafunc.parametrize("params", suite.params, ids=params_id)
    if "shape" in metafunc.fixturenames:
        metafunc.parametrize("shape", suite.shapes, ids=str)
    if "broadcast" in metafunc.fixturenames:
        metafunc.parametrize("broadcast", suite.broadcast_shapes(), ids=shapes_id)
    if "gradcheck_shapes" in metafunc.fixturenames:
        metafunc.parametrize("gradcheck_shapes", suite.gradcheck_cases(), ids=shapes_id)
    if "opcheck_shapes" in metafunc.fixturenames:
        metafunc.parametrize("opcheck_shapes", suite.opcheck_cases(), ids=shapes_id)



# Nearby inputs at which PyTorch's own float32 results and gradients are taken, to estimate the
# error float32 arithmetic makes at a point (the first sample is the inputs themselves).
GRADIENT_ERROR_SAMPLES = 8


def _nudged(t: torch.Tensor, dtype: torch.dtype, *, ulps: int) -> torch.Tensor:
    """``t`` in ``dtype``, each element moved by a random whole number of ulps in [-ulps, ulps]."""
    moved = t.to(dtype)
    if ulps == 0:
        return moved
    steps = torch.randint(-ulps, ulps + 1, t.shape, device=t.device)
    toward = torch.where(steps >= 0, torch.full_like(moved, math.inf), torch.full_like(moved, -math.inf))
    for _ in range(ulps):
        moved = torch.where(steps.abs() > 0, torch.nextafter(moved, toward), moved)
        steps = steps - steps.sign()
    return moved


class TensorOpSuite:
    """The checks of an op of ``inputs`` tensors and float params with one output of their shape."""

    op: Callable[..., torch.Tensor]
    reference: Callable[..., torch.Tensor]
    module: type[torch.nn.Module]
    # The op's name in torch.ops.generated_ops and its tensor arguments, in order.
    name: ClassVar[str]
    inputs: ClassVar[tuple[str, ...]] = ("x",)
    # Each test runs with each set of the op's extra arguments.
    params: ClassVar[Sequence[dict[str, Any]]] = ({},)
    tolerances: ClassVar[Mapping[torch.dtype, tuple[float, float]]] = DEFAULT_TOLERANCES
    shapes: ClassVar[Sequence[tuple[int, ...]]] = ((0,), (1,), (), (7,), (3, 5), (2, 3, 129))
    # Shapes that take every CUDA kernel path of the op, at the edges between paths.
    sanitizer_shapes: ClassVar[Sequence[Shapes] | None] = None
    gradcheck_scale: ClassVar[float] = 1.0
    # What the backward op reads besides the incoming gradient: the inputs, or the forward's output
    # (softmax: dx = y * (dy - sum(y * dy))), which then needs `reference_backward`.
    saved: ClassVar[str] = "inputs"
    reference_backward: Callable[..., torch.Tensor] | None = None
    # Rows of a reduction over the last dimension (the >2^31-element test samples whole rows).
    rowwise: ClassVar[bool] = False

    # -- inputs and references -----------------------------------------------------------------------
    def make_inputs(
        self, shapes: Shapes, dtype: torch.dtype, device: str, *, requires_grad: bool = False
    ) -> tuple[torch.Tensor, ...]:
        """One random tensor per input: ``shapes`` is one shape for all of them, or one per input."""
        per_input = shapes if shapes and not isinstance(shapes[0], int) else [shapes] * len(self.inputs)
        return tuple(random_tensor(shape, dtype, device).requires_grad_(requires_grad) for shape in per_input)  # type: ignore[arg-type]

    def reference_output(
        self, inputs: Sequence[torch.Tensor], params: Mapping[str, Any], dtype: torch.dtype = torch.float64
    ) -> torch.Tensor:
        """The reference's output for the same values, computed in ``dtype`` (float64 unless asked)."""
        return type(self).reference(*(t.detach().to(dtype) for t in inputs), **params)

    def call(self, inputs: Sequence[torch.Tensor], params: Mapping[str, Any]) -> torch.Tensor:
        return type(self).op(*inputs, **params)

    def assert_matches_reference(
        self, actual: torch.Tensor, inputs: Sequence[torch.Tensor], params: Mapping[str, Any], dtype: torch.dtype
    ) -> None:
        """``actual`` against the float64 reference, or PyTorch's own result where the math is ill-conditioned.

        See opgen.testing.assert_close_or_as_pytorch: where the reference computed by PyTorch in the
        compute dtype misses the float64 one, agreeing with PyTorch passes too, and near points where
        PyTorch's own arithmetic errs, a few times its error does (up to 16 times the tolerance).
        """
        expected = self.reference_output(inputs, params)
        if dtype == torch.float64:
            assert_close_or_as_pytorch(actual, expected, None, self.tolerances, dtype=dtype)
            return
        compute = compute_dtype(dtype)
        as_pytorch = self.reference_output(inputs, params, compute)
        # PyTorch's own result where each input element is moved by up to 4 ulps of the compute
        # dtype, independently: the error that dtype's arithmetic makes near the point.
        nearby = [
            type(self).reference(*(_nudged(t.detach(), compute, ulps=4) for t in inputs), **params)
            for _ in range(GRADIENT_ERROR_SAMPLES - 1)
        ]
        assert_close_or_as_pytorch(actual, expected, as_pytorch, self.tolerances, dtype=dtype, nearby=nearby)

    @property
    def backward_op(self) -> Any:
        return getattr(torch.ops.generated_ops, f"{self.name}_backward")

    @classmethod
    def broadcast_shapes(cls) -> list[tuple[tuple[int, ...], ...]]:
        return [tuple(pattern[k % len(pattern)] for k in range(len(cls.inputs))) for pattern in BROADCAST_PATTERNS]

    @classmethod
    def reference_gradients(
        cls, inputs: Sequence[torch.Tensor], grad_output: torch.Tensor, params: Mapping[str, Any]
    ) -> list[torch.Tensor]:
        """Autograd of the reference at ``inputs`` (leaves), zeros for an input it does not differentiate.

        A formula may use an input only in a condition (``where(y > 0, x, 1)``) or not
        differentiably at all: PyTorch then gives that input no gradient, the op a zero one.
        """
        output = cls.reference(*inputs, **params)
        if not output.requires_grad:
            return [torch.zeros_like(t) for t in inputs]
        grads = torch.autograd.grad(output, list(inputs), grad_output, allow_unused=True)
        return [torch.zeros_like(t) if g is None else g for g, t in zip(grads, inputs, strict=True)]

    def assert_gradients_close(
        self,
        grads: Sequence[torch.Tensor | None],
        inputs: Sequence[torch.Tensor],
        output: torch.Tensor,
        grad_output: torch.Tensor,
        params: Mapping[str, Any],
    ) -> None:
        """Each input's gradient against the float64 reference's, in the input's dtype.

        A broadcast input's gradient is a sum over the dimensions it was broadcast along; each
        term may be off by the dtype's tolerance, so the sum may be off by the sum of those.
        """
        if self.saved == "output":
            # The backward op sees the forward's rounded output; its exact gradient for that output
            # is the standard (autograd from x would also charge it with the forward's rounding).
            reference_backward = type(self).reference_backward
            assert reference_backward is not None, "saved == 'output' needs reference_backward"
            (grad,), (x,) = grads, inputs
            assert grad is not None, f"'{self.inputs[0]}' got no gradient"
            expected = reference_backward(grad_output.double(), output.detach().double(), **params)
            assert_close(grad, expected, self.tolerances, dtype=x.dtype)
            return
        shape = torch.broadcast_shapes(*(t.shape for t in inputs))
        expanded = [t.detach().double().expand(shape).clone().requires_grad_() for t in inputs]
        full_grads = self.reference_gradients(expanded, grad_output.double(), params)
        # PyTorch's float32 gradients at the inputs and at inputs each element of which is moved by
        # up to a few units of float32 rounding (independently, at random): how far they land from
        # float64 is the error float32 arithmetic makes there. A uniform nudge of every input missed
        # sums that cancel (textbook: logaddexp + hypot + ... whose d/dx cancels to 1e-2 of its terms).
        compute = compute_dtype(grad_output.dtype)
        samples: list[list[torch.Tensor]] = []
        if compute != torch.float64:
            for sample in range(GRADIENT_ERROR_SAMPLES):
                moved = [
                    _nudged(t.detach(), compute, ulps=0 if sample == 0 else 4).expand(shape).clone().requires_grad_()
                    for t in inputs
                ]
                samples.append(self.reference_gradients(moved, grad_output.to(compute), params))
        for index, (name, grad, t, full) in enumerate(zip(self.inputs, grads, inputs, full_grads, strict=True)):
            assert grad is not None, f"'{name}' got no gradient"
            assert grad.shape == t.shape and grad.dtype == t.dtype and grad.device == t.device, name
            rtol, atol = self.tolerances[t.dtype]
            expected = full.sum_to_size(t.shape).cpu()
            bound = (rtol * full.abs() + atol).sum_to_size(t.shape).cpu()
            actual = grad.detach().double().cpu()

            def close(a: torch.Tensor, b: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
                return ((a - b).abs() <= bound) | same_or_both_nan(a, b)

            within = close(actual, expected, bound)
            if samples:
                # Where one of them misses float64, the math is ill-conditioned there in float32:
                # agreeing with PyTorch passes.
                estimates = [sample[index].sum_to_size(t.shape).to(t.dtype).double().cpu() for sample in samples]
                error = torch.stack([(e - expected).abs().nan_to_num(0.0) for e in estimates]).amax(0)
                ill = torch.stack([~close(e, expected, bound) for e in estimates]).any(0)
                as_pytorch = close(actual, estimates[0], bound)
                # Anywhere, a kernel may miss float64 by a few times the error PyTorch's own float32
                # makes near the point (a fused expression sums its terms in another order).
                within |= (ill & as_pytorch) | ((actual - expected).abs() <= bound + 4 * error)
            assert bool(within.all()), (
                f"gradient of '{name}': {int((~within).sum())} of {within.numel()} elements off, "
                f"e.g. {actual[~within][:4].tolist()} != {expected[~within][:4].tolist()}"
            )

    # -- forward and backward against the reference ------------------------------------------------
    @on_devices
    @on_dtypes
    def test_forward_matches_reference(
        self, device: str, dtype: torch.dtype, shape: tuple[int, ...], params: dict[str, Any]
    ) -> None:
        inputs = self.make_inputs(shape, dtype, device)
        poison_allocator(device, inputs[0].numel() * inputs[0].element_size())
        actual = self.call(inputs, params)
        assert actual.dtype == dtype and actual.device == inputs[0].device and actual.is_contiguous()
        self.assert_matches_reference(actual, inputs, params, dtype)

    @on_devices
    @on_dtypes
    @pytest.mark.parametrize("backward_shape", [(1,), (3, 257), (70_001,)], ids=str)
    def test_backward_matches_reference(
        self, device: str, dtype: torch.dtype, backward_shape: tuple[int, ...], params: dict[str, Any]
    ) -> None:
        inputs = self.make_inputs(backward_shape, dtype, device, requires_grad=True)
        grad_output = random_tensor(backward_shape, dtype, device)
        poison_allocator(device, inputs[0].numel() * inputs[0].element_size())
        output = self.call(inputs, params)
        output.backward(grad_output)
        self.assert_gradients_close([t.grad for t in inputs], inputs, output, grad_output, params)

    @on_devices
    @on_dtypes
    def test_non_contiguous_and_misaligned_inputs(self, device: str, dtype: torch.dtype, params: dict[str, Any]) -> None:
        for place in (non_contiguous, misaligned):  # a copy first; the kernel's scalar path
            inputs = tuple(place(t) for t in self.make_inputs((33, 65), dtype, device))
            self.assert_matches_reference(self.call(inputs, params), inputs, params, dtype)

    @on_devices
    def test_gradcheck_float64(self, device: str, gradcheck_shapes: Shapes, params: dict[str, Any]) -> None:
        inputs = tuple(t * self.gradcheck_scale for t in self.make_inputs(gradcheck_shapes, torch.float64, device))
        inputs = tuple(t.detach().requires_grad_() for t in inputs)
        assert torch.autograd.gradcheck(lambda *ts: self.call(ts, params), inputs, eps=1e-6, atol=1e-5)

    @classmethod
    def gradcheck_cases(cls) -> list[Shapes]:
        return [(4, 9)]

    # -- gradients of gradients ---------------------------------------------------------------------
    # True where the backward op has an autograd formula of its own (formula ops: second
    # derivatives from the same derivation); otherwise differentiating it twice raises a clear error.
    double_backward: ClassVar[bool] = False

    @on_devices
    def test_gradgradcheck_float64_or_a_clear_error(
        self, device: str, gradcheck_shapes: Shapes, params: dict[str, Any]
    ) -> None:
        inputs = tuple(t * self.gradcheck_scale for t in self.make_inputs(gradcheck_shapes, torch.float64, device))
        inputs = tuple(t.detach().requires_grad_() for t in inputs)
        if self.double_backward:
            assert torch.autograd.gradgradcheck(lambda *ts: self.call(ts, params), inputs, eps=1e-6, atol=1e-5)
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            output = self.call(inputs, params)
            grads = torch.autograd.grad(output, inputs, torch.ones_like(output), create_graph=True)
            with pytest.raises(RuntimeError, match=rf"{self.name}: its backward is not differentiable"):
                torch.autograd.grad(torch.stack([g.sum() for g in grads]).sum(), inputs)
        assert not [w for w in caught if "autograd kernel was not registered" in str(w.message)]

    @on_devices
    def test_forward_mode_ad_raises_a_clear_error(self, device: str, params: dict[str, Any]) -> None:
        # No kernel has a forward-mode formula: a tangent fails at once, naming the op, instead of
        # being dropped below torch.library's reverse-mode autograd.
        inputs = dict(zip(self.inputs, self.make_inputs((3, 5), torch.float64, device), strict=True))
        assert_forward_mode_refused(self.name, lambda **tensors: self.call(list(tensors.values()), params), inputs)

    @on_devices
    def test_a_call_needing_no_gradient_runs_no_python_autograd(self, device: str, params: dict[str, Any]) -> None:
        # torch.library's autograd kernel is Python, costing more than a small op's kernel: a call
        # that records no gradient (under no_grad, or with no input requiring one) goes past it.
        inputs = self.make_inputs((3, 5), torch.float32, device)
        with torch.no_grad():
            assert_past_python_autograd(lambda: self.call(inputs, params))
        assert_past_python_autograd(lambda: self.call(inputs, params))

    @on_devices
    def test_opcheck(self, device: str, opcheck_shapes: Shapes, params: dict[str, Any]) -> None:
        # Schema, fake kernel, autograd registration and torch.compile's AOT dispatch with dynamic
        # shapes, checked by torch.
        inputs = self.make_inputs(opcheck_shapes, torch.float32, device, requires_grad=True)
        torch.library.opcheck(getattr(torch.ops.generated_ops, self.name).default, inputs, dict(params))

    @classmethod
    def opcheck_cases(cls) -> list[Shapes]:
        return [(4, 33)]

    @on_devices
    def test_torch_compile_fullgraph(self, device: str) -> None:
        params = self.params[-1]
        compiled = torch.compile(self.module(**params), fullgraph=True)
        inputs = self.make_inputs((8, 100), torch.float32, device)
        self.assert_matches_reference(compiled(*inputs), inputs, params, torch.float32)

    @on_devices
    def test_module_and_torch_ops_agree(self, device: str) -> None:
        params = self.params[-1]
        inputs = self.make_inputs((5, 6), torch.float32, device)
        expected = getattr(torch.ops.generated_ops, self.name)(*inputs, *params.values())
        torch.testing.assert_close(self.module(**params)(*inputs), expected, rtol=0, atol=0)

    # -- hostile values and refused arguments ----------------------------------------------------------
    @on_devices
    @on_dtypes
    def test_nan_and_infinities_propagate_as_in_the_reference(self, device: str, dtype: torch.dtype) -> None:
        params = self.params[-1]
        inputs = self.make_inputs((6, 40), dtype, device)
        every = len(inputs)  # an input's extremes sit between the other inputs' (with one input: a whole row)
        for k, t in enumerate(inputs):  # special values in each input, at places that differ per input
            t[0, 3 + k] = float("nan")
            t[1, 5 + k] = float("inf")
            t[2, 7 + k] = float("-inf")
            t[3, k::every] = torch.finfo(dtype).max  # the dtype's extremes, mixed with ordinary values
            t[4, k :: every + 1] = torch.finfo(dtype).min
            t[5, k :: every + 2] = torch.finfo(dtype).tiny
        actual = self.call(inputs, params)
        expected = self.reference_output(inputs, params)
        in_compute_dtype = self.reference_output(inputs, params, compute_dtype(dtype))
        # Where the reference is NaN or infinite the op must give just that.
        expected_in_dtype = expected.to(dtype)
        special = ~torch.isfinite(expected_in_dtype)
        exact = special & ~torch.isfinite(expected)
        torch.testing.assert_close(actual[exact], expected_in_dtype[exact], rtol=0, atol=0, equal_nan=True)
        # Where it is finite but beyond the dtype's range, that infinity, or what PyTorch gives when
        # it computes as the op does (fuzz194: y^2 / (log1p(y^2)^2 + 1) at the largest float32 y is
        # 3.7e72 in float64, inf / inf = NaN in float32).
        beyond = special & ~exact
        missed = beyond & ~same_or_both_nan(actual, expected_in_dtype) & ~same_or_both_nan(actual, in_compute_dtype.to(dtype))
        assert not bool(missed.any()), (
            f"{int(missed.sum())} outputs beyond the dtype's range are neither the reference's infinity nor "
            f"PyTorch's own result in {compute_dtype(dtype)}, at {missed.nonzero().tolist()[:4]}: {actual[missed][:4].tolist()} "
            f"!= {expected_in_dtype[missed][:4].tolist()} or {in_compute_dtype.to(dtype)[missed][:4].tolist()}"
        )
        # Elsewhere a finite value within the dtype's tolerance, but for one case: where PyTorch's
        # own math overflows as well when it computes as the op does (in float32 for the 16- and
        # 32-bit types; a sum over a row of the largest values, say), the op may give the same.
        overflowed = ~special & ~torch.isfinite(actual)
        as_pytorch = overflowed & ~torch.isfinite(in_compute_dtype)
        torch.testing.assert_close(
            actual[as_pytorch], in_compute_dtype.to(dtype)[as_pytorch], rtol=0, atol=0, equal_nan=True
        )
        spurious = overflowed & ~as_pytorch
        assert not bool(spurious.any()), (
            f"{int(spurious.sum())} non-finite outputs where the reference is finite, at "
            f"{spurious.nonzero().tolist()[:4]}: {actual[spurious][:4].tolist()} != {expected[spurious][:4].tolist()}"
        )
        finite = ~special & ~overflowed  # where PyTorch in the compute dtype misses too, matching it passes
        pytorch = None if dtype == torch.float64 else in_compute_dtype[finite]
        assert_close_or_as_pytorch(actual[finite], expected[finite], pytorch, self.tolerances, dtype=dtype)

    @on_devices
    def test_integer_input_is_refused(self, device: str) -> None:
        for position, name in enumerate(self.inputs):
            inputs = list(self.make_inputs((6,), torch.float32, device))
            inputs[position] = torch.arange(6, device=device)
            with pytest.raises(
                RuntimeError, match=rf"argument '{name}' must be float32, float64, float16 or bfloat16, but got Long"
            ):
                self.call(inputs, {})

    @on_devices
    def test_complex_input_is_refused_and_the_next_call_succeeds(self, device: str) -> None:
        params = self.params[-1]
        inputs = list(self.make_inputs((4, 4), torch.float32, device))
        complex_inputs = [torch.randn(4, 4, dtype=torch.complex64, device=device), *inputs[1:]]
        with pytest.raises(
            RuntimeError,
            match=rf"argument '{self.inputs[0]}' must be float32, float64, float16 or bfloat16, but got ComplexFloat",
        ):
            self.call(complex_inputs, params)
        self.assert_matches_reference(self.call(inputs, params), inputs, params, torch.float32)

    @on_cuda
    def test_mixed_devices_are_refused(self, device: str) -> None:
        if len(self.inputs) == 1:  # the forward's one tensor: the backward's gradient on the CPU
            x = random_tensor((8,), torch.float32, device)
            with pytest.raises(RuntimeError, match=r"argument 'grad_output' must be a CUDA tensor, but got a tensor on cpu"):
                self.backward_op(random_tensor((8,), torch.float32, "cpu"), x, *self.params[0].values())
            return
        inputs = list(self.make_inputs((8,), torch.float32, device))
        inputs[-1] = inputs[-1].cpu()
        with pytest.raises(RuntimeError, match=rf"argument '{self.inputs[-1]}' must be a CUDA tensor, but got a tensor on cpu"):
            self.call(inputs, {})

    @requires_two_gpus
    @pytest.mark.cuda
    def test_tensors_on_different_gpus_are_refused(self) -> None:
        if len(self.inputs) == 1:
            saved = "output" if self.saved == "output" else self.inputs[0]
            x = random_tensor((8,), torch.float32, "cuda:0")
            with pytest.raises(
                RuntimeError,
                match=rf"arguments 'grad_output' and '{saved}' must be on the same device, but got cuda:1 and cuda:0",
            ):
                self.backward_op(random_tensor((8,), torch.float32, "cuda:1"), x, *self.params[0].values())
            return
        inputs = list(self.make_inputs((8,), torch.float32, "cuda:0"))
        inputs[-1] = inputs[-1].to("cuda:1")
        with pytest.raises(
            RuntimeError,
            match=rf"arguments '{self.inputs[0]}' and '{self.inputs[-1]}' must be on the same device, but got cuda:0 and cuda:1",
        ):
            self.call(inputs, {})

    # -- streams and CUDA graphs ---------------------------------------------------------------------
    @on_cuda
    def test_runs_on_a_side_stream(self, device: str) -> None:
        params = self.params[-1]
        inputs = self.make_inputs((64, 1000), torch.float32, device)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = self.call(inputs, params)  # must launch on `side`, the current stream here
        torch.cuda.current_stream().wait_stream(side)
        self.assert_matches_reference(y, inputs, params, torch.float32)

    @on_cuda
    def test_forward_and_backward_replay_in_a_cuda_graph(self, device: str) -> None:
        params = self.params[-1]
        inputs = self.make_inputs((64, 1000), torch.float32, device, requires_grad=True)
        grad_output = random_tensor((64, 1000), torch.float32, device)
        side = torch.cuda.Stream()  # warm up off the default stream, as CUDA graph capture asks
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self.call(inputs, params).backward(grad_output)
        torch.cuda.current_stream().wait_stream(side)
        for t in inputs:
            t.grad = None
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = self.call(inputs, params)
            y.backward(grad_output)
        with torch.no_grad():  # new inputs in the captured buffers, then replay
            for t in inputs:
                t.copy_(random_tensor(t.shape, torch.float32, device))
            grad_output.copy_(random_tensor(grad_output.shape, torch.float32, device))
        graph.replay()
        torch.cuda.synchronize()
        self.assert_matches_reference(y, inputs, params, torch.float32)
        self.assert_gradients_close([t.grad for t in inputs], inputs, y, grad_output, params)

    # -- compute-sanitizer, more than 2**31 elements, several GPUs, DDP --------------------------------
    def exercise_kernel_paths(self) -> None:
        """Every CUDA kernel path once, forward and backward, aligned and one element off.

        The test module's ``__main__`` calls this; test_clean_under_compute_sanitizer runs the
        module under each compute-sanitizer tool, which then sees every load and store.
        """
        for params in self.params:
            for dtype in FLOAT_DTYPES:
                for shapes in self.sanitizer_shapes or self.default_sanitizer_shapes():
                    for place in (lambda tensor: tensor, misaligned):
                        inputs = tuple(place(t).requires_grad_() for t in self.make_inputs(shapes, dtype, "cuda"))
                        output = self.call(inputs, params)
                        output.backward(place(random_tensor(output.shape, dtype, "cuda")))
        torch.cuda.synchronize()

    def default_sanitizer_shapes(self) -> list[Shapes]:
        return list(self.shapes)

    @on_cuda
    @pytest.mark.sanitize
    @pytest.mark.parametrize("tool", SANITIZER_TOOLS)
    def test_clean_under_compute_sanitizer(self, device: str, tool: str) -> None:
        assert_clean_under_sanitizer(tool, type(self).__module__)

    # Just past 2**31 elements an input, so any 32-bit index in a kernel wraps.
    LARGE_ROW_LENGTH: ClassVar[int] = 1024

    def large_shape(self) -> tuple[int, ...]:
        return (2**31 // self.LARGE_ROW_LENGTH + 3, self.LARGE_ROW_LENGTH) if self.rowwise else (2**31 + 4099,)

    def large_samples(self, generator: torch.Generator) -> torch.Tensor:
        """Elements (rows, for a rowwise op) to check: the first, those around 2**31, the last, random ones."""
        if self.rowwise:
            rows = self.large_shape()[0]
            edges = torch.tensor(
                [0, 1, 2**31 // self.LARGE_ROW_LENGTH - 1, 2**31 // self.LARGE_ROW_LENGTH, rows - 2, rows - 1]
            )
            return torch.cat([edges, torch.randint(rows, (58,), generator=generator)])
        numel = self.large_shape()[0]
        edges = torch.cat(
            [torch.arange(4096), torch.arange(2**31 - 4096, 2**31 + 4096), torch.arange(numel - 4096, numel)]
        )
        return torch.cat([edges, torch.randint(numel, (1 << 16,), generator=generator)])

    @on_cuda
    def test_more_than_2_31_elements(self, device: str) -> None:
        dtype = torch.bfloat16
        shape = self.large_shape()
        numel = math.prod(shape)
        needed = (2 * len(self.inputs) + 2) * numel * dtype.itemsize + (1 << 30)  # inputs, output, gradients, slack
        free, _ = torch.cuda.mem_get_info()
        if free < needed:
            pytest.skip(f"needs {needed / 2**30:.1f} GiB of free GPU memory for {numel:,} bfloat16 elements, {free / 2**30:.1f} GiB free")
        params = self.params[0]
        inputs = [torch.randn(shape, dtype=dtype, device=device).mul_(3).requires_grad_() for _ in self.inputs]
        output = self.call(inputs, params)
        grad_output = torch.randn_like(output)
        output.backward(grad_output)
        samples = self.large_samples(torch.Generator().manual_seed(0)).to(device)
        sampled_inputs, sampled_output = [t.detach()[samples] for t in inputs], output.detach()[samples]
        self.assert_matches_reference(sampled_output, sampled_inputs, params, dtype)
        sampled_grads = [t.grad[samples] if t.grad is not None else None for t in inputs]
        self.assert_gradients_close(sampled_grads, sampled_inputs, sampled_output, grad_output[samples], params)

    @requires_two_gpus
    @pytest.mark.cuda
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
    def test_inputs_on_the_second_gpu(self, dtype: torch.dtype) -> None:
        params = self.params[0]
        with torch.cuda.device(0):  # the current device is not the inputs'
            inputs = self.make_inputs((64, 4097), dtype, "cuda:1", requires_grad=True)
            grad_output = random_tensor((64, 4097), dtype, "cuda:1")
            output = self.call(inputs, params)
            output.backward(grad_output)
        assert output.device == torch.device("cuda:1")
        assert all(t.grad is not None and t.grad.device == output.device for t in inputs)
        self.assert_matches_reference(output, inputs, params, dtype)
        self.assert_gradients_close([t.grad for t in inputs], inputs, output, grad_output, params)

    @pytest.mark.parametrize(
        "device",
        [
            pytest.param("cpu", id="cpu-gloo"),
            pytest.param("cuda", id="cuda-nccl", marks=[requires_two_gpus, pytest.mark.cuda]),
        ],
    )
    def test_ddp_training_step_matches_reference(self, device: str, tmp_path: Path) -> None:
        package = type(self).__module__.rpartition(".")[0]
        check_ddp_training_step(
            op=f"{package}:{self.name}",
            reference=f"{package}.reference:reference_{self.name}",
            params=self.params[0],
            device_type=device,
            scratch=tmp_path,
            inputs=len(self.inputs),
        )


class OneInputSuite(TensorOpSuite):
    """Ops of one tensor input: the backward op refuses a gradient of another shape."""

    @on_devices
    def test_mismatched_shapes_are_refused(self, device: str) -> None:
        x = random_tensor((4, 5), torch.float32, device)
        grad_output = random_tensor((4, 6), torch.float32, device)
        with pytest.raises(RuntimeError, match=r"must have the same shape, but got \[4, 6\] and \[4, 5\]"):
            self.backward_op(grad_output, x, *self.params[0].values())
        # The process is intact and a correct call right after still succeeds.
        self.backward_op(x, x, *self.params[0].values())


class RefusedParamSuite(TensorOpSuite):
    """Ops with a param that takes only some values (softmax's dim, gelu's approximate)."""

    # A value the op refuses: (param name, value).
    bad_param: ClassVar[tuple[str, Any]]

    def test_bad_param_is_refused(self) -> None:
        name, value = self.bad_param
        with pytest.raises(RuntimeError, match=rf"argument '{name}' must be"):
            self.call(self.make_inputs((4,), torch.float32, "cpu"), {**self.params[0], name: value})


class BroadcastSuite(TensorOpSuite):
    """Ops of several tensor inputs, which broadcast and promote their dtypes as in PyTorch."""

    @classmethod
    def gradcheck_cases(cls) -> list[Shapes]:
        patterns = cls.broadcast_shapes()
        return [(4, 9), patterns[2], patterns[3]]

    @classmethod
    def opcheck_cases(cls) -> list[Shapes]:
        patterns = cls.broadcast_shapes()
        return [(4, 33), patterns[1], patterns[3]]

    def default_sanitizer_shapes(self) -> list[Shapes]:
        return [*self.shapes, *self.broadcast_shapes()]

    @on_devices
    @on_dtypes
    def test_broadcast_forward_matches_reference(
        self, device: str, dtype: torch.dtype, broadcast: tuple[tuple[int, ...], ...], params: dict[str, Any]
    ) -> None:
        inputs = self.make_inputs(broadcast, dtype, device)
        actual = self.call(inputs, params)
        assert actual.shape == torch.broadcast_shapes(*broadcast) and actual.dtype == dtype and actual.is_contiguous()
        self.assert_matches_reference(actual, inputs, params, dtype)

    @on_devices
    @on_dtypes
    def test_broadcast_backward_sums_to_each_input(
        self, device: str, dtype: torch.dtype, broadcast: tuple[tuple[int, ...], ...], params: dict[str, Any]
    ) -> None:
        inputs = self.make_inputs(broadcast, dtype, device, requires_grad=True)
        grad_output = random_tensor(torch.broadcast_shapes(*broadcast), dtype, device)
        output = self.call(inputs, params)
        output.backward(grad_output)
        self.assert_gradients_close([t.grad for t in inputs], inputs, output, grad_output, params)

    @on_devices
    def test_torch_compile_fullgraph_with_broadcasting(self, device: str) -> None:
        params = self.params[-1]
        compiled = torch.compile(self.module(**params), fullgraph=True)
        inputs = self.make_inputs(self.broadcast_shapes()[2], torch.float32, device, requires_grad=True)
        output = compiled(*inputs)
        self.assert_matches_reference(output, inputs, params, torch.float32)
        grad_output = random_tensor(output.shape, torch.float32, device)
        output.backward(grad_output)
        self.assert_gradients_close([t.grad for t in inputs], inputs, output, grad_output, params)

    @on_devices
    @pytest.mark.parametrize(
        "dtypes",
        [(torch.float32, torch.bfloat16), (torch.float16, torch.float64), (torch.bfloat16, torch.float16)],
        ids=lambda dtypes: "-".join(str(d).removeprefix("torch.") for d in dtypes),
    )
    def test_mixed_dtypes_promote_as_in_pytorch(self, device: str, dtypes: tuple[torch.dtype, torch.dtype]) -> None:
        params = self.params[-1]
        inputs = tuple(random_tensor((5, 7), dtypes[k % 2], device).requires_grad_() for k in range(len(self.inputs)))
        output = self.call(inputs, params)
        # The op's contract: its inputs promote together as in ``x + y`` (an input used only in a
        # condition of the formula still counts, where PyTorch's where() would leave it out).
        expected_dtype = functools.reduce(torch.promote_types, (t.dtype for t in inputs))
        assert output.dtype == expected_dtype
        assert self.call([t.detach().to("meta") for t in inputs], params).dtype == expected_dtype  # the fake kernel
        self.assert_matches_reference(output, inputs, params, expected_dtype)
        grad_output = random_tensor(output.shape, output.dtype, device)
        output.backward(grad_output)
        for t in inputs:  # each gradient in its input's dtype, as autograd gives for PyTorch's ops
            assert t.grad is not None and t.grad.dtype == t.dtype

    @on_devices
    def test_zero_dim_tensors_do_not_decide_the_dtype(self, device: str) -> None:
        # As in PyTorch: a 0-d float64 tensor with float16 tensors gives float16.
        params = self.params[-1]
        inputs = (random_tensor((), torch.float64, device), *self.make_inputs((3, 4), torch.float16, device)[1:])
        output = self.call(inputs, params)
        assert output.dtype == torch.float16 and output.shape == (3, 4)
        fake = self.call([t.to("meta") for t in inputs], params)  # the fake kernel (torch.compile)
        assert fake.dtype == torch.float16 and fake.shape == (3, 4)
        self.assert_matches_reference(output, inputs, params, torch.float16)

    @on_devices
    def test_shapes_that_do_not_broadcast_are_refused(self, device: str) -> None:
        params = self.params[-1]
        inputs = list(self.make_inputs((1,), torch.float32, device))
        inputs[0], inputs[1] = random_tensor((4, 5), torch.float32, device), random_tensor((4, 6), torch.float32, device)
        message = (
            rf"arguments '{self.inputs[0]}' and '{self.inputs[1]}' must have shapes that broadcast together, "
            r"but got \[4, 5\] and \[4, 6\]"
        )
        with pytest.raises(RuntimeError, match=message):
            self.call(inputs, params)
        with pytest.raises(RuntimeError, match=message):  # the fake kernel (torch.compile) says the same
            self.call([t.to("meta") for t in inputs], params)
        # The process is intact and a correct call right after still succeeds.
        inputs[1] = random_tensor((4, 5), torch.float32, device)
        self.assert_matches_reference(self.call(inputs, params), inputs, params, torch.float32)

    @on_devices
    def test_backward_refuses_a_grad_output_of_another_shape(self, device: str) -> None:
        inputs = self.make_inputs((4, 5), torch.float32, device)
        values = self.params[0].values()
        with pytest.raises(
            RuntimeError,
            match=r"argument 'grad_output' must have the shape of the forward's output \[4, 5\], but got \[4, 6\]",
        ):
            self.backward_op(random_tensor((4, 6), torch.float32, device), *inputs, *values)
        grads = self.backward_op(random_tensor((4, 5), torch.float32, device), *inputs, *values)
        assert len(grads) == len(self.inputs) and all(grad.shape == (4, 5) for grad in grads)

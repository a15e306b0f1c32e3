"""The generic tests of an op rendered from a typed spec (`opgen new --signature`, bitonic_sort).

A generated test file subclasses the suites its spec calls for (``OpSpec.test_suites``: always
:class:`OpSuite`, then :class:`GradientSuite` or :class:`NoGradientSuite`, and the suites of
optional and of several Tensor arguments where the op has them), sets the op, its reference and its tolerances,
and says how to make one valid call (:meth:`OpSuite.arguments`); every check here then runs for
its spec: forward against the float64 reference for every dtype and device, gradients and float64
gradcheck of each differentiable input, opcheck, torch.compile with fullgraph, absent optional
tensors, and each Tensor argument refused with a message naming it (wrong dtype, wrong device,
absent where required).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
import yaml

from opgen.spec import Argument, OpSpec
from opgen.testing import (
    DEFAULT_TOLERANCES,
    DEVICES,
    FLOAT_DTYPES,
    assert_close,
    assert_close_in_norm,
    assert_forward_mode_refused,
    assert_past_python_autograd,
    misaligned,
    non_contiguous,
    poison_allocator,
    requires_two_gpus,
)
from opgen.testing.sanitizer import TOOLS as SANITIZER_TOOLS
from opgen.testing.sanitizer import assert_clean_under_sanitizer

ANSWERS_FILE = ".copier-answers.yml"

on_devices = pytest.mark.parametrize("device", DEVICES)
on_cuda = pytest.mark.parametrize("device", [case for case in DEVICES if case.id == "cuda"])
on_dtypes = pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)


def load_spec(op_dir: Path | str) -> OpSpec:
    """The spec recorded in the op folder's answers file (what rendered the op)."""
    folder = Path(op_dir)
    answers = yaml.safe_load((folder / ANSWERS_FILE).read_text())
    return OpSpec.from_answers(answers["spec"])


def as_tuple(result: Any) -> tuple[torch.Tensor, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def to_float64(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The same call with every floating tensor in float64 (detached): the reference's inputs."""
    return {
        name: value.detach().double() if isinstance(value, torch.Tensor) and value.is_floating_point() else value
        for name, value in arguments.items()
    }


class OpSuite:
    """Forward, interface and refusal checks; subclasses set the class attributes below."""

    spec: ClassVar[OpSpec]
    op: Callable[..., Any]
    reference: Callable[..., Any]
    module: type[torch.nn.Module]
    tolerances: ClassVar[Mapping[torch.dtype, tuple[float, float]]] = DEFAULT_TOLERANCES
    # Shapes handed to `arguments`: small, odd, several dimensions.
    shapes: ClassVar[Sequence[tuple[int, ...]]] = ((1,), (3, 33), (2, 5, 70))
    # Just past 2**31 elements, so any 32-bit index in a kernel wraps.
    large_shape: ClassVar[tuple[int, ...]] = (2**31 + 4099,)
    # Whether the op's CUDA path runs cuBLAS (a sanitizer tool then must first pass torch's own GEMMs).
    uses_cublas: ClassVar[bool] = False
    # Whether the forward runs kernels of its own where no gradient is needed (the MLP's: nothing
    # kept for a backward); exercise_kernel_paths then runs each forward that way too.
    inference_kernels: ClassVar[bool] = False
    # Per dtype, a relative error in norm that each floating output as a whole must stay within, or
    # within twice the reference's own error in that dtype, whichever is larger (none: elementwise
    # only). For sums of many rounded products (GEMMs), whose elementwise tolerance must be wide
    # enough for one element's roundings and then lets a few percent of error everywhere pass.
    forward_norm_tolerance: ClassVar[Mapping[torch.dtype, float]] = {}

    def arguments(self, shape: tuple[int, ...], dtype: torch.dtype, device: str) -> dict[str, Any]:
        """Keyword arguments of one valid call whose tensors are built from ``shape``."""
        raise NotImplementedError("the op's test class says how to make its arguments")

    # -- helpers -----------------------------------------------------------------------------------
    @property
    def overload(self) -> Any:
        return getattr(torch.ops.generated_ops, self.spec.name).default

    def positional(self, arguments: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``arguments`` split as the schema takes them: positional, then keyword-only."""
        args = tuple(arguments[a.name] for a in self.spec.arguments if not a.keyword_only)
        kwargs = {a.name: arguments[a.name] for a in self.spec.arguments if a.keyword_only}
        return args, kwargs

    def assert_outputs_match(self, actual: Any, expected: Any, dtype: torch.dtype, device: str) -> None:
        """Each output against the reference's: integers exactly, floats within ``dtype``'s tolerance."""
        actual_outputs, expected_outputs = as_tuple(actual), as_tuple(expected)
        assert len(actual_outputs) == len(self.spec.outputs) == len(expected_outputs)
        for output, got, want in zip(self.spec.outputs, actual_outputs, expected_outputs, strict=True):
            assert got.device.type == torch.device(device).type, f"output '{output.name}' is on {got.device}"
            if output.integer:
                assert got.dtype == torch.int64, f"output '{output.name}' is {got.dtype}, not int64"
                assert got.shape == want.shape, f"output '{output.name}': shape {tuple(got.shape)} != {tuple(want.shape)}"
                assert torch.equal(got.cpu(), want.cpu()), f"output '{output.name}' differs from the reference"
            else:
                assert got.dtype == dtype, f"output '{output.name}' is {got.dtype}, not {dtype}"
                assert_close(got, want, self.tolerances, dtype=dtype)

    def check_against_reference(self, arguments: Mapping[str, Any], dtype: torch.dtype, device: str) -> None:
        actual = self.op(**arguments)
        expected = self.reference(**to_float64(arguments))
        self.assert_outputs_match(actual, expected, dtype, device)
        if dtype in self.forward_norm_tolerance:
            in_dtype = as_tuple(self.reference(**arguments))
            outputs = zip(self.spec.outputs, as_tuple(actual), as_tuple(expected), in_dtype, strict=True)
            tolerance = self.forward_norm_tolerance[dtype]
            for output, got, want, eager in outputs:
                if not output.integer and got.numel() > 0:
                    assert_close_in_norm(got, want, tolerance, name=f"output {output.name!r}", as_pytorch=eager)

    def tensor_arguments(self) -> list[Argument]:
        return list(self.spec.tensors)

    def run_once(self, arguments: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        """The op's outputs, and its backward run with random gradients where it has one."""
        outputs = as_tuple(self.op(**arguments))
        if self.spec.has_backward and any(out.requires_grad for out in outputs):
            floats = [o for o, s in zip(outputs, self.spec.outputs, strict=True) if s.differentiable]
            torch.autograd.backward(floats, [torch.randn_like(o) for o in floats])
        return outputs

    def exercise_kernel_paths(self) -> None:
        """Every CUDA kernel path once, forward and backward, aligned and one element off.

        The test module's ``__main__`` calls this; test_clean_under_compute_sanitizer runs the
        module under each compute-sanitizer tool, which then sees every load and store. With
        ``inference_kernels``, each forward also runs once with no gradient needed.
        """
        for dtype in FLOAT_DTYPES:
            for shape in self.shapes:
                for place in (lambda tensor: tensor, misaligned):
                    arguments = self.arguments(shape, dtype, "cuda")
                    tensors = [a.name for a in self.spec.tensors if arguments[a.name] is not None]
                    for name in tensors:
                        arguments[name] = place(arguments[name])
                    if self.inference_kernels:
                        with torch.no_grad():
                            self.op(**arguments)
                    for name in tensors:
                        arguments[name].requires_grad_(self.spec.has_backward)
                    self.run_once(arguments)
        torch.cuda.synchronize()

    # -- forward -------------------------------------------------------------------------------------
    @on_devices
    @on_dtypes
    def test_forward_matches_reference(self, device: str, dtype: torch.dtype) -> None:
        for shape in self.shapes:
            arguments = self.arguments(shape, dtype, device)
            poison_allocator(device, 64 * sum(int(torch.Size(shape).numel()) for _ in self.spec.outputs))
            self.check_against_reference(arguments, dtype, device)

    @on_devices
    def test_empty_tensors(self, device: str) -> None:
        self.check_against_reference(self.arguments((0, 3), torch.float32, device), torch.float32, device)

    @on_devices
    def test_non_contiguous_inputs(self, device: str) -> None:
        arguments = self.arguments(self.shapes[-1], torch.float32, device)
        strided = {
            name: non_contiguous(value) if isinstance(value, torch.Tensor) and value.dim() > 0 else value
            for name, value in arguments.items()
        }
        self.check_against_reference(strided, torch.float32, device)

    def module_call(self, arguments: Mapping[str, Any]) -> tuple[torch.nn.Module, dict[str, Any]]:
        """A module that computes ``self.op(**arguments)``, and the keyword arguments to call it with.

        By default the module holds the non-tensor arguments and takes the tensors; an op whose
        module holds tensors too (a linear layer's weight) says how to build it.
        """
        scalars = {a.name: arguments[a.name] for a in self.spec.scalars}
        tensors = {a.name: arguments[a.name] for a in self.spec.tensors}
        return self.module(**scalars), tensors

    @on_devices
    def test_module_matches_function(self, device: str) -> None:
        arguments = self.arguments(self.shapes[-1], torch.float32, device)
        module, call = self.module_call(arguments)
        for got, want in zip(as_tuple(module(**call)), as_tuple(self.op(**arguments)), strict=True):
            assert torch.equal(got, want)

    @on_devices
    def test_opcheck(self, device: str) -> None:
        # Schema, Meta kernels, autograd registration and torch.compile's AOT dispatch, checked by torch.
        arguments = self.arguments(self.shapes[-1], torch.float32, device)
        if self.spec.has_backward:
            for a in self.spec.tensors:
                if arguments[a.name] is not None:
                    arguments[a.name].requires_grad_()
        args, kwargs = self.positional(arguments)
        torch.library.opcheck(self.overload, args, kwargs)

    @on_devices
    def test_torch_compile_fullgraph(self, device: str) -> None:
        arguments = self.arguments(self.shapes[-1], torch.float32, device)
        module, call = self.module_call(arguments)
        # On the CPU through aot_eager: the same trace through the Meta kernels and autograd, without
        # inductor's C++ code generation (seconds a graph on the CPU, and the op is an extern call in it).
        backend = "inductor" if torch.device(device).type == "cuda" else "aot_eager"
        compiled = torch.compile(module, fullgraph=True, backend=backend)
        self.assert_outputs_match(compiled(**call), self.reference(**to_float64(arguments)), torch.float32, device)

    # -- streams, graphs, sanitizer, large and multi-GPU inputs -----------------------------------------
    @on_cuda
    def test_runs_on_a_side_stream(self, device: str) -> None:
        arguments = self.arguments(self.shapes[-1], torch.float32, device)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            actual = self.op(**arguments)  # must launch on `side`, the current stream here
        torch.cuda.current_stream().wait_stream(side)
        self.assert_outputs_match(actual, self.reference(**to_float64(arguments)), torch.float32, device)

    @on_cuda
    def test_forward_replays_in_a_cuda_graph(self, device: str) -> None:
        arguments = self.arguments(self.shapes[-1], torch.float32, device)
        side = torch.cuda.Stream()  # warm up off the default stream, as CUDA graph capture asks
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self.op(**arguments)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = self.op(**arguments)
        fresh = self.arguments(self.shapes[-1], torch.float32, device)
        for a in self.spec.tensors:  # new values in the captured buffers, then replay
            if arguments[a.name] is not None:
                arguments[a.name].copy_(fresh[a.name])
        graph.replay()
        torch.cuda.synchronize()
        self.assert_outputs_match(captured, self.reference(**to_float64(arguments)), torch.float32, device)

    @on_cuda
    @pytest.mark.sanitize
    @pytest.mark.parametrize("tool", SANITIZER_TOOLS)
    def test_clean_under_compute_sanitizer(self, device: str, tool: str) -> None:
        assert_clean_under_sanitizer(tool, type(self).__module__, uses_cublas=self.uses_cublas)

    @on_cuda
    def test_more_than_2_31_elements(self, device: str) -> None:
        dtype = torch.bfloat16
        numel = int(torch.Size(self.large_shape).numel())
        needed = 2 * (len(self.spec.tensors) + 4 * len(self.spec.outputs)) * numel * dtype.itemsize + (1 << 30)
        free, _ = torch.cuda.mem_get_info()
        if free < needed:
            pytest.skip(f"needs {needed / 2**30:.1f} GiB of free GPU memory for {numel:,} elements, {free / 2**30:.1f} GiB free")
        arguments = self.arguments(self.large_shape, dtype, device)
        actual = as_tuple(self.op(**arguments))
        # The reference in the same dtype (float64 copies would not fit), compared on the GPU.
        expected = as_tuple(self.reference(**arguments))
        for output, got, want in zip(self.spec.outputs, actual, expected, strict=True):
            if output.integer:
                assert torch.equal(got, want), f"output '{output.name}' differs from the reference"
            else:
                rtol, atol = self.tolerances[dtype]
                torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True)
        del actual, expected

    @requires_two_gpus
    @pytest.mark.cuda
    def test_inputs_on_the_second_gpu(self) -> None:
        with torch.cuda.device(0):  # the current device is not the inputs'
            arguments = self.arguments(self.shapes[-1], torch.float32, "cuda:1")
            actual = self.op(**arguments)
        assert all(out.device == torch.device("cuda:1") for out in as_tuple(actual))
        self.assert_outputs_match(actual, self.reference(**to_float64(arguments)), torch.float32, "cuda")

    # -- refusals --------------------------------------------------------------------------------------
    @on_devices
    def test_each_tensor_of_a_wrong_dtype_is_refused(self, device: str) -> None:
        for a in self.spec.tensors:
            arguments = self.arguments(self.shapes[-1], torch.float32, device)
            if arguments[a.name] is None:
                continue
            arguments[a.name] = arguments[a.name].to(torch.int32)
            with pytest.raises(RuntimeError, match=rf"{self.spec.name}: argument.* '{a.name}'.* dtype|{self.spec.name}: argument '{a.name}' must be float32"):
                self.op(**arguments)
        # The process is intact: a correct call right after still succeeds.
        self.op(**self.arguments(self.shapes[-1], torch.float32, device))

    def test_each_required_tensor_absent_is_refused(self) -> None:
        for a in self.spec.tensors:
            if a.optional:
                continue
            arguments = self.arguments(self.shapes[-1], torch.float32, "cpu") | {a.name: None}
            with pytest.raises((RuntimeError, TypeError)):
                self.op(**arguments)


class OptionalTensorsSuite(OpSuite):
    """For ops with ``Tensor?`` arguments: each may be left out."""

    @on_devices
    def test_absent_optional_tensors(self, device: str) -> None:
        for a in self.spec.tensors:
            if a.optional:
                arguments = self.arguments(self.shapes[-1], torch.float32, device) | {a.name: None}
                self.check_against_reference(arguments, torch.float32, device)


class SeveralTensorsSuite(OpSuite):
    """For ops of several Tensor arguments: one on another device is refused, naming it."""

    @on_cuda
    def test_each_tensor_on_a_wrong_device_is_refused(self, device: str) -> None:
        for a in self.spec.tensors:
            arguments = self.arguments(self.shapes[-1], torch.float32, device)
            if arguments[a.name] is None:
                continue
            arguments[a.name] = arguments[a.name].cpu()
            with pytest.raises(RuntimeError, match=rf"argument.* '{a.name}'"):
                self.op(**arguments)
        self.op(**self.arguments(self.shapes[-1], torch.float32, device))


class GradientSuite(OpSuite):
    """Gradient checks, for ops with a backward."""

    def differentiable(self, arguments: Mapping[str, Any]) -> list[str]:
        """The tensor arguments present in this call that get gradients."""
        return [a.name for a in self.spec.differentiable_inputs if arguments[a.name] is not None]

    @on_devices
    @on_dtypes
    def test_backward_matches_reference(self, device: str, dtype: torch.dtype) -> None:
        arguments = self.arguments(self.shapes[-1], dtype, device)
        names = self.differentiable(arguments)
        for name in names:
            arguments[name].requires_grad_()
        outputs = as_tuple(self.op(**arguments))
        float_outputs = [out for out, spec in zip(outputs, self.spec.outputs, strict=True) if spec.differentiable]
        grad_outputs = [torch.randn_like(out) for out in float_outputs]
        poison_allocator(device, 64 * sum(arguments[name].numel() for name in names))
        grads = torch.autograd.grad(float_outputs, [arguments[n] for n in names], grad_outputs, allow_unused=True)

        reference_arguments = to_float64(arguments)
        for name in names:
            reference_arguments[name].requires_grad_()
        reference_outputs = as_tuple(self.reference(**reference_arguments))
        reference_floats = [o for o, s in zip(reference_outputs, self.spec.outputs, strict=True) if s.differentiable]
        expected = torch.autograd.grad(
            reference_floats, [reference_arguments[n] for n in names], [g.double() for g in grad_outputs], allow_unused=True
        )
        for name, got, want in zip(names, grads, expected, strict=True):
            assert got is not None, f"'{name}' got no gradient"
            want = torch.zeros_like(reference_arguments[name]) if want is None else want
            assert got.dtype == arguments[name].dtype and got.shape == arguments[name].shape, name
            assert_close(got, want, self.tolerances, dtype=dtype)

    @on_devices
    def test_double_backward_raises_a_clear_error(self, device: str) -> None:
        # The backward op has no derivative: a gradient of a gradient fails at once, naming the op,
        # instead of PyTorch's "autograd kernel was not registered" warning and an unrelated error.
        arguments = self.arguments(self.shapes[1], torch.float64, device)
        names = self.differentiable(arguments)
        for name in names:
            arguments[name].requires_grad_()
        outputs = as_tuple(self.op(**arguments))
        floats = [out for out, spec in zip(outputs, self.spec.outputs, strict=True) if spec.differentiable]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            grads = torch.autograd.grad(
                floats, [arguments[n] for n in names], [torch.ones_like(o) for o in floats], create_graph=True,
                allow_unused=True,
            )  # fmt: skip
            used = [g for g in grads if g is not None and g.requires_grad]
            assert used, "no gradient to differentiate"
            with pytest.raises(RuntimeError, match=rf"{self.spec.name}: its backward is not differentiable"):
                torch.autograd.grad(torch.stack([g.sum() for g in used]).sum(), [arguments[n] for n in names], allow_unused=True)
        assert not [w for w in caught if "autograd kernel was not registered" in str(w.message)]

    @on_devices
    def test_forward_mode_ad_raises_a_clear_error(self, device: str) -> None:
        # No kernel has a forward-mode formula: a tangent fails at once, naming the op, instead of
        # being dropped below torch.library's reverse-mode autograd.
        arguments = self.arguments(self.shapes[1], torch.float64, device)
        names = self.differentiable(arguments)
        assert_forward_mode_refused(
            self.spec.name, lambda **tensors: self.op(**(arguments | tensors)), {n: arguments[n] for n in names}
        )

    @on_devices
    def test_a_call_needing_no_gradient_runs_no_python_autograd(self, device: str) -> None:
        # torch.library's autograd kernel is Python, costing more than a small op's kernel: a call
        # that records no gradient (under no_grad, or with no input requiring one) goes past it.
        arguments = self.arguments(self.shapes[1], torch.float32, device)
        with torch.no_grad():
            assert_past_python_autograd(lambda: self.op(**arguments))
        assert_past_python_autograd(lambda: self.op(**arguments))

    @on_devices
    def test_gradcheck_float64(self, device: str) -> None:
        arguments = self.arguments(self.shapes[1], torch.float64, device)
        names = self.differentiable(arguments)
        inputs = tuple(arguments[name].detach().requires_grad_() for name in names)

        def differentiable_outputs(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
            outputs = as_tuple(self.op(**(arguments | dict(zip(names, tensors, strict=True)))))
            return tuple(out for out, spec in zip(outputs, self.spec.outputs, strict=True) if spec.differentiable)

        assert torch.autograd.gradcheck(differentiable_outputs, inputs, eps=1e-6, atol=1e-5)


class NoGradientSuite(OpSuite):
    """For ops without a backward (`--no-grad`): their outputs never require a gradient."""

    @on_devices
    def test_outputs_carry_no_gradient(self, device: str) -> None:
        arguments = self.arguments(self.shapes[-1], torch.float32, device)
        for a in self.spec.tensors:
            if arguments[a.name] is not None:
                arguments[a.name].requires_grad_()
        for output in as_tuple(self.op(**arguments)):
            assert not output.requires_grad

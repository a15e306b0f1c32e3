"""The tests of a norm op (`opgen new layernorm`, `opgen new rmsnorm`, their `--residual` forms).

:class:`NormSuite` adds to the generic suites of :mod:`opgen.testing.op_suite` what a norm needs:
the weight and bias gradients against float64 autograd, parameters in float32 beside half-precision
inputs, absent parameters, rows of constant value, huge and tiny values, one row and one column,
every kernel path's row lengths, the weight gradient's bits the same on a second run, and the
``nn.Module`` form as a drop-in for torch's (same parameter names, same results). A generated test
file sets the op, its reference, its module and torch's module; the arguments come from its spec.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
import torch

from opgen.testing import (
    FLOAT_DTYPES,
    assert_close,
    assert_past_python_autograd,
    misaligned,
    poison_allocator,
    random_tensor,
    shapes_filled_by,
)
from opgen.testing.op_suite import (
    GradientSuite,
    OptionalTensorsSuite,
    SeveralTensorsSuite,
    as_tuple,
    on_cuda,
    on_devices,
    on_dtypes,
    to_float64,
)
from opgen.testing.sanitizer import TOOLS as SANITIZER_TOOLS
from opgen.testing.sanitizer import assert_clean_under_sanitizer

# Row lengths that pick each CUDA kernel path and sit at its edges: a row in registers of 1 to 512
# threads (16-byte packs where the length is a multiple of a pack, one value a load where not; up
# to 16384 float32 / 32768 bfloat16 values forward, half that with a residual, 4096 / 8192
# backward, 16384 / 4096 on the one-value path), over a cluster of 2 to 16 blocks (16 times the
# register rows), and the long-row path past those; double stops at 4096 forward and 1024 backward
# in registers.
PATH_ROW_LENGTHS = [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33, 64, 127, 128, 129, 1000, 1024, 1025, 2048, 2049,
                    4096, 4097, 4104, 8192, 8200, 16384, 16392, 32768, 32776, 65536, 65544, 131072, 131080, 262144,
                    262152, 300000, 524296]  # fmt: skip

# The sanitizer's run of every kernel path (exercise_kernel_paths) in pieces, each in a process of
# its own: a dtype's row lengths up to 8200 (rows in one block's registers), up to 65544
# (clusters), up to 262152 (the widest clusters and the slices backward), then the longest (the
# long-row kernels). Under racecheck the whole run took over 240 s an op on an H200 and was never
# judged: rows of 131072 and more took 10-35 s each there (2026-11-25, 16 pieces at once), where
# the whole first piece took 12-28 s. The pieces together run every case the whole run did.
# A piece is named "{part}_{dtype}" (no name inside another, for pytest's -k).
ROW_PARTS = {"short": 8200, "mid": 65544, "long": 262152, "longest": max(PATH_ROW_LENGTHS)}


def _part_lengths(part: str) -> list[int]:
    bounds = list(ROW_PARTS.values())
    upper = ROW_PARTS[part]
    lower = max((bound for bound in bounds if bound < upper), default=0)
    return [n for n in PATH_ROW_LENGTHS if lower < n <= upper]


SANITIZER_PIECES: dict[str, tuple[torch.dtype, list[int]]] = {
    f"{part}_{str(dtype).removeprefix('torch.')}": (dtype, _part_lengths(part))
    for dtype in FLOAT_DTYPES
    for part in ROW_PARTS
}

# Magnitudes far from 1 that the dtype's squares still hold (a float32 of 1e20 would square to inf
# in torch's float32 math as in ours).
HUGE = {torch.float64: 1e100, torch.float32: 1e15, torch.float16: 1e3, torch.bfloat16: 1e15}
TINY = {torch.float64: 1e-100, torch.float32: 1e-15, torch.float16: 1e-3, torch.bfloat16: 1e-15}


class NormSuite(GradientSuite, OptionalTensorsSuite, SeveralTensorsSuite):
    """Every check of a norm op; the test class sets op, reference, module and torch_module."""

    torch_module: ClassVar[type[torch.nn.Module]]
    # Rows of 2048 just past 2**31 elements in all: 64-bit offsets on the register-row path.
    large_shape: ClassVar[tuple[int, ...]] = (2**20 + 7, 2048)

    # -- the op's arguments, from its spec ---------------------------------------------------------
    @property
    def residual(self) -> bool:
        return bool(self.spec.extra.get("residual"))

    @property
    def parameters(self) -> list[str]:
        """weight, and bias for LayerNorm."""
        return [a.name for a in self.spec.tensors if a.optional]

    def arguments(
        self, shape: tuple[int, ...], dtype: torch.dtype, device: str, *, parameter_dtype: torch.dtype | None = None
    ) -> dict[str, Any]:
        arguments: dict[str, Any] = {"x": random_tensor(shape, dtype, device)}
        if self.residual:
            arguments["residual"] = random_tensor(shape, dtype, device)
        for name in self.parameters:
            arguments[name] = random_tensor(shape[-1:], parameter_dtype or dtype, device)
        for a in self.spec.scalars:
            arguments[a.name] = a.default
        return arguments

    def reference_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The reference's float64 call.

        eps=None is the inputs' dtype's eps. A --residual op normalizes x + residual rounded to x's
        dtype, as eager PyTorch in that dtype does, so its reference gets that sum as x (and a zero
        residual): the gradient of its x is then what the op gives x and residual alike.
        """
        call = to_float64(arguments)
        if "eps" in call and call["eps"] is None:  # F.rms_norm's default is the dtype's eps, not float64's
            call["eps"] = torch.finfo(arguments["x"].dtype).eps
        if self.residual:
            call["x"] = (arguments["x"].detach() + arguments["residual"].detach()).double()
            call["residual"] = torch.zeros_like(call["x"])
        return call

    def largest_rstd(self, reference_call: Mapping[str, Any]) -> float:
        """The largest 1 / (a row's RMS or standard deviation): dx's terms scale with it."""
        x = reference_call["x"].detach()
        if x.numel() == 0:
            return 1.0
        if self.spec.extra.get("centered"):
            x = x - x.mean(-1, keepdim=True)
        eps = reference_call.get("eps") or 0.0
        return max(1.0, float((x.pow(2).mean(-1) + eps).rsqrt().max()))

    def largest_input_over_spread(self, reference_call: Mapping[str, Any]) -> float:
        """The largest |x| / (its row's RMS or standard deviation), over rows.

        A centered row's outputs are (x - mean) * rstd: x - mean rounds at x's ulp, so their error
        grows with |x| * rstd, not with the outputs (a float32 row of two values 3e-3 apart, near
        1, missed float64 by 1.7e-5 at an output of 0.4 on an H200).
        """
        x = reference_call["x"].detach()
        if x.numel() == 0 or x.shape[-1] == 0:
            return 1.0
        spread = x - x.mean(-1, keepdim=True) if self.spec.extra.get("centered") else x
        eps = reference_call.get("eps") or 0.0
        rstd = (spread.pow(2).mean(-1) + eps).rsqrt()
        return max(1.0, float((x.abs().amax(-1) * rstd).max()))

    def check_against_reference(self, arguments: Mapping[str, Any], dtype: torch.dtype, device: str) -> None:
        self.assert_outputs_match(self.op(**arguments), self.reference(**self.reference_arguments(arguments)), dtype, device)

    @on_devices
    @on_dtypes
    def test_backward_matches_reference(self, device: str, dtype: torch.dtype) -> None:
        self.check_step(self.arguments(self.shapes[-1], dtype, device), dtype)

    def check_step(self, arguments: Mapping[str, Any], dtype: torch.dtype) -> dict[str, torch.Tensor]:
        """Forward and every gradient against float64 autograd of the reference; returns the gradients.

        Gradients are sums whose terms cancel (dx's three terms, dweight's rows), so their absolute
        tolerance scales with the largest of them, bounded by the largest expected gradient or the
        largest product of an output gradient, a weight and a row's rstd, rather than with each
        element (a float32 row of one value near 0 cancels terms of rstd * dy * weight to eps).
        """
        names = [name for name, value in arguments.items() if isinstance(value, torch.Tensor)]
        inputs = {name: arguments[name].detach().clone().requires_grad_() for name in names}
        call = dict(arguments) | inputs
        outputs = as_tuple(self.op(**call))
        grad_outputs = [random_tensor(out.shape, out.dtype, str(out.device), scale=1.0) for out in outputs]
        poison_allocator(str(outputs[0].device), 64 * outputs[0].numel())
        grads = torch.autograd.grad(outputs, [inputs[n] for n in names], grad_outputs)

        reference_call = self.reference_arguments(call)
        for name in names:
            reference_call[name].requires_grad_()
        expected = as_tuple(self.reference(**reference_call))
        rtol, atol = self.tolerances[dtype]
        weight = arguments.get("weight")
        largest_weight = float(weight.abs().max()) if weight is not None and weight.numel() else 1.0
        conditioning = self.largest_input_over_spread(reference_call) * largest_weight
        for got, want in zip(outputs, expected, strict=True):
            assert got.dtype == dtype
            # y = x_hat * weight + bias: each term is rounded in the compute dtype, so where they
            # cancel the absolute error follows the largest term, not the small element (on the
            # H200 a float32 row of 262144 missed 1e-6 by 2e-7 at a y of 0.005 beside terms of 9),
            # and x_hat's own error follows |x| * rstd (largest_input_over_spread).
            scale = max(1.0, float(want.detach().abs().max()) if want.numel() else 1.0, conditioning)
            assert_close(got, want, {dtype: (rtol, atol * scale)}, dtype=dtype)
        expected_grads = torch.autograd.grad(expected, [reference_call[n] for n in names], [g.double() for g in grad_outputs])
        wanted = dict(zip(names, expected_grads, strict=True))
        term_scale = max((float(g.abs().max()) for g in grad_outputs if g.numel()), default=1.0) * largest_weight
        term_scale *= self.largest_rstd(reference_call)
        # Every gradient is built from x_hat, whose error in a centered row grows with |x| * rstd
        # (x - mean rounds at x's ulp): on the H200 a float32 row of three values near 5.56, 0.026
        # apart, missed dx by 3e-3 beside terms of 165 (|x| * rstd 218).
        x_hat_growth = self.largest_input_over_spread(reference_call) if self.spec.extra.get("centered") else 1.0
        if self.residual:  # the reference's x stands for the sum: its gradient is x's and residual's
            wanted["residual"] = wanted["x"]
        for name, got in zip(names, grads, strict=True):
            want = wanted[name]
            assert got.dtype == arguments[name].dtype, f"grad of {name} is {got.dtype}"
            # A float32 parameter's gradient beside half-precision inputs is held to the inputs'
            # tolerance: its float32 sum of products of 16-bit values cancels as theirs does.
            scale = max(1.0, float(want.abs().max()) if want.numel() else 1.0, term_scale) * x_hat_growth
            try:
                assert_close(got, want, {dtype: (rtol, atol * scale)}, dtype=dtype)
            except AssertionError as error:
                raise AssertionError(f"gradient of '{name}': {error}") from None
        return dict(zip(names, grads, strict=True))

    # -- overrides: the module holds its parameters, as torch's does ---------------------------------
    def make_module(self, arguments: Mapping[str, Any]) -> torch.nn.Module:
        x = arguments["x"]
        eps = arguments.get("eps")
        module = self.module(x.shape[-1], eps=eps, device=x.device, dtype=x.dtype)
        with torch.no_grad():
            for name in self.parameters:
                getattr(module, name).copy_(arguments[name])
        return module

    def module_inputs(self, arguments: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        return (arguments["x"], arguments["residual"]) if self.residual else (arguments["x"],)

    @on_devices
    def test_module_matches_function(self, device: str) -> None:
        arguments = self.arguments(self.shapes[-1], torch.float32, device)
        module = self.make_module(arguments)
        for got, want in zip(as_tuple(module(*self.module_inputs(arguments))), as_tuple(self.op(**arguments)), strict=True):
            assert torch.equal(got, want)

    @on_devices
    def test_torch_compile_fullgraph(self, device: str) -> None:
        arguments = self.arguments(self.shapes[-1], torch.float32, device)
        backend = "inductor" if torch.device(device).type == "cuda" else "aot_eager"
        compiled = torch.compile(self.make_module(arguments), fullgraph=True, backend=backend)
        self.assert_outputs_match(
            compiled(*self.module_inputs(arguments)), self.reference(**to_float64(arguments)), torch.float32, device
        )

    # -- what a norm adds ------------------------------------------------------------------------------
    @on_devices
    @on_dtypes
    def test_gradients_of_x_weight_and_bias(self, device: str, dtype: torch.dtype) -> None:
        self.check_step(self.arguments((16, 300), dtype, device), dtype)

    @on_devices
    @pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
    def test_float32_parameters_with_half_inputs(self, device: str, dtype: torch.dtype) -> None:
        grads = self.check_step(self.arguments((8, 1024), dtype, device, parameter_dtype=torch.float32), dtype)
        assert all(grads[name].dtype == torch.float32 for name in self.parameters)

    @on_devices
    def test_parameters_absent(self, device: str) -> None:
        # Each parameter left out alone, then all of them (F.layer_norm's weight=None, bias=None).
        for absent in [[name] for name in self.parameters] + [self.parameters]:
            arguments = self.arguments((6, 96), torch.float32, device)
            for name in absent:
                arguments[name] = None
            self.check_step(arguments, torch.float32)

    @on_devices
    @on_dtypes
    def test_rows_of_constant_value(self, device: str, dtype: torch.dtype) -> None:
        # Zero variance: LayerNorm's rows become the bias, and nothing divides by zero.
        arguments = self.arguments((5, 1000), dtype, device)
        arguments["x"] = torch.full_like(arguments["x"], 2.5)
        if self.residual:
            arguments["residual"] = torch.full_like(arguments["residual"], -0.75)
        grads = self.check_step(arguments, dtype)
        assert all(torch.isfinite(g).all() for g in grads.values())

    @on_devices
    @on_dtypes
    @pytest.mark.parametrize("magnitude", ["huge", "tiny"])
    def test_huge_and_tiny_values(self, device: str, dtype: torch.dtype, magnitude: str) -> None:
        scale = (HUGE if magnitude == "huge" else TINY)[dtype]
        arguments = self.arguments((4, 777), dtype, device)
        arguments["x"] = random_tensor(arguments["x"].shape, dtype, device, scale=scale)
        if self.residual:
            arguments["residual"] = random_tensor(arguments["x"].shape, dtype, device, scale=scale)
        outputs = as_tuple(self.op(**arguments))
        assert all(torch.isfinite(out).all() for out in outputs)
        self.check_step(arguments, dtype)

    @on_devices
    @on_dtypes
    @pytest.mark.parametrize("shape", [(1, 4096), (1, 3), (9, 1), (2, 3, 1)], ids=str)
    def test_one_row_and_one_column(self, device: str, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
        self.check_step(self.arguments(shape, dtype, device), dtype)

    @on_devices
    @on_dtypes
    @pytest.mark.parametrize("row_length", PATH_ROW_LENGTHS)
    def test_every_kernel_path(self, device: str, dtype: torch.dtype, row_length: int) -> None:
        self.check_step(self.arguments((3, row_length), dtype, device), dtype)

    @on_cuda
    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
    @pytest.mark.parametrize("shape", [(200, 32768), (64, 131072), (40, 262144)], ids=str)
    def test_many_long_rows(self, device: str, dtype: torch.dtype, shape: tuple[int, int]) -> None:
        # More rows than the GPU holds clusters at once: each cluster (and the slices backward's)
        # loops over several rows, summing the parameters' gradients across them and bringing its
        # next rows in ahead, which the path tests' three rows never reach.
        self.check_step(self.arguments(shape, dtype, device), dtype)

    @on_devices
    @pytest.mark.parametrize("row_length", [64, 1024, 32768])
    def test_misaligned_inputs(self, device: str, row_length: int) -> None:
        arguments = self.arguments((3, row_length), torch.bfloat16, device)
        for name in ("x", "residual", *self.parameters):
            if name in arguments:
                arguments[name] = misaligned(arguments[name])
        self.check_step(arguments, torch.bfloat16)

    @on_devices
    @pytest.mark.parametrize("shape", [(2000, 1000), (4096, 1024), (96, 65536), (3, 300000)], ids=str)
    def test_weight_gradient_is_deterministic(self, device: str, shape: tuple[int, int]) -> None:
        if device == "cpu":
            shape = (shape[0] // 8 or 1, shape[1])
        arguments = self.arguments(shape, torch.bfloat16, device, parameter_dtype=torch.float32)
        names = ["x", *self.parameters]
        for name in names:
            arguments[name].requires_grad_()
        grad_output = random_tensor(shape, torch.bfloat16, device, scale=1.0)

        def gradients() -> tuple[torch.Tensor, ...]:
            output = as_tuple(self.op(**arguments))[0]
            return torch.autograd.grad(output, [arguments[n] for n in names], grad_output)

        first, second = gradients(), gradients()
        for name, a, b in zip(names, first, second, strict=True):
            assert torch.equal(a, b), f"the gradient of '{name}' differs between two runs"

    @on_devices
    def test_module_is_a_drop_in_for_torch(self, device: str) -> None:
        arguments = self.arguments((4, 7, 64), torch.float32, device)
        theirs = self.torch_module(64, eps=arguments.get("eps"), device=device)
        with torch.no_grad():
            for name in self.parameters:
                getattr(theirs, name).copy_(arguments[name])
        ours = self.module(64, eps=arguments.get("eps"), device=device)
        ours.load_state_dict(theirs.state_dict())  # the same parameter names
        x = arguments["x"]
        expected = theirs(x + arguments["residual"]) if self.residual else theirs(x)
        got = as_tuple(ours(*self.module_inputs(arguments)))[0]
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        plain = self.module(64, elementwise_affine=False, device=device)
        assert all(getattr(plain, name) is None for name in self.parameters)

    def test_module_initializes_from_the_meta_device_as_torch_does(self) -> None:
        # Large models are built on the meta device, then to_empty() and reset_parameters() (FSDP's
        # deferred initialization): the drop-in must take that path too. Poisoned before the reset,
        # so a parameter it leaves alone shows.
        ours: Any = self.module(64, device="meta").to_empty(device="cpu")
        theirs: Any = self.torch_module(64, device="meta").to_empty(device="cpu")
        with torch.no_grad():
            for parameter in ours.parameters():
                parameter.fill_(float("nan"))
        ours.reset_parameters()
        theirs.reset_parameters()
        for name in self.parameters:
            torch.testing.assert_close(getattr(ours, name), getattr(theirs, name), rtol=0, atol=0)

    @on_devices
    @on_dtypes
    def test_default_eps(self, device: str, dtype: torch.dtype) -> None:
        # F.rms_norm's eps=None is torch.finfo(x.dtype).eps; F.layer_norm's default is 1e-5.
        eps = next(a for a in self.spec.scalars if a.name == "eps")
        arguments = self.arguments((3, 100), dtype, device)
        explicit = torch.finfo(dtype).eps if eps.default is None else eps.default
        assert torch.equal(as_tuple(self.op(**arguments))[0], as_tuple(self.op(**(arguments | {"eps": explicit})))[0])

    @on_devices
    def test_outputs_and_their_gradients(self, device: str) -> None:
        arguments = self.arguments((4, 256), torch.float32, device)
        x = arguments["x"].requires_grad_()
        result = self.op(**arguments)
        if not self.residual:  # one tensor, as F.layer_norm and F.rms_norm return
            assert isinstance(result, torch.Tensor)
            return
        # (y, x + residual): the sum's gradient reaches x (and residual) even where y's is unused.
        _, residual_out = result
        assert torch.equal(residual_out, (arguments["x"] + arguments["residual"]).detach())
        (grad_x,) = torch.autograd.grad(residual_out, [x], torch.ones_like(residual_out))
        assert torch.equal(grad_x, torch.ones_like(x))

    @on_devices
    def test_backward_fills_no_gradient_for_the_statistics(self, device: str) -> None:
        # The statistics the forward keeps (one a row) have no gradient: autograd must not fill
        # zeros for them, a kernel launch each, on every training step.
        arguments = self.arguments((300, 64), torch.float32, device)
        x = arguments["x"].requires_grad_()
        y = as_tuple(self.op(**arguments))[0]
        filled = shapes_filled_by(lambda: torch.autograd.grad(y, [x], torch.ones_like(y)))
        assert [300] not in filled, filled

    @on_devices
    def test_a_training_step_runs_no_python_autograd(self, device: str) -> None:
        # The autograd formula is C++ (the op's csrc/<op>.cpp): torch.library's Python autograd
        # took a small norm's step to twice eager's host time.
        arguments = self.arguments((4, 64), torch.float32, device)
        inputs = [arguments[name].requires_grad_() for name in self.differentiable(arguments)]

        def step() -> None:
            outputs = as_tuple(self.op(**arguments))
            torch.autograd.grad(outputs, inputs, [torch.ones_like(out) for out in outputs])

        assert_past_python_autograd(step, training=True)

    def exercise_kernel_paths(self, *pieces: str) -> None:
        """Every CUDA kernel path forward and backward, aligned and one element off (the sanitizer's run).

        ``pieces``: names in SANITIZER_PIECES to run (every piece when none); each row length's
        seconds are printed, so a sanitizer's log says where its time went.
        """
        unknown = [piece for piece in pieces if piece not in SANITIZER_PIECES]
        if unknown:
            raise SystemExit(f"unknown piece(s) {', '.join(unknown)}; the pieces: {', '.join(SANITIZER_PIECES)}")
        for piece in pieces or tuple(SANITIZER_PIECES):
            dtype, row_lengths = SANITIZER_PIECES[piece]
            for row_length in row_lengths:
                began = time.perf_counter()
                for place in (lambda tensor: tensor, misaligned):
                    arguments = self.arguments((2, row_length), dtype, "cuda")
                    for name, value in arguments.items():
                        if isinstance(value, torch.Tensor):
                            arguments[name] = place(value).requires_grad_()
                    self.run_once(arguments)
                torch.cuda.synchronize()
                print(f"{piece}: rows of {row_length}: {time.perf_counter() - began:.2f} s", flush=True)

    @on_cuda
    @pytest.mark.sanitize
    @pytest.mark.parametrize("piece", list(SANITIZER_PIECES))
    @pytest.mark.parametrize("tool", SANITIZER_TOOLS)
    def test_clean_under_compute_sanitizer(self, device: str, tool: str, piece: str) -> None:  # type: ignore[override]
        # One process a piece (see SANITIZER_PIECES): every piece of every tool is its own test
        # (pytest's parameters, so the signature differs from OpSuite's).
        assert_clean_under_sanitizer(tool, type(self).__module__, uses_cublas=self.uses_cublas, arguments=[piece])

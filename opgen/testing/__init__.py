"""Helpers the generated tests share: devices, dtypes, inputs, poisoning and comparison.

Kept in opgen rather than pasted into every test file; the parts an op author tunes (its
tolerances, shapes and reference) stay in the op's own test file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
import torch

FLOAT_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

# (rtol, atol) against the float64 reference: a few units in the last place of each dtype.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-9),
    torch.float32: (1e-5, 1e-6),
    torch.float16: (2e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}

NO_GPU_REASON = "no CUDA GPU found (torch.cuda.is_available() is False): CUDA tests run on a GPU machine"

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU_REASON)


def _gpu_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


requires_two_gpus = pytest.mark.skipif(
    _gpu_count() < 2, reason=f"needs two CUDA GPUs, found {_gpu_count()}: multi-GPU tests run on a machine with two or more"
)

# Parametrize over these: the CUDA case is reported as skipped, with the reason, without a GPU.
DEVICES = (pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=[requires_cuda, pytest.mark.cuda]))


def random_tensor(
    shape: Sequence[int], dtype: torch.dtype, device: str, *, scale: float = 3.0, generator_seed: int | None = None
) -> torch.Tensor:
    """Fresh normal values times ``scale``: never all zero, signs mixed, a few large entries."""
    if generator_seed is not None:  # reproducible: drawn on the CPU, whatever the device
        generator = torch.Generator().manual_seed(generator_seed)
        values = torch.randn(tuple(shape), dtype=torch.float64, generator=generator) * scale
        return values.to(dtype=dtype, device=device)
    # On the device itself: drawing 2^31 values on the CPU takes minutes, on a GPU milliseconds.
    return (torch.randn(tuple(shape), dtype=torch.float64, device=device) * scale).to(dtype)


def non_contiguous(tensor: torch.Tensor) -> torch.Tensor:
    """The same values as ``tensor`` in a non-contiguous view (every other element of a wider buffer)."""
    if tensor.dim() == 0:
        return tensor
    wide = torch.full(
        (*tensor.shape[:-1], tensor.shape[-1] * 2), float("nan"), dtype=tensor.dtype, device=tensor.device
    )
    view = wide[..., ::2]
    view.copy_(tensor)
    assert tensor.numel() <= 1 or not view.is_contiguous()
    return view


def misaligned(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of ``tensor`` starting one element past a 16-byte boundary.

    Kernels that load 16 bytes at a time must notice and take their scalar path.
    """
    buffer = torch.empty(tensor.numel() + 1, dtype=tensor.dtype, device=tensor.device)
    view = buffer[1:].view(tensor.shape)
    view.copy_(tensor)
    assert tensor.numel() == 0 or view.data_ptr() % 16 != 0
    return view


def poison_allocator(device: str, nbytes: int) -> None:
    """Leave NaN in memory the next allocation of about ``nbytes`` will likely reuse.

    Outputs come from at::empty; on CUDA the caching allocator hands back the block just freed,
    so an element a kernel forgets to write reads as NaN instead of a plausible stale value.
    """
    if nbytes <= 0:
        return
    block = torch.full((nbytes // 4 + 1,), float("nan"), dtype=torch.float32, device=device)
    del block


def assert_close(
    actual: torch.Tensor,
    expected: torch.Tensor,
    tolerances: Mapping[torch.dtype, tuple[float, float]],
    *,
    dtype: torch.dtype | None = None,
) -> None:
    """Compare ``actual`` to a float64 ``expected`` with the (rtol, atol) of ``actual``'s dtype."""
    rtol, atol = tolerances[dtype or actual.dtype]
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
    torch.testing.assert_close(
        actual.detach().to(device="cpu", dtype=torch.float64),
        expected.detach().to(device="cpu", dtype=torch.float64),
        rtol=rtol,
        atol=atol,
        equal_nan=True,
    )


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the kernels compute in: float32 for the 16- and 32-bit types, float64 for float64."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def same_or_both_nan(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise: equal (infinities of one sign included), or NaN in both."""
    return (a == b) | (torch.isnan(a) & torch.isnan(b))


def assert_close_or_as_pytorch(
    actual: torch.Tensor,
    expected: torch.Tensor,
    as_pytorch: torch.Tensor | None,
    tolerances: Mapping[torch.dtype, tuple[float, float]],
    *,
    dtype: torch.dtype | None = None,
    nearby: Sequence[torch.Tensor] = (),
) -> None:
    """``actual`` against the float64 ``expected``, or, where the formula is ill-conditioned, against PyTorch.

    ``as_pytorch`` is the same reference computed by PyTorch in the compute dtype. Where it misses
    ``expected`` by more than the tolerance, the math itself is ill-conditioned there in that dtype
    (a cancellation, an argument rounded before a sine): no kernel of that dtype can do better than
    PyTorch, so agreement with ``as_pytorch`` passes as well. ``nearby`` are PyTorch's results at
    inputs moved by a few units of the compute dtype's rounding: how far they and ``as_pytorch``
    land from ``expected`` is the error that dtype's arithmetic makes at the point, and a kernel
    may miss ``expected`` by the tolerance plus 4 times that, up to 16 times the tolerance (a
    fused expression rounds its terms in another order than PyTorch: fuzz132, expm1(4 sigmoid(x^3))
    + y where its terms cancel). Everywhere else only ``expected`` passes, so an op that is wrong
    where the formula is well conditioned still fails, and so does one wrong by more than 16 times
    the tolerance where it is not (`sin(1000000*x) + 1e-3`).
    """
    dtype = dtype or actual.dtype
    rtol, atol = tolerances[dtype]
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
    got = actual.detach().to(device="cpu", dtype=torch.float64)
    want = expected.detach().to(device="cpu", dtype=torch.float64)

    def bound_of(b: torch.Tensor) -> torch.Tensor:
        # An infinity or NaN of b is matched exactly (|finite - inf| <= rtol * inf would pass).
        return torch.where(torch.isfinite(b), atol + rtol * b.abs(), -1.0)

    def within(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ((a - b).abs() <= bound_of(b)) | same_or_both_nan(a, b)

    bound = bound_of(want)
    good = within(got, want)
    if as_pytorch is not None:
        pytorch = as_pytorch.detach().to(device="cpu", dtype=dtype).to(torch.float64)
        good |= ~within(pytorch, want) & within(got, pytorch)
        if nearby:
            estimates = [pytorch, *(n.detach().to(device="cpu", dtype=dtype).to(torch.float64) for n in nearby)]
            error = torch.stack([(e - want).abs().nan_to_num(0.0, posinf=0.0) for e in estimates]).amax(0)
            good |= (got - want).abs() <= bound + torch.minimum(4 * error, 16 * bound)
    if not bool(good.all()):
        bad = ~good
        raise AssertionError(
            f"{int(bad.sum())} of {bad.numel()} elements differ from the reference beyond (rtol={rtol}, atol={atol}) "
            f"where PyTorch in {compute_dtype(dtype)} agrees with it, e.g. {got[bad][:4].tolist()} != "
            f"{want[bad][:4].tolist()} at {bad.nonzero().tolist()[:4]}"
        )


def relative_error_in_norm(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """||actual - expected|| / ||expected||, in float64 on the CPU."""
    got = actual.detach().to(device="cpu", dtype=torch.float64)
    want = expected.detach().to(device="cpu", dtype=torch.float64)
    return float((got - want).norm() / want.norm().clamp_min(1e-300))


def assert_close_in_norm(
    actual: torch.Tensor,
    expected: torch.Tensor,
    tolerance: float,
    *,
    name: str,
    as_pytorch: torch.Tensor | None = None,
) -> None:
    """``actual`` within ``tolerance`` of the float64 ``expected`` as a relative error of the whole tensor.

    For results where a few elements may rightly take another branch than float64 does (a ReLU's
    derivative at a pre-activation within rounding of 0), which an elementwise tolerance cannot
    tell from a wrong kernel but the norm can. With ``as_pytorch`` (PyTorch's own result in the
    same dtype), twice PyTorch's own error is allowed too: no kernel of that dtype need beat it.
    """
    assert actual.shape == expected.shape, f"{name}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
    bound = tolerance if as_pytorch is None else max(tolerance, 2 * relative_error_in_norm(as_pytorch, expected))
    error = relative_error_in_norm(actual, expected)
    assert error <= bound, f"{name}: relative error {error:.2e} in norm > {bound:.1e}"


def _fresh_leaves(arguments: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """Detached copies of the tensor arguments, those named requiring a gradient, so calls do not interfere."""
    return {k: v.detach().requires_grad_(k in names) if isinstance(v, torch.Tensor) else v for k, v in arguments.items()}


def gradients_of(
    fn: Callable[..., torch.Tensor], arguments: Mapping[str, Any], names: Sequence[str], grad: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """The gradients of ``fn(**arguments)`` against ``grad`` (cast to the output's dtype), of the arguments ``names``.

    Taken on fresh leaves (detached copies of the tensor arguments), so calls do not interfere.
    """
    leaves = _fresh_leaves(arguments, names)
    out = fn(**leaves)
    return tuple(torch.autograd.grad(out, [leaves[n] for n in names], grad.to(out.dtype)))


def gradients_under_compiled_autograd(
    fn: Callable[..., torch.Tensor], arguments: Mapping[str, Any], names: Sequence[str], grad: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """As gradients_of, with the backward traced by torch._dynamo.compiled_autograd.

    Inductor compiles the trace on CUDA, aot_eager elsewhere. Compiled autograd reuses a graph it
    traced in an earlier call for the same nodes (torch._dynamo.reset() forgets them): called
    twice on different inputs, a custom node that does not swap its saved tensors for the trace's
    (apply_with_saved) gives the second call the first one's gradients.
    """
    from torch._dynamo import compiled_autograd

    leaves = _fresh_leaves(arguments, names)
    backend = "inductor" if grad.device.type == "cuda" else "aot_eager"
    with compiled_autograd._enable(torch.compile(backend=backend, fullgraph=True)):
        out = fn(**leaves)
        out.backward(grad.to(out.dtype))
    grads = [leaves[n].grad for n in names]
    missing = [n for n, g in zip(names, grads, strict=True) if g is None]
    assert not missing, f"no gradient reached {', '.join(missing)}"
    return tuple(g for g in grads if g is not None)


def assert_forward_mode_refused(op: str, call: Callable[..., Any], tensors: Mapping[str, torch.Tensor]) -> None:
    """A tangent on each of ``tensors`` in turn, and torch.func.jvp over all of them, fail with the op's clear error.

    ``call(**tensors)`` runs the op. torch.library's custom-op autograd is reverse mode only and
    would drop such tangents without a word (jvp reading them as zeros): the op must refuse them.
    """
    from torch.autograd import forward_ad

    refused = rf"{op}: forward-mode AD .* is not supported"
    names = list(tensors)
    for name in names:
        with forward_ad.dual_level(), pytest.raises(RuntimeError, match=refused):
            dual = forward_ad.make_dual(tensors[name], torch.randn_like(tensors[name]))
            call(**(dict(tensors) | {name: dual}))
    primals = tuple(tensors[n] for n in names)
    with pytest.raises(RuntimeError, match=refused):
        torch.func.jvp(lambda *ts: call(**dict(zip(names, ts, strict=True))), primals, tuple(map(torch.randn_like, primals)))


def python_autograd_calls(step: Callable[[], object]) -> list[str]:
    """The functions of torch.library's Python autograd kernel (torch/_library/autograd.py) that ``step`` calls.

    Every op registered with ``torch.library.register_autograd`` goes through that kernel unless
    its caller steps past it; tests/test_testing.py checks that a plain torch.library op does.
    """
    import sys

    import torch._library.autograd as library_autograd

    called: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename == library_autograd.__file__:
            called.append(frame.f_code.co_name)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(previous)
    return called


def assert_past_python_autograd(call: Callable[[], object], *, training: bool = False) -> None:
    """``call()`` runs none of torch.library's Python autograd kernel.

    ``call`` needs no gradient, or with ``training`` is a forward and backward of an op whose
    autograd formula is C++ (the norm, linear and MLP ops).
    """
    called = python_autograd_calls(call)
    if training:
        hint = "register the op's autograd formula in C++ (an Autograd kernel, opgen/autograd_node.h)"
    else:
        hint = "call the op through the workspace's _registration.call_op"
    what = "a training step" if training else "a call needing no gradient"
    assert not called, (
        f"{what} went through torch.library's Python autograd kernel ({', '.join(called)}), "
        f"which costs more than a small op's kernel: {hint}"
    )


def shapes_filled_by(step: Callable[[], object]) -> list[list[int]]:
    """The shapes of the tensors ``step`` fills with a constant (``aten::zero_``, ``aten::fill_``).

    What the profiler records on the host, so it sees autograd's zero gradients on any device.
    """
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as profile:
        step()
    return [event.input_shapes[0] for event in profile.events() if event.name in ("aten::zero_", "aten::fill_")]

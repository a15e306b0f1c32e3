"""PyTorch's math with every matrix product read as tensor cores read TF32 operands.

A network through TF32 (10-bit mantissa) differs from float64 by far more than its rounding
suggests: a ReLU whose pre-activation lands within rounding of 0 takes the other branch, and its
gradient passes or stops a whole row's worth of signal. For a 4-layer ReLU network of width 64
that alone puts the input gradient 0.6e-2 to 3.8e-2 (in norm) from float64, depending on the
draw, so no fixed tolerance tells a correct TF32 kernel from a wrong one. The same math with its
products' operands rounded to TF32 takes nearly the same branches as the kernel does: measured
against it, a correct kernel is within about 1e-5 (3e-3 when one branch differs), a wrong one is
not. ``cuBLAS`` itself may not use TF32 for small products even where allowed, so PyTorch's own
float32 result is no stand-in.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten


def round_to_tf32(t: torch.Tensor) -> torch.Tensor:
    """``t`` rounded to TF32 (10 mantissa bits, to nearest, ties to even), in ``t``'s dtype.

    As ``cvt.rn.tf32.f32`` rounds a float before the tensor cores read it (opgen/tensor_core.cuh's
    ``to_tf32``; bit for bit on an H200, docs/h200-runs/2026-11-29j-tf32-rn-check.py). The MLP
    kernels round ReLU's outputs with ties away from zero instead (``to_tf32_not_nan``): one value
    in 8192 lands on a tie, and moves by one TF32 step, far inside what the tests allow.
    """
    bits = t.detach().to(torch.float32).contiguous().view(torch.int32)
    # Sign and magnitude: half a step less one, plus the kept part's last bit, rounds ties to even.
    rounded = ((bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF).view(torch.float32)
    return torch.where(torch.isfinite(t), rounded.to(t.dtype), t)


# The products and which of their arguments are matrix operands (addmm's first is the bias, added
# in float32 after the product, as a GEMM's epilogue adds it).
_OPERANDS = {
    aten.mm.default: (0, 1),
    aten.bmm.default: (0, 1),
    aten.addmm.default: (1, 2),
    aten.baddbmm.default: (1, 2),
}


class EmulatedTf32(TorchDispatchMode):
    """Within it, every mm/bmm/addmm/baddbmm (forward and autograd's backward) rounds its operands to TF32."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        operands = _OPERANDS.get(func)
        if operands is not None:
            args = tuple(
                round_to_tf32(a) if i in operands and isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for i, a in enumerate(args)
            )
        return func(*args, **(kwargs or {}))

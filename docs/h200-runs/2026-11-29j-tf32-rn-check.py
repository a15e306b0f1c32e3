"""opgen.testing.tf32.round_to_tf32 against the GPU's own cvt.rn.tf32.f32.

tensor_core.cuh's to_tf32 on sm_90, compared bit for bit where the tensor cores read (the 19 high
bits) over random bit patterns (denormals, infinities and NaNs among them) and a million ties
(and their neighbours) at random exponents and signs.

    python3 docs/h200-runs/2026-11-29j-tf32-rn-check.py
"""

import torch
import triton
import triton.language as tl

from opgen.testing.tf32 import round_to_tf32


@triton.jit
def _cvt_rn_tf32(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.inline_asm_elementwise("cvt.rn.tf32.f32 $0, $1;", "=r,f", [x], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(y_ptr + offsets, y, mask=mask)


def hardware(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty(x.shape, dtype=torch.int32, device=x.device)
    _cvt_rn_tf32[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


def main() -> None:
    generator = torch.Generator(device="cuda").manual_seed(0)
    patterns = torch.randint(-(2**31), 2**31, (1 << 24,), dtype=torch.int64, device="cuda", generator=generator)
    # Ties (the 13 low bits exactly 0x1000) and their neighbours, both signs, every exponent.
    kept = torch.randint(0, 2**19, (1 << 20,), dtype=torch.int64, device="cuda", generator=generator)
    ties = torch.cat([(kept << 13) + 0x1000 + d for d in (-1, 0, 1)])
    bits = torch.cat([patterns, ties, torch.tensor([0x7F7FFFFF, 0x7FFFFFFF, 0x7F800000, 1], device="cuda")])
    bits = torch.where(bits >= 2**31, bits - 2**32, bits).to(torch.int32)
    x = bits.view(torch.float32)
    got = hardware(x)
    want = round_to_tf32(x).view(torch.int32)
    finite = torch.isfinite(x) & torch.isfinite(want.view(torch.float32))
    high = ~0x1FFF
    same = (got & high) == (want & high)
    nan_in = torch.isnan(x)
    print(f"values {x.numel()}, of them ties {int(((bits & 0x1FFF) == 0x1000).sum())}")
    print(f"finite results equal in the 19 high bits: {int(same[finite].sum())} of {int(finite.sum())}")
    print(
        f"overflow to infinity equal: {bool(same[torch.isfinite(x) & ~finite].all())} ({int((torch.isfinite(x) & ~finite).sum())})"
    )
    print(f"NaN in -> NaN out (hardware): {bool(torch.isnan(got.view(torch.float32)[nan_in]).all())}")
    print(f"infinity in -> itself (hardware): {bool((got[torch.isinf(x)] == bits[torch.isinf(x)]).all())}")
    low = int((got & 0x1FFF).ne(0).logical_and(~nan_in).sum())
    print(f"hardware results with low bits set (non-NaN): {low}")
    bad = finite & ~same
    if bad.any():
        print("first mismatches (in, hardware, emulation):")
        for i in bad.nonzero().flatten()[:8].tolist():
            print(hex(int(bits[i]) & 0xFFFFFFFF), hex(int(got[i]) & 0xFFFFFFFF), hex(int(want[i]) & 0xFFFFFFFF))
    print("OK" if not bad.any() else "MISMATCH")


if __name__ == "__main__":
    main()

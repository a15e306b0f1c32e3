"""A control for compute-sanitizer's initcheck: torch's own GEMMs (cuBLAS), their outputs then read.

Run as a module under a sanitizer tool (opgen.testing.sanitizer.tool_sees_cublas_writes): the tool
must report nothing here for its verdict on an op built on cuBLAS to mean anything. Where it does
report, it does not see the writes cuBLAS's kernels make (on Hopper, through the tensor memory
accelerator), and calls what they wrote uninitialized.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def main() -> None:
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(16, 64, device="cuda", dtype=dtype, requires_grad=True)
        weight = torch.randn(72, 64, device="cuda", dtype=dtype, requires_grad=True)
        bias = torch.randn(72, device="cuda", dtype=dtype, requires_grad=True)
        out = F.relu(F.linear(x, weight, bias))
        torch.autograd.backward(out, torch.randn_like(out))
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()

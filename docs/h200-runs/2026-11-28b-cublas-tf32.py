"""How PyTorch's GEMMs read float32 operands under allow_tf32 on this GPU: truncated or rounded to TF32.

Each row of x holds v (exact in float32, between two TF32 values); multiplied by an identity, the
output is v as the GEMM's tensor cores read it: truncated (toward zero), rounded (to nearest), or
v itself (no TF32). Shapes: a square 4096 product and the seed MLP's first layer at 2^18 rows.
"""

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = True
ULP = 2.0**-10  # TF32's mantissa step at 1
for v in (1 + 3 * 2**-12, -(1 + 3 * 2**-12), 1 + 5 * 2**-13):
    verdicts = {}
    truncated = (1 if v > 0 else -1) * 1.0
    rounded = (1 if v > 0 else -1) * ((1 + ULP) if abs(v) - 1 > ULP / 2 else 1.0)
    for name, (rows, cols_in, cols_out) in {
        "mm 4096^3": (4096, 4096, 4096),
        "linear 2^18x100->128": (2**18, 100, 128),
    }.items():
        x = torch.full((rows, cols_in), v, device="cuda")
        w = torch.eye(cols_out, cols_in, device="cuda")
        out = (x @ w.T) if name.startswith("mm") else F.linear(x, w, torch.zeros(cols_out, device="cuda"))
        got = out[0, 0].item()
        verdicts[name] = (
            "truncated"
            if got == truncated and got != rounded
            else "rounded"
            if got == rounded and got != truncated
            else "as float32"
            if got == v
            else f"other ({got!r})"
        )
    print(f"v = {v!r}: " + ", ".join(f"{k}: {verdict}" for k, verdict in verdicts.items()))

"""A first look at the matmul op's large-tile kernel on the GPU machine, before its test suite.

One product of each operand layout against float64, and CUDA-event times of 4096^3 and 8192^3 in
bfloat16 against torch.matmul. Run it with a timeout, so that a kernel that never finishes cannot
hold the machine: `timeout 90 python3 scripts/matmul_smoke.py WORKSPACE_PARENT`. Exit status: 0
correct and at least 60% of torch.matmul at both sizes, 3 correct but slower, 1 wrong.
"""

from __future__ import annotations

import sys

import torch

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "/tmp/opgen-gpu")
from generated_ops import matmul


def layouts(m: int, k: int, n: int, dtype: torch.dtype) -> bool:
    correct = True
    for layout in ("nn", "nt", "tn", "tt"):
        a = (
            torch.randn(k, m, device="cuda", dtype=dtype).mT
            if layout[0] == "t"
            else torch.randn(m, k, device="cuda", dtype=dtype)
        )
        b = (
            torch.randn(n, k, device="cuda", dtype=dtype).mT
            if layout[1] == "t"
            else torch.randn(k, n, device="cuda", dtype=dtype)
        )
        got = matmul(a, b).double()
        want = a.double() @ b.double()
        error = ((got - want).abs() / (want.abs() + 1)).max().item()
        print(f"{dtype} {layout} {m}x{k}x{n}: max error relative to |c| + 1 = {error:.2e}", flush=True)
        correct = correct and error < 2e-2  # a 16-bit rounding of the result is 4e-3 at most
    return correct


def timed(function, *args: torch.Tensor, repeats: int = 20) -> float:
    for _ in range(3):
        function(*args)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        start.record()
        function(*args)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


correct = layouts(1496, 200, 2896, torch.bfloat16)
correct = layouts(1496, 200, 2896, torch.float16) and correct
correct = layouts(4096, 4096, 4096, torch.bfloat16) and correct
if not correct:
    sys.exit(1)
fast = True
for size in (4096, 8192):
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    flops = 2.0 * size**3
    ours, theirs = timed(matmul, a, b), timed(torch.matmul, a, b)
    fast = fast and theirs / ours >= 0.6
    print(
        f"bf16 {size}^3: opgen {flops / ours / 1e9:.1f} TFLOP/s, torch.matmul {flops / theirs / 1e9:.1f} TFLOP/s, ratio {theirs / ours:.3f}",
        flush=True,
    )
sys.exit(0 if fast else 3)

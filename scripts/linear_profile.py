"""Where a linear op's training step spends its time, against eager PyTorch's (GPU machine).

For each shape: the CUDA kernels of one forward+backward step (torch.profiler, per step), ours
and eager's side by side, then each part timed alone with CUDA events (median, L2 flushed), and
the host time of a step (what a small, launch-bound layer costs). Usage, in a workspace holding
the op: python3 scripts/linear_profile.py OP [ROWSxIN->OUT ...]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

SHAPES = [(8192, 4096, 16384), (16384, 8192, 8192), (16384, 1024, 4096), (32, 768, 3072)]
FLUSH = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")


def gpu_ms(fn: Callable[[], object], calls: int = 25) -> float:
    """Median CUDA-event milliseconds of fn(), L2 flushed before each call."""
    fn()
    times = []
    for _ in range(calls):
        FLUSH.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def host_us(fn: Callable[[], object], calls: int = 200) -> float:
    """Median host microseconds of fn() (no synchronization: what a launch-bound step costs)."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def kernels(step: Callable[[], object], steps: int = 5) -> list[tuple[str, float, int]]:
    """(kernel, microseconds per step, launches per step) of `step`, by the profiler."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    totals: dict[str, list[float]] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals.setdefault(event.name, []).append(event.time_range.elapsed_us())
    rows = [(name, sum(t) / steps, len(t) // steps) for name, t in totals.items()]
    return sorted(rows, key=lambda r: -r[1])


def main() -> None:
    op_name = sys.argv[1]
    shapes = SHAPES
    if len(sys.argv) > 2:
        shapes = [tuple(int(v) for v in s.replace("->", "x").split("x")) for s in sys.argv[2:]]  # type: ignore[misc]
    print(torch.cuda.get_device_name(), torch.__version__)
    for rows, k, n in shapes:
        profile_shape(op_name, rows, k, n)
        torch.cuda.empty_cache()


def profile_shape(op_name: str, rows: int, k: int, n: int) -> None:
    import generated_ops

    op = getattr(generated_ops, op_name)
    backward_op = getattr(torch.ops.generated_ops, f"{op_name}_backward").default
    forward_op = getattr(torch.ops.generated_ops, op_name).default
    dtype = torch.bfloat16
    x = torch.randn(rows, k, device="cuda", dtype=dtype, requires_grad=True)
    w = (torch.randn(n, k, device="cuda", dtype=dtype) * k**-0.5).requires_grad_()
    b = torch.randn(n, device="cuda", dtype=dtype, requires_grad=True)
    ones = torch.ones(rows, n, device="cuda", dtype=dtype)

    def ours() -> object:
        return torch.autograd.grad(op(x, w, b), [x, w, b], ones)

    def eager() -> object:
        return torch.autograd.grad(F.gelu(F.linear(x, w, b), approximate="tanh"), [x, w, b], ones)

    def ours_forward() -> object:
        return op(x, w, b)

    def eager_forward() -> object:
        return F.gelu(F.linear(x, w, b), approximate="tanh")

    flops = 6 * rows * k * n
    print(f"\n===== {rows}x{k}->{n} bfloat16")
    for name, step in (("ours", ours), ("eager", eager)):
        ms = gpu_ms(step)
        print(f"{name}: step {ms * 1e3:.1f} us ({flops / ms / 1e9:.1f} TFLOP/s), host {host_us(step):.1f} us")
        for kernel, us, launches in kernels(step):
            print(f"    {us:9.1f} us  x{launches}  {kernel[:150]}")
    # The parts alone.
    xd, wd, bd = x.detach(), w.detach(), b.detach()
    out, pre = forward_op(xd, wd, bd, "tanh", True)
    pre_e = F.linear(xd, wd, bd)
    g = torch.randn_like(out)
    gp = torch.ops.aten.gelu_backward(g, pre_e, approximate="tanh")
    parts = {
        "ours forward, graph kept": ours_forward,
        "eager forward, graph kept": eager_forward,
        "ours forward (no aux)": lambda: forward_op(xd, wd, bd, "tanh", False),
        "ours forward (aux kept)": lambda: forward_op(xd, wd, bd, "tanh", True),
        "ours backward (x, w, b)": lambda: backward_op(g, xd, wd, bd, "tanh", out, pre, True, True, True),
        "ours backward (x)": lambda: backward_op(g, xd, wd, bd, "tanh", out, pre, True, False, False),
        "ours backward (w, b)": lambda: backward_op(g, xd, wd, bd, "tanh", out, pre, False, True, True),
        "ours backward (w)": lambda: backward_op(g, xd, wd, bd, "tanh", out, pre, False, True, False),
        "eager addmm": lambda: F.linear(xd, wd, bd),
        "eager gelu": lambda: F.gelu(pre_e, approximate="tanh"),
        "eager gelu_backward": lambda: torch.ops.aten.gelu_backward(g, pre_e, approximate="tanh"),
        "eager mm dX": lambda: gp.mm(wd),
        "eager mm dW (g^T x)": lambda: gp.t().mm(xd),
        "eager mm dW (x^T g)^T": lambda: xd.t().mm(gp),  # autograd's layout for F.linear
        "eager sum db": lambda: gp.sum(0),
    }
    # GPU time (CUDA events, L2 flushed: a part whose host time exceeds the flush's shows its host
    # time here too) and host time (no synchronization) of each part alone.
    print(f"  {'part':28s} {'GPU us':>9s} {'host us':>9s}")
    for name, fn in parts.items():
        print(f"  {name:28s} {gpu_ms(fn) * 1e3:9.1f} {host_us(fn):9.1f}")


if __name__ == "__main__":
    main()

"""Issue 23 (2026-11-30c): the fused MLP's training step, one build, against eager in the same process.

For each op, dtype and batch: the step (forward, then torch.autograd.grad of every input) and the
backward op called straight (torch.ops, no autograd), by the host's clock (100 calls back to
back, one synchronize at the end: what a loop of them costs, host or GPU whichever bounds it),
and the step as `opgen bench` times it (opgen.bench.time_side_by_side: CUDA events, L2 flushed
before each call), eager beside it. Run it once per build, the builds by turns.

    python3 2026-11-30c-mlp-host-times.py WORKSPACE OP...
"""

import functools
import importlib
import sys
import time

import torch

from opgen.bench import mlp_workload, time_side_by_side, with_gradients

sys.path.insert(0, sys.argv[1])
torch.backends.cuda.matmul.allow_tf32 = True
ops = torch.ops.generated_ops


def host_us(fn, n=100):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - began) / n * 1e6


for name in sys.argv[2:]:
    module = importlib.import_module(f"generated_ops.{name}")
    reference = getattr(importlib.import_module(f"generated_ops.{name}.reference"), f"reference_{name}")
    op, backward_op = getattr(ops, name).default, getattr(ops, f"{name}_backward").default
    for dtype in (torch.bfloat16, torch.float32):
        for rows in (32, 2**16, 2**18):
            inputs = mlp_workload(rows, module.WIDTHS, dtype, "cuda", backward=True, bias=module.BIAS).make_inputs()
            plain = [t.detach() for t in inputs]
            with torch.no_grad():
                y, saved = op(*plain, True)
            dy = torch.ones_like(y)
            step, eager = with_gradients(getattr(module, name)), with_gradients(reference)
            with torch.no_grad():
                backward = host_us(lambda: backward_op(dy, *plain, y, saved))
            host_step, host_eager = host_us(lambda: step(*inputs)), host_us(lambda: eager(*inputs))
            ms = time_side_by_side(
                {"opgen": functools.partial(step, *inputs), "eager": functools.partial(eager, *inputs)},
                "cuda",
                repetitions=20,
            )
            print(
                f"{name:9} {str(dtype)[6:]:9} {rows:7}: host clock step {host_step:6.1f} us (eager"
                f" {host_eager:6.1f}, {host_eager / host_step:.2f}x), backward op {backward:6.1f};"
                f" events step {ms['opgen'] * 1e3:6.1f} us (eager {ms['eager'] * 1e3:6.1f},"
                f" {ms['eager'] / ms['opgen']:.2f}x)",
                flush=True,
            )

"""Where a small batch's MLP training step spends its time.

The host per step (queued back to back), and one step under torch.profiler (CPU and CUDA), for
mlp_seed in bfloat16 and float32 (TF32). Argument: the folder holding generated_ops/.
"""

import importlib
import sys
import time

import torch

from opgen.bench import mlp_workload, with_gradients

sys.path.insert(0, sys.argv[1])
module = importlib.import_module("generated_ops.mlp_seed")

torch.backends.cuda.matmul.allow_tf32 = True
step = with_gradients(module.mlp_seed)
for dtype in (torch.bfloat16, torch.float32):
    for rows in (32, 65536):
        inputs = mlp_workload(rows, module.WIDTHS, dtype, "cuda", backward=True, bias=module.BIAS).make_inputs()
        for _ in range(20):
            step(*inputs)
        torch.cuda.synchronize()
        best = []
        for _ in range(5):
            began = time.perf_counter()
            for _ in range(50):
                step(*inputs)
            torch.cuda.synchronize()
            best.append((time.perf_counter() - began) / 50 * 1e6)
        print(f"== {dtype} {rows} rows: {min(best):.1f} us a step back to back")
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        ) as prof:
            for _ in range(5):
                step(*inputs)
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18, max_name_column_width=60))

"""Quick timing of the norm ops on a GPU: opgen against eager PyTorch and a device copy, every row length.

A tuning aid for the GPU machine (scripts/gpu_session.sh's `quick` mode): no torch.compile
contender (`opgen bench` times it, compiling for minutes), and fewer samples, so one call sweeps
every op, row length and dtype in a minute or two. Prints one line per (op, dtype, pass, row
length): GB/s and % of copy of opgen, and of eager.

    python3 scripts/norm_quick_bench.py WORKSPACE OP [OP...]
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import torch

from opgen.bench import _copy_contender, time_side_by_side


def main() -> None:
    workspace, ops = Path(sys.argv[1]).resolve(), sys.argv[2:]
    sys.path.insert(0, str(workspace.parent))
    package = workspace.name
    for op in ops:
        bench = importlib.import_module(f"{package}.{op}.bench_{op}")
        for dtype in (torch.bfloat16, torch.float32):
            for label, tensors, grad, fn, eager in (
                ("forward", bench.FORWARD_TENSORS, False, bench.forward, bench.reference),
                ("fwd+bwd", bench.TRAINING_STEP_TENSORS, True, bench.step_of(bench.forward), bench.step_of(bench.reference)),
            ):
                for workload in bench.workloads_of(tensors, grad)(dtype, "cuda", 0, 0):
                    inputs = workload.make_inputs()
                    medians = time_side_by_side(
                        {
                            "opgen": lambda fn=fn, inputs=inputs: fn(*inputs),
                            "eager": lambda eager=eager, inputs=inputs: eager(*inputs),
                            "copy": _copy_contender(inputs, workload.bytes_moved),
                        },
                        "cuda",
                        warmup=3,
                        repetitions=10,
                    )
                    gbps = {name: workload.bytes_moved / (ms * 1e-3) / 1e9 for name, ms in medians.items()}
                    print(
                        f"{op:14s} {str(dtype)[6:]:9s} {label:8s} {workload.label:>14s} "
                        f"opgen {gbps['opgen']:5.0f} GB/s {100 * gbps['opgen'] / gbps['copy']:5.1f}% | "
                        f"eager {gbps['eager']:5.0f} GB/s {100 * gbps['eager'] / gbps['copy']:5.1f}% | copy {gbps['copy']:5.0f} GB/s",
                        flush=True,
                    )
                    del inputs


if __name__ == "__main__":
    main()

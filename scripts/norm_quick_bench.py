"""Quick timing of the norm ops on a GPU: opgen against a device copy only, every row length.

A tuning aid for the GPU machine (scripts/gpu_session.sh's `quick` mode): no eager or
torch.compile contenders (`opgen bench` times those), so one call sweeps every op, row length and
dtype in a minute or two. Prints one line per (op, dtype, pass, row length): % of copy.

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
            for label, tensors, grad, fn in (
                ("forward", bench.FORWARD_TENSORS, False, bench.forward),
                ("fwd+bwd", bench.TRAINING_STEP_TENSORS, True, bench.step_of(bench.forward)),
            ):
                for workload in bench.workloads_of(tensors, grad)(dtype, "cuda", 0, 0):
                    inputs = workload.make_inputs()
                    medians = time_side_by_side(
                        {"opgen": lambda fn=fn, inputs=inputs: fn(*inputs), "copy": _copy_contender(inputs, workload.bytes_moved)},
                        "cuda",
                        warmup=3,
                        repetitions=10,
                    )
                    gbps = workload.bytes_moved / (medians["opgen"] * 1e-3) / 1e9
                    percent = 100 * medians["copy"] / medians["opgen"]
                    print(f"{op:14s} {str(dtype)[6:]:9s} {label:8s} {workload.label:>14s} {gbps:7.0f} GB/s {percent:5.1f}% of copy", flush=True)
                    del inputs


if __name__ == "__main__":
    main()

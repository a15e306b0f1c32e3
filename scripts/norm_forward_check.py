r"""Norm ops' forward at a few shapes, against eager in float64, for compute-sanitizer.

    compute-sanitizer --tool racecheck python3 scripts/norm_forward_check.py WORKSPACE OP[,OP...] DTYPE ROWSxCOLS [...]

(a dtype's name applies to the shapes after it). The generated test module's sanitizer run
(`python -m generated_ops.OP.test_OP PIECE`) takes every kernel path forward and backward; this
takes only the forward at the shapes named, so that a change to the forward's long-row kernels is
sanitized in seconds rather than minutes. Inputs as the generated bench makes them (make_inputs,
no gradients), outputs poisoned first by the op itself (it allocates them); each output is compared
with eager's on float64 copies of the inputs, relative to the largest value. Exit 1 if one is off
by more than the dtype's tolerance.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import torch

TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 4e-3}


def main() -> None:
    args = sys.argv[1:]
    workspace = Path(args[0]).resolve()
    sys.path.insert(0, str(workspace.parent))
    failed = False
    for op in args[1].split(","):
        bench = importlib.import_module(f"{workspace.name}.{op}.bench_{op}")
        dtype_name = "float32"
        for shape in args[2:]:
            if "x" not in shape:
                dtype_name = shape
                continue
            dtype = getattr(torch, dtype_name)
            rows, cols = map(int, shape.split("x"))
            inputs = bench.make_inputs((rows, cols), dtype, "cuda", False)
            ours = bench.forward(*inputs)
            theirs = bench.reference(*(tensor.double() for tensor in inputs))
            ours = ours if isinstance(ours, tuple) else (ours,)
            theirs = theirs if isinstance(theirs, tuple) else (theirs,)
            error = max(float((a.double() - b).abs().max() / b.abs().max()) for a, b in zip(ours, theirs, strict=True))
            ok = error <= TOLERANCE[dtype]
            failed |= not ok
            print(
                f"check {op:14s} {dtype_name:9s} {shape:>12s} error {error:.1e} {'ok' if ok else 'FAILED'}", flush=True
            )
            del inputs, ours, theirs
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

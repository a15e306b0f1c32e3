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

import sys

import torch
from norm_workloads import workloads

TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 4e-3}


def main() -> None:
    failed = False
    for work in workloads(sys.argv[1:]):
        inputs = work.bench.make_inputs(work.rows_cols, work.dtype, "cuda", False)
        ours = work.bench.forward(*inputs)
        theirs = work.bench.reference(*(tensor.double() for tensor in inputs))
        ours = ours if isinstance(ours, tuple) else (ours,)
        theirs = theirs if isinstance(theirs, tuple) else (theirs,)
        error = max(float((a.double() - b).abs().max() / b.abs().max()) for a, b in zip(ours, theirs, strict=True))
        ok = error <= TOLERANCE[work.dtype]
        failed |= not ok
        print(
            f"check {work.op:14s} {work.dtype_name:9s} {work.shape:>12s} error {error:.1e} {'ok' if ok else 'FAILED'}",
            flush=True,
        )
        del inputs, ours, theirs
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

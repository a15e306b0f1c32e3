r"""Norm ops' forward on a GPU: the op against eager and a device copy of the same bytes, side by side.

    python3 scripts/norm_forward_times.py WORKSPACE OP[,OP...] DTYPE ROWSxCOLS [ROWSxCOLS ...] [DTYPE ROWSxCOLS ...]

(a dtype's name applies to the shapes after it). A tuning aid for the forward kernels
(scripts/gpu_session.sh's `normtimes` mode with NORMTIMES_FORWARD=1): cheaper than
scripts/norm_kernel_times.py (no backward, no profiler), so that one call times several builds.
Inputs as the generated bench makes them (make_inputs, no gradients); opgen.bench's
time_side_by_side (contenders in turn, L2 flushed before each call, 3 warm-up calls, the median of
20). Each line: the op's forward in microseconds, and opgen's, eager's and the copy's GB/s with
opgen's and eager's % of copy, counting the bytes the bench counts (FORWARD_TENSORS tensors of x's
size), and the largest difference of its outputs from eager's (relative to their largest value).
"""

from __future__ import annotations

import sys

import torch
from norm_workloads import workloads

from opgen.bench import _copy_contender, time_side_by_side


def main() -> None:
    for work in workloads(sys.argv[1:]):
        bench = work.bench
        inputs = bench.make_inputs(work.rows_cols, work.dtype, "cuda", False)
        nbytes = inputs[0].numel() * inputs[0].element_size() * bench.FORWARD_TENSORS
        # Not a test (the generated tests are): a check that the build timed computes the op,
        # the largest difference from eager's outputs over their largest magnitude.
        ours, theirs = bench.forward(*inputs), bench.reference(*inputs)
        ours = ours if isinstance(ours, tuple) else (ours,)
        theirs = theirs if isinstance(theirs, tuple) else (theirs,)
        error = max(
            float((a.double() - b.double()).abs().max() / b.double().abs().max())
            for a, b in zip(ours, theirs, strict=True)
        )
        del ours, theirs
        contenders = {
            "opgen": lambda inputs=inputs, fn=bench.forward: fn(*inputs),
            "eager": lambda inputs=inputs, fn=bench.reference: fn(*inputs),
            "copy": _copy_contender(inputs, nbytes),
        }
        medians = time_side_by_side(contenders, "cuda", warmup=3, repetitions=20)
        gbps = {name: nbytes / (ms * 1e-3) / 1e9 for name, ms in medians.items()}
        print(
            f"fwd {work.op:14s} {work.dtype_name:9s} {work.shape:>12s} {medians['opgen'] * 1e3:8.1f} us"
            f" | opgen {gbps['opgen']:5.0f} GB/s {100 * gbps['opgen'] / gbps['copy']:5.1f}%"
            f" | eager {gbps['eager']:5.0f} GB/s {100 * gbps['eager'] / gbps['copy']:5.1f}%"
            f" | copy {gbps['copy']:5.0f} GB/s | error {error:.1e}",
            flush=True,
        )
        del inputs, contenders
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

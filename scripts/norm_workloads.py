"""The workloads a norm-op script's command line names, for scripts/norm_forward_*.py.

    SCRIPT WORKSPACE OP[,OP...] DTYPE ROWSxCOLS [ROWSxCOLS ...] [DTYPE ROWSxCOLS ...]

A dtype's name applies to the shapes after it (float32 before the first). Each op's generated
bench module (`<workspace>/<op>/bench_<op>.py`) makes the inputs and holds the op and eager's.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch


@dataclass(frozen=True)
class Workload:
    op: str
    bench: ModuleType
    dtype_name: str
    shape: str

    @property
    def dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype_name)

    @property
    def rows_cols(self) -> tuple[int, int]:
        rows, cols = map(int, self.shape.split("x"))
        return rows, cols


def workloads(args: list[str]) -> Iterator[Workload]:
    """Every (op, dtype, shape) ``args`` (WORKSPACE OP[,OP...] then dtypes and shapes) names, in order."""
    workspace = Path(args[0]).resolve()
    sys.path.insert(0, str(workspace.parent))
    for op in args[1].split(","):
        bench = importlib.import_module(f"{workspace.name}.{op}.bench_{op}")
        dtype_name = "float32"
        for word in args[2:]:
            if "x" not in word:
                dtype_name = word
                continue
            yield Workload(op, bench, dtype_name, word)

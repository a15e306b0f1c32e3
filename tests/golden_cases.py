"""The ops whose rendered files tests/golden/ pins: every recipe, and each shape of formula and signature."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opgen.render import new_op
from opgen.workspace import Workspace

GOLDEN = Path(__file__).resolve().parent / "golden"

# op name -> keyword arguments of opgen.render.new_op
CASES: dict[str, dict[str, Any]] = {
    "softmax": {},
    "relu": {},
    "gelu": {},
    "bitonic_sort": {},
    "matmul": {},
    "my_op": {"kind": "elementwise"},
    "row_op": {"kind": "rowwise"},
    "mish": {"formula": "x*tanh(log(1+exp(x)))"},
    "relu_scale": {"formula": "max(x, 0)*alpha", "params": ["alpha=1.5"]},
    "swish_gate": {"formula": "x*sigmoid(y)"},
    "topk_like": {
        "signature": "(Tensor x, Tensor? weight, int k, float eps=1e-5, bool largest=True, int[] dims=[0, 1], "
        "*, float? scale=None) -> (Tensor values, Tensor indices)"
    },
    "route": {"signature": '(Tensor logits, str mode="top") -> (Tensor probs, Tensor expert)', "integer_outputs": ["expert"]},
    "pair_nograd": {"signature": "(Tensor x, Tensor y) -> Tensor", "gradients": False},
    "linear_gelu": {},
    "lin_relu": {"kind": "linear", "activation": "relu"},
    "lin_plain": {"kind": "linear", "bias": False},
    "lin_silu": {"kind": "linear", "activation": "x*sigmoid(1.702*x)"},
    "mlp_seed": {"kind": "mlp", "widths": "100,128,64,10", "activation": "relu"},
    "mlp_two": {"kind": "mlp", "widths": "10,20,3", "activation": "silu", "bias": False, "output_activation": "gelu"},
    "layernorm": {},
    "rmsnorm": {},
    "add_layernorm": {"recipe": "layernorm", "residual": True},
    "add_rmsnorm": {"recipe": "rmsnorm", "residual": True},
}


def render_cases(workspace: Workspace) -> dict[str, Path]:
    return {name: new_op(name, workspace=workspace, **options) for name, options in CASES.items()}


def normalized(path: Path) -> str:
    """A rendered file's text, less what differs from one render to the next (the snapshot id)."""
    text = path.read_text()
    if path.name == ".copier-answers.yml":
        text = "\n".join(line for line in text.splitlines() if not line.startswith("_commit:")) + "\n"
    return text


def rendered_files(folder: Path) -> dict[str, str]:
    return {
        path.relative_to(folder).as_posix(): normalized(path)
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }

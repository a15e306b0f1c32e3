"""The recipes `opgen new` renders: working ops for known names, skeletons for the rest."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from opgen.errors import KindMismatch, UnknownRecipe
from opgen.spec import Layout, Saves

Kind = Literal["elementwise", "rowwise", "linear", "mlp"]  # what `--kind` picks: skeletons, a linear layer, an MLP
# A recipe's kind: a skeleton's, or an op rendered from a signature (its spec: opgen.spec).
RecipeKind = Literal["elementwise", "rowwise", "signature", "linear", "mlp"]
KINDS: tuple[Kind, ...] = ("elementwise", "rowwise", "linear", "mlp")
DEFAULT_KIND: Kind = "elementwise"


@dataclass(frozen=True)
class Recipe:
    """What `opgen new` renders an op from.

    Its interface (a signature, made into the op's spec by opgen.spec), the template folder that
    lays it out, and recipes/<name>.jinja (its math).
    """

    name: str
    kind: RecipeKind
    summary: str
    # The op's interface; None where it comes from the user (--signature) or the formula (--formula).
    signature: str | None
    layout: Layout
    skeleton: bool = False
    saves: Saves = "inputs"  # what the backward op reads (elementwise, rowwise and softmax layouts)
    # The interface of the `--residual` form (x + residual normalized and returned), where it has one.
    residual_signature: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # recorded in the spec (OpSpec.extra)


KNOWN_RECIPES: dict[str, Recipe] = {
    "softmax": Recipe(
        "softmax",
        "rowwise",
        "softmax(x, dim=-1), as torch.softmax, fast on the last dim",
        signature="(Tensor x, int dim=-1) -> Tensor",
        layout="softmax",
        saves="output",
    ),
    "relu": Recipe("relu", "elementwise", "relu(x), as torch.relu", signature="(Tensor x) -> Tensor", layout="elementwise"),
    "gelu": Recipe(
        "gelu",
        "elementwise",
        'gelu(x, approximate="none"|"tanh"), as torch.nn.functional.gelu',
        signature='(Tensor x, str approximate="none") -> Tensor',
        layout="elementwise",
    ),
    "bitonic_sort": Recipe(
        "bitonic_sort",
        "signature",
        "bitonic_sort(x, dim=-1, descending=False), as torch.sort (stable), by a bitonic network",
        signature="(Tensor x, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)",
        layout="signature",
    ),
    "matmul": Recipe(
        "matmul",
        "signature",
        "matmul(a, b), as torch.matmul for 2-d and batched 3-d tensors, by a tiled tensor-core GEMM to edit",
        signature="(Tensor a, Tensor b) -> Tensor",
        layout="signature",
    ),
    "linear_gelu": Recipe(
        "linear_gelu",
        "linear",
        'linear_gelu(x, weight, bias=None, approximate="tanh"), as F.gelu(F.linear(x, weight, bias)), one cuBLASLt GEMM',
        signature='(Tensor x, Tensor weight, Tensor? bias=None, str approximate="tanh") -> Tensor',
        layout="linear",
        extra={"activation": "approximate"},  # the GELU its `approximate` argument names
    ),
    "layernorm": Recipe(
        "layernorm",
        "rowwise",
        "layernorm(x, weight=None, bias=None, eps=1e-5), as F.layer_norm over the last dim",
        signature="(Tensor x, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor",
        layout="norm",
        residual_signature=(
            "(Tensor x, Tensor residual, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) "
            "-> (Tensor output, Tensor residual_out)"
        ),
        extra={"centered": True},
    ),
    "rmsnorm": Recipe(
        "rmsnorm",
        "rowwise",
        "rmsnorm(x, weight=None, eps=None), as F.rms_norm over the last dim",
        signature="(Tensor x, Tensor? weight=None, float? eps=None) -> Tensor",
        layout="norm",
        residual_signature="(Tensor x, Tensor residual, Tensor? weight=None, float? eps=None) -> (Tensor output, Tensor residual_out)",
        extra={"centered": False},
    ),
}

SKELETONS: dict[Kind, Recipe] = {
    "elementwise": Recipe(
        "elementwise", "elementwise", "an elementwise skeleton to edit", "(Tensor x) -> Tensor", "elementwise", skeleton=True
    ),
    "rowwise": Recipe(
        "rowwise", "rowwise", "a row-wise (last-dim reduction) skeleton to edit", "(Tensor x) -> Tensor", "rowwise", skeleton=True
    ),
}


# `opgen new <op> --signature SIG`: an op of any signature, its kernels placeholders to edit.
SIGNATURE = Recipe(
    "signature", "signature", "an op of any signature, placeholder kernels to edit", None, "signature", skeleton=True
)

# `opgen new <op> --formula EXPR`: an elementwise op whose math and gradient opgen derives.
FORMULA = Recipe("formula", "elementwise", "an elementwise op from a formula, its gradient derived", None, "elementwise")

# `opgen new <op> --kind linear --activation ACT [--no-bias]`: a linear layer and its activation.
LINEAR = Recipe("linear", "linear", "a linear layer with an activation, as one GEMM with a fused epilogue", None, "linear")
# The activations cuBLASLt's epilogues (or ATen, for exact GELU) apply; any other --activation is a formula.
ACTIVATIONS: tuple[str, ...] = ("none", "relu", "gelu", "gelu_tanh")

# `opgen new <op> --kind mlp --widths 100,128,64,10 --activation relu`: a fully fused MLP.
MLP = Recipe("mlp", "mlp", "a multilayer perceptron fused into one kernel (weights in shared memory, tensor cores)", None, "mlp")
# The activations of the MLP's hidden layers (and of its output, --output-activation): each one
# the kernels apply in registers, and its nn module (MLP_ACTIVATION_MODULES) in an nn.Sequential.
MLP_ACTIVATIONS: tuple[str, ...] = ("none", "relu", "gelu", "gelu_tanh", "silu")
# The widest layer the fused kernel holds: a warp's 16 rows of 128 features are 64 float32
# accumulators a thread, and the weights of a few such layers still fit the SM's shared memory.
MLP_MAX_WIDTH = 128
MLP_LAYERS = (2, 8)  # the fewest and most layers (Linear modules); one layer is --kind linear


def recipe_for(op_name: str, kind: Kind | None = None) -> Recipe:
    """The recipe for ``op_name``: its own when the name is known, else a skeleton of ``kind``."""
    known = KNOWN_RECIPES.get(op_name)
    if known is not None:
        if kind is not None and kind != known.kind:
            raise KindMismatch(name=op_name, kind=kind, recipe_kind=known.kind)
        return known
    if kind == "linear":
        return LINEAR
    if kind == "mlp":
        return MLP
    return SKELETONS[kind or DEFAULT_KIND]


def known_recipe(name: str) -> Recipe:
    """The recipe `--recipe NAME` asks for: a known recipe, rendered under another op name."""
    known = KNOWN_RECIPES.get(name)
    if known is None:
        raise UnknownRecipe(name=name, known=KNOWN_RECIPES)
    return known


def recipe_named(name: str) -> Recipe:
    """The recipe an answers file names (``recipe:``)."""
    recipes = {**KNOWN_RECIPES, **{r.name: r for r in SKELETONS.values()}, FORMULA.name: FORMULA, SIGNATURE.name: SIGNATURE,
               LINEAR.name: LINEAR, MLP.name: MLP}  # fmt: skip
    return recipes[name]

"""opgen.spec: signatures parsed by PyTorch's parser into a typed OpSpec, and every refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from opgen.cli import app
from opgen.errors import InvalidSignature, UsageError
from opgen.spec import OpSpec, parse_signature

RICH = (
    "(Tensor x, Tensor? weight, int k, float eps=1e-5, bool largest=True, int[] dims=[0, 1], "
    "*, float? scale=None) -> (Tensor values, Tensor indices)"
)


def test_every_supported_type_with_its_forms() -> None:
    spec = parse_signature("topk_like", RICH)
    by_name = {a.name: a for a in spec.arguments}
    assert [a.type for a in spec.arguments] == ["Tensor", "Tensor?", "int", "float", "bool", "int[]", "float?"]
    assert by_name["weight"].cpp_type == "const std::optional<at::Tensor>&"
    assert by_name["dims"].python_parameter == "dims: Sequence[int] = (0, 1)"
    assert by_name["eps"].schema == "float eps=1e-05" and by_name["k"].python_parameter == "k: int"
    assert by_name["scale"].keyword_only and by_name["scale"].python_default == "None"
    assert spec.schema == (
        "topk_like(Tensor x, Tensor? weight, int k, float eps=1e-05, bool largest=True, int[] dims=[0, 1], "
        "*, float? scale=None) -> (Tensor values, Tensor indices)"
    )
    assert spec.call_arguments.endswith("dims, scale=scale")
    assert spec.primary.name == "x" and spec.class_name == "TopkLike"


def test_a_string_argument_in_each_language() -> None:
    spec = parse_signature("pool", '(Tensor x, str mode="mean") -> Tensor')
    mode = spec.arguments[1]
    assert (mode.schema, mode.python_parameter, mode.cpp_parameter) == (
        'str mode="mean"',
        "mode: str = 'mean'",
        "c10::string_view mode",
    )
    assert spec.schema == 'pool(Tensor x, str mode="mean") -> Tensor'


def test_every_recipe_is_described_by_a_spec_with_its_layout() -> None:
    from opgen.recipes import KNOWN_RECIPES, SKELETONS
    from opgen.render import recipe_spec

    layouts = {name: recipe_spec(name, recipe, {}).layout for name, recipe in {**KNOWN_RECIPES, **SKELETONS}.items()}
    assert layouts == {
        "softmax": "softmax", "relu": "elementwise", "gelu": "elementwise", "bitonic_sort": "signature",
        "matmul": "signature", "linear_gelu": "linear", "elementwise": "elementwise", "rowwise": "rowwise", "layernorm": "norm", "rmsnorm": "norm",
    }  # fmt: skip
    softmax = recipe_spec("softmax", KNOWN_RECIPES["softmax"], {})
    assert softmax.saves == "output" and [a.schema for a in softmax.scalars] == ["int dim=-1"]
    assert OpSpec.from_answers(softmax.to_answers()) == softmax


def test_a_formula_ops_spec_takes_its_tensors_and_params() -> None:
    from opgen.recipes import FORMULA
    from opgen.render import recipe_spec

    unary = recipe_spec("mish", FORMULA, {"formula_inputs": ["v"], "formula_params": [{"name": "alpha", "default": 1.5}]})
    assert unary.signature == "(Tensor x, float alpha=1.5) -> Tensor"  # one tensor is x, whatever the formula calls it
    binary = recipe_spec("gate", FORMULA, {"formula_inputs": ["x", "y"], "formula_params": []})
    assert [a.name for a in binary.tensors] == ["x", "y"] and binary.layout == "elementwise"


def test_gradients_flow_from_floating_outputs_to_tensor_inputs() -> None:
    spec = parse_signature("topk_like", RICH)
    assert [o.integer for o in spec.outputs] == [False, True]  # "indices" says int64 by its name
    assert [a.name for a in spec.differentiable_inputs] == ["x", "weight"]
    assert spec.backward_schema == (
        "topk_like_backward(Tensor grad_values, Tensor x, Tensor? weight, int k, float eps, bool largest, "
        "int[] dims, float? scale, Tensor values, Tensor indices) -> (Tensor grad_x, Tensor grad_weight)"
    )
    assert spec.test_suites == ("GradientSuite", "OptionalTensorsSuite", "SeveralTensorsSuite")


def test_int_output_and_no_grad() -> None:
    spec = parse_signature("route", "(Tensor logits) -> (Tensor probs, Tensor expert)", integer_outputs=["expert"])
    assert [o.integer for o in spec.outputs] == [False, True]
    assert not parse_signature("f", "(Tensor x) -> Tensor", gradients=False).has_backward
    only_integers = parse_signature("f", "(Tensor x) -> Tensor ids")
    assert not only_integers.has_backward and only_integers.test_suites == ("NoGradientSuite",)


def test_unnamed_outputs_are_named_by_position() -> None:
    assert [o.name for o in parse_signature("f", "(Tensor x) -> Tensor").outputs] == ["output"]
    assert [o.name for o in parse_signature("f", "(Tensor x) -> (Tensor, Tensor)").outputs] == ["output0", "output1"]


def test_the_answers_record_rebuilds_the_same_spec() -> None:
    spec = parse_signature("topk_like", RICH, integer_outputs=["indices"], summary="a test op")
    assert OpSpec.from_answers(spec.to_answers()) == spec


REFUSED = {
    "does not parse": ("(Tensor x -> Tensor", "schema parser refuses it"),
    "no arrow": ("(Tensor x)", "no '->'"),
    "no parenthesis": ("Tensor x -> Tensor", "must start with '('"),
    "unsupported type": ("(Tensor x, complex c) -> Tensor", "type complex, which is not supported; supported: Tensor, Tensor?"),
    "tensor list": ("(Tensor x, Tensor[] ys) -> Tensor", "not supported"),
    "mutable": ("(Tensor(a!) x) -> Tensor", "mutable or aliased"),
    "aliased output": ("(Tensor(a) x) -> Tensor(a)", "mutable or aliased"),
    "python keyword": ("(Tensor x, int lambda) -> Tensor", "'lambda' is a Python keyword"),
    "c++ keyword": ("(Tensor x, int new) -> Tensor", "'new' is a C++ keyword"),
    "clash": ("(Tensor x, Tensor y) -> Tensor x", "'x' is used twice"),
    "reserved": ("(Tensor x, int grad_x) -> Tensor", "the generated code uses itself"),
    "op name": ("(Tensor f) -> Tensor", "the op's own name"),
    "no tensor": ("(int k) -> Tensor", "no required Tensor argument"),
    "only optional tensors": ("(Tensor? x) -> Tensor", "no required Tensor argument"),
    "keyword-only tensor": ("(Tensor x, *, Tensor y) -> Tensor", "keyword-only"),
    "no outputs": ("(Tensor x) -> ()", "returns nothing"),
    "non-tensor output": ("(Tensor x) -> (Tensor, int)", "outputs must be Tensor"),
    "varargs": ("(Tensor x, ...) -> Tensor", "variable argument lists"),
}


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_refused_signatures_name_the_problem(case: str) -> None:
    signature, words = REFUSED[case]
    with pytest.raises(InvalidSignature, match=None) as caught:
        parse_signature("f", signature)
    assert words in str(caught.value) and isinstance(caught.value, UsageError)
    assert "\n" not in str(caught.value)


def test_int_output_must_name_an_output() -> None:
    with pytest.raises(InvalidSignature, match="--int-output names ids2, which is not an output"):
        parse_signature("f", "(Tensor x) -> Tensor out", integer_outputs=["ids2"])


@pytest.mark.parametrize("case", ["does not parse", "unsupported type", "mutable", "no tensor", "clash"])
def test_refused_signatures_exit_2_and_write_nothing(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPGEN_WORKSPACE", raising=False)
    result = CliRunner().invoke(app, ["new", "f", "--signature", REFUSED[case][0]])
    assert result.exit_code == 2, result.output
    assert "invalid signature" in result.output and "hint:" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--no-grad"], "error: --no-grad needs --signature"),
        (["--int-output", "ids"], "error: --int-output ids needs --signature"),
        (["--signature", "(Tensor x) -> Tensor", "--formula", "x*x"], "takes no --formula"),
        (["--signature", "(Tensor x) -> Tensor", "--kind", "rowwise"], "takes no --kind"),
    ],
)
def test_signature_options_out_of_place_exit_2(
    options: list[str], words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPGEN_WORKSPACE", raising=False)
    result = CliRunner().invoke(app, ["new", "f", *options])
    assert result.exit_code == 2 and words in result.output, result.output
    assert list(tmp_path.iterdir()) == []

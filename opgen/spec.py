"""The typed description of an op: its arguments, outputs and gradients, built and checked in Python.

An :class:`OpSpec` is what `opgen new --signature` makes of a PyTorch schema, what the op's
answers file records (as plain data: :meth:`OpSpec.to_answers`), and what the templates read
(through the ``op_spec`` filter of :mod:`opgen.jinja_ext`): the schema strings, each argument's
Python, C++ and schema forms, which outputs carry gradients. Everything a template prints about an
op's interface comes from here, so it is decided once.

The signature is parsed by PyTorch's own schema parser (``torch._C.parse_schema``).
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from opgen.errors import InvalidSignature

ArgumentType = Literal["Tensor", "Tensor?", "int", "float", "bool", "str", "int[]", "int?", "float?", "bool?"]
# The template folder (template/ops/<layout>) that renders an op, and what its backward op reads.
Layout = Literal["elementwise", "rowwise", "softmax", "signature", "linear", "norm", "mlp"]
Saves = Literal["inputs", "output"]

# schema type (as PyTorch prints it) -> (our name, Python annotation, C++ parameter type)
_TYPES: dict[str, tuple[ArgumentType, str, str]] = {
    "Tensor": ("Tensor", "torch.Tensor", "const at::Tensor&"),
    "Optional[Tensor]": ("Tensor?", "torch.Tensor | None", "const std::optional<at::Tensor>&"),
    "int": ("int", "int", "int64_t"),
    "float": ("float", "float", "double"),
    "bool": ("bool", "bool", "bool"),
    "str": ("str", "str", "c10::string_view"),
    "List[int]": ("int[]", "Sequence[int]", "at::IntArrayRef"),
    "Optional[int]": ("int?", "int | None", "std::optional<int64_t>"),
    "Optional[float]": ("float?", "float | None", "std::optional<double>"),
    "Optional[bool]": ("bool?", "bool | None", "std::optional<bool>"),
}
SUPPORTED_TYPES = ", ".join(name for name, _, _ in _TYPES.values())

# Names the generated code itself uses in the scopes where arguments live: an argument of that
# name would shadow or clash with it.
_RESERVED = frozenset({"torch", "at", "c10", "std", "ctx", "grads", "self", "inputs", "outputs", "op", "m"})
_CPP_KEYWORDS = frozenset(
    "alignas alignof and asm auto bitand bitor bool break case catch char class compl const constexpr "
    "const_cast continue decltype default delete do double dynamic_cast else enum explicit export extern "
    "false float for friend goto if inline int long mutable namespace new noexcept not nullptr operator or "
    "private protected public register reinterpret_cast return short signed sizeof static static_assert "
    "static_cast struct switch template this thread_local throw true try typedef typeid typename union "
    "unsigned using virtual void volatile wchar_t while xor".split()
)
# Output names that say "an index" get int64 without --int-output (documented in the README).
_INDEX_NAME = re.compile(r"^(indices|index|idx|ids|argmax|argmin)$|_(indices|index|idx|ids)$")


@dataclass(frozen=True)
class Argument:
    """One argument of the op, as the signature declares it."""

    name: str
    type: ArgumentType
    default: Any = None  # the Python value of the default, if ``has_default``
    has_default: bool = False
    keyword_only: bool = False

    @property
    def is_tensor(self) -> bool:
        return self.type in ("Tensor", "Tensor?")

    @property
    def optional(self) -> bool:
        return self.type.endswith("?")

    @property
    def python_type(self) -> str:
        return next(py for ours, py, _ in _TYPES.values() if ours == self.type)

    @property
    def cpp_type(self) -> str:
        return next(cpp for ours, _, cpp in _TYPES.values() if ours == self.type)

    @property
    def python_default(self) -> str:
        """The default as Python source (``""`` when there is none)."""
        if not self.has_default:
            return ""
        if isinstance(self.default, (list, tuple)):
            return repr(tuple(self.default)) if self.default else "()"
        return repr(self.default)

    @property
    def schema_default(self) -> str:
        """The default as schema text (``""`` when there is none)."""
        if not self.has_default:
            return ""
        if isinstance(self.default, (list, tuple)):
            return "[" + ", ".join(str(value) for value in self.default) + "]"
        if isinstance(self.default, str):
            return '"' + self.default + '"'
        return repr(self.default)

    @property
    def schema(self) -> str:
        """``int k=3``: the argument in a schema."""
        text = f"{self.type} {self.name}"
        return f"{text}={self.schema_default}" if self.has_default else text

    @property
    def python_parameter(self) -> str:
        """``k: int = 3``: the argument in a Python signature."""
        text = f"{self.name}: {self.python_type}"
        return f"{text} = {self.python_default}" if self.has_default else text

    @property
    def cpp_parameter(self) -> str:
        return f"{self.cpp_type} {self.name}"

    @property
    def example_value(self) -> str:
        """Python source for a valid value of a non-tensor argument: its default, else a small one."""
        if self.has_default:
            return self.python_default
        return {"int": "1", "float": "0.5", "bool": "False", "str": '""', "int[]": "(0,)"}.get(self.type, "None")


@dataclass(frozen=True)
class Output:
    """One Tensor output: a floating one carries a gradient, an int64 one (indices, ids) does not."""

    name: str
    integer: bool = False

    @property
    def differentiable(self) -> bool:
        return not self.integer


@dataclass(frozen=True)
class OpSpec:
    """Everything the templates need to know about an op's interface."""

    name: str
    recipe: str
    arguments: tuple[Argument, ...]
    outputs: tuple[Output, ...]
    gradients: bool = True  # False: `--no-grad`, no backward op
    summary: str = ""
    signature: str = ""  # as the user typed it, for the record
    layout: Layout = "signature"
    saves: Saves = "inputs"  # what the backward op of the elementwise, rowwise and softmax layouts reads
    extra: Mapping[str, Any] = field(default_factory=dict)

    # -- derived views the templates read --------------------------------------------------------
    @property
    def class_name(self) -> str:
        """``bitonic_sort`` -> ``BitonicSort``."""
        return "".join(part[:1].upper() + part[1:] for part in self.name.split("_") if part)

    @property
    def tensors(self) -> tuple[Argument, ...]:
        return tuple(argument for argument in self.arguments if argument.is_tensor)

    @property
    def scalars(self) -> tuple[Argument, ...]:
        """The non-tensor arguments (an ``nn.Module`` holds them as attributes)."""
        return tuple(argument for argument in self.arguments if not argument.is_tensor)

    @property
    def primary(self) -> Argument:
        """The first required Tensor argument: its device and dtype are the op's."""
        return next(argument for argument in self.tensors if not argument.optional)

    @property
    def differentiable_outputs(self) -> tuple[Output, ...]:
        return tuple(output for output in self.outputs if output.differentiable)

    @property
    def has_backward(self) -> bool:
        return self.gradients and bool(self.differentiable_outputs)

    @property
    def differentiable_inputs(self) -> tuple[Argument, ...]:
        """The Tensor arguments that get gradients (every Tensor argument is floating)."""
        return self.tensors if self.has_backward else ()

    @property
    def schema(self) -> str:
        return f"{self.name}({_schema_arguments(self.arguments)}) -> {_schema_returns(o.name for o in self.outputs)}"

    @property
    def backward_arguments(self) -> tuple[Argument, ...]:
        """What the backward op reads: each differentiable output's gradient, the inputs, the outputs."""
        return (
            *(Argument(f"grad_{output.name}", "Tensor") for output in self.differentiable_outputs),
            *(Argument(a.name, a.type) for a in self.arguments),  # no defaults: autograd passes everything
            *(Argument(output.name, "Tensor") for output in self.outputs),
        )

    @property
    def backward_outputs(self) -> tuple[Output, ...]:
        return tuple(Output(f"grad_{argument.name}") for argument in self.differentiable_inputs)

    @property
    def backward_schema(self) -> str:
        returns = _schema_returns(output.name for output in self.backward_outputs)
        return f"{self.name}_backward({_schema_arguments(self.backward_arguments)}) -> {returns}"

    @property
    def cpp_returns(self) -> str:
        """The C++ return type of the forward: one tensor, or a tuple of them."""
        return _cpp_returns(len(self.outputs))

    @property
    def cpp_backward_returns(self) -> str:
        return _cpp_returns(len(self.backward_outputs))

    @property
    def cpp_backward_parameters(self) -> str:
        return ", ".join(argument.cpp_parameter for argument in self.backward_arguments)

    @property
    def backward_argument_names(self) -> str:
        return ", ".join(argument.name for argument in self.backward_arguments)

    @property
    def uses_sequences(self) -> bool:
        """Whether the Python signature needs ``Sequence`` (an ``int[]`` argument)."""
        return any(argument.type == "int[]" for argument in self.arguments)

    @property
    def python_parameters(self) -> str:
        """``x: torch.Tensor, k: int, *, eps: float = 1e-05``."""
        return _python_parameters(self.arguments)

    @property
    def cpp_parameters(self) -> str:
        return ", ".join(argument.cpp_parameter for argument in self.arguments)

    @property
    def positional(self) -> tuple[Argument, ...]:
        return tuple(argument for argument in self.arguments if not argument.keyword_only)

    @property
    def keyword_only(self) -> tuple[Argument, ...]:
        return tuple(argument for argument in self.arguments if argument.keyword_only)

    @property
    def call_arguments(self) -> str:
        """``x, k, eps=eps``: the arguments passed on, keyword-only ones by keyword."""
        return ", ".join(f"{a.name}={a.name}" if a.keyword_only else a.name for a in self.arguments)

    @property
    def argument_names(self) -> str:
        return ", ".join(argument.name for argument in self.arguments)

    @property
    def test_suites(self) -> tuple[str, ...]:
        """The classes of opgen.testing.op_suite whose checks apply to this op (each adds its own)."""
        suites = ["GradientSuite" if self.has_backward else "NoGradientSuite"]
        if any(argument.optional for argument in self.tensors):
            suites.append("OptionalTensorsSuite")
        if len(self.tensors) > 1:
            suites.append("SeveralTensorsSuite")
        return tuple(suites)

    # -- the record in the answers file ------------------------------------------------------------
    def to_answers(self) -> dict[str, Any]:
        """Plain data for the answers file: what :meth:`from_answers` rebuilds the spec from."""
        return {
            "layout": self.layout,  # the template folder (ops/<layout>) that renders the op
            **({"saves": self.saves} if self.saves != "inputs" else {}),
            "name": self.name,
            "recipe": self.recipe,
            "summary": self.summary,
            "signature": self.signature,
            "gradients": self.gradients,
            "arguments": [
                {
                    "name": a.name,
                    "type": a.type,
                    **({"default": _plain(a.default)} if a.has_default else {}),
                    **({"keyword_only": True} if a.keyword_only else {}),
                }
                for a in self.arguments
            ],
            "outputs": [{"name": o.name, "dtype": "int64" if o.integer else "input"} for o in self.outputs],
            **({"extra": dict(self.extra)} if self.extra else {}),
        }

    @classmethod
    def from_answers(cls, data: Mapping[str, Any]) -> OpSpec:
        return cls(
            name=data["name"],
            recipe=data["recipe"],
            summary=data.get("summary", ""),
            signature=data.get("signature", ""),
            layout=data.get("layout", "signature"),
            saves=data.get("saves", "inputs"),
            gradients=bool(data.get("gradients", True)),
            arguments=tuple(
                Argument(
                    name=a["name"],
                    type=a["type"],
                    default=a.get("default"),
                    has_default="default" in a,
                    keyword_only=bool(a.get("keyword_only", False)),
                )
                for a in data["arguments"]
            ),
            outputs=tuple(Output(o["name"], integer=o.get("dtype") == "int64") for o in data["outputs"]),
            extra=dict(data.get("extra", {})),
        )


def _cpp_returns(count: int) -> str:
    return "at::Tensor" if count == 1 else f"std::tuple<{', '.join(['at::Tensor'] * count)}>"


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _schema_arguments(arguments: Iterable[Argument]) -> str:
    return _keyword_marked(arguments, lambda argument: argument.schema)


def _schema_returns(names: Iterable[str]) -> str:
    listed = [f"Tensor {name}" for name in names]
    return listed[0].split()[0] if len(listed) == 1 else f"({', '.join(listed)})"


def _python_parameters(arguments: Iterable[Argument]) -> str:
    return _keyword_marked(arguments, lambda argument: argument.python_parameter)


def _keyword_marked(arguments: Iterable[Argument], spelled: Callable[[Argument], str]) -> str:
    """The arguments spelled and joined, ``*`` before the first keyword-only one (schema and Python alike)."""
    parts: list[str] = []
    for argument in arguments:
        if argument.keyword_only and "*" not in parts:
            parts.append("*")
        parts.append(spelled(argument))
    return ", ".join(parts)


def parse_signature(
    name: str,
    signature: str,
    *,
    recipe: str = "signature",
    integer_outputs: Sequence[str] = (),
    gradients: bool = True,
    summary: str = "",
    layout: Layout = "signature",
    saves: Saves = "inputs",
) -> OpSpec:
    """The spec of op ``name`` from ``signature``, the part of a PyTorch schema after the name.

    ``"(Tensor x, Tensor? weight, int k, float eps=1e-5) -> (Tensor values, Tensor indices)"``.
    Outputs named in ``integer_outputs``, or named like an index (``indices``, ``*_ids``), are
    int64 and carry no gradient. Raises :class:`InvalidSignature` naming the problem.
    """
    import torch  # here, not at the top: `opgen --help` need not load torch

    text = signature.strip()
    if not text.startswith("("):
        raise InvalidSignature(signature=signature, reason="it must start with '(' (the arguments, then '->' and the outputs)")
    if "->" not in text:
        raise InvalidSignature(signature=signature, reason="it has no '->' and outputs, e.g. '-> Tensor'")
    try:
        schema = torch._C.parse_schema(f"{name}{text}")
    except RuntimeError as error:
        message = str(error).strip() or "it does not parse"
        message = message.split("please report a bug to PyTorch. ")[-1].splitlines()[0]  # its assert's prefix
        message = message.removesuffix(":").removesuffix(" here")
        raise InvalidSignature(signature=signature, reason=f"PyTorch's schema parser refuses it: {message}") from None
    if "..." in text:
        raise InvalidSignature(signature=signature, reason="variable argument lists ('...') are not supported")

    arguments = tuple(_argument(signature, parsed) for parsed in schema.arguments)
    if not any(argument.type == "Tensor" for argument in arguments):
        raise InvalidSignature(
            signature=signature,
            reason="it has no required Tensor argument; an op needs one (its device and dtype are the op's)",
        )
    keyword_tensors = [a.name for a in arguments if a.keyword_only and a.is_tensor]
    if keyword_tensors:
        raise InvalidSignature(
            signature=signature,
            reason=f"Tensor argument '{keyword_tensors[0]}' is keyword-only; torch's autograd takes only positional tensors",
            hint="move it before the '*'",
        )
    outputs = _outputs(signature, schema.returns, integer_outputs)
    _check_names(signature, name, [a.name for a in arguments], [o.name for o in outputs])
    return OpSpec(
        name=name,
        recipe=recipe,
        arguments=arguments,
        outputs=outputs,
        gradients=gradients,
        summary=summary,
        signature=text,
        layout=layout,
        saves=saves,
    )


def _argument(signature: str, parsed: Any) -> Argument:
    if parsed.alias_info is not None:
        raise InvalidSignature(
            signature=signature,
            reason=f"argument '{parsed.name}' is mutable or aliased (an annotation like Tensor(a!)); "
            "opgen's ops take inputs read-only and return new tensors",
            hint="drop the (a!) annotation and return the result as an output",
        )
    known = _TYPES.get(str(parsed.type))
    if known is None:
        raise InvalidSignature(
            signature=signature,
            reason=f"argument '{parsed.name}' has type {parsed.type}, which is not supported; supported: {SUPPORTED_TYPES}",
        )
    return Argument(
        name=parsed.name,
        type=known[0],
        default=parsed.default_value,
        has_default=parsed.has_default_value(),
        keyword_only=parsed.kwarg_only,
    )


def _outputs(signature: str, returns: Sequence[Any], integer_outputs: Sequence[str]) -> tuple[Output, ...]:
    if not returns:
        raise InvalidSignature(signature=signature, reason="it returns nothing; an op needs at least one Tensor output")
    names: list[str] = []
    for position, parsed in enumerate(returns):
        if str(parsed.type) != "Tensor":
            raise InvalidSignature(
                signature=signature, reason=f"output {position} has type {parsed.type}; outputs must be Tensor"
            )
        if parsed.alias_info is not None:
            raise InvalidSignature(signature=signature, reason=f"output {position} aliases an input; outputs must be new tensors")
        names.append(parsed.name or ("output" if len(returns) == 1 else f"output{position}"))
    unknown = sorted(set(integer_outputs) - set(names))
    if unknown:
        raise InvalidSignature(
            signature=signature,
            reason=f"--int-output names {', '.join(unknown)}, which is not an output (the outputs: {', '.join(names)})",
        )
    return tuple(Output(n, integer=n in integer_outputs or bool(_INDEX_NAME.search(n))) for n in names)


def _check_names(signature: str, op_name: str, arguments: Sequence[str], outputs: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in (*arguments, *outputs):
        problem = None
        if keyword.iskeyword(name) or keyword.issoftkeyword(name):
            problem = "a Python keyword"
        elif name in _CPP_KEYWORDS:
            problem = "a C++ keyword"
        elif name in _RESERVED or name.startswith("grad_") or name.startswith("_"):
            problem = "a name the generated code uses itself (as are grad_* and names starting with _)"
        elif name == op_name:
            problem = "the op's own name"
        elif name in seen:
            problem = "used twice (argument and output names must all differ)"
        if problem:
            raise InvalidSignature(signature=signature, reason=f"the name '{name}' is {problem}", hint="rename it")
        seen.add(name)

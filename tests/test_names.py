from __future__ import annotations

import re

import pytest

from opgen.errors import InvalidOpName, UsageError
from opgen.names import validate_op_name


@pytest.mark.parametrize("name", ["softmax", "my_op", "fused_gelu2", "a"])
def test_accepts_lowercase_identifiers(name: str) -> None:
    assert validate_op_name(name) == name


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "empty"),
        ("MyOp", "lowercase"),
        ("2fast", "lowercase"),
        ("my-op", "lowercase"),
        ("my op", "lowercase"),
        ("a/b", "path separator"),
        ("..", "path separator"),
        ("a\\b", "path separator"),
        ("class", "Python keyword"),
        ("lambda", "Python keyword"),
        ("match", "Python keyword"),
        ("template", "C++ keyword"),
        ("namespace", "C++ keyword"),
        ("include", "workspace"),
        ("setup", "workspace"),
        ("build", "workspace"),
        ("csrc", "workspace"),
        ("_private", "lowercase"),
        ("x" * 65, "longer than"),
    ],
)
def test_refuses_with_reason(name: str, reason: str) -> None:
    with pytest.raises(InvalidOpName, match=re.escape(reason)) as raised:
        validate_op_name(name)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, UsageError)
    assert raised.value.exit_code == 2

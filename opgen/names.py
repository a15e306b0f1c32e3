"""Which op names are acceptable.

An op name becomes a folder, a Python module and function, a C++ function prefix and the name
in ``torch.ops.generated_ops``; it must be valid, and harmless, as all of them.
"""

from __future__ import annotations

import keyword
import re

from opgen.errors import InvalidOpName

_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")

# Reserved words of C++20 (and the alternative operator tokens), which the op name prefixes but
# could still collide with when a template uses it bare.
CPP_KEYWORDS = frozenset(
    """
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
    char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
    co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
    extern false float for friend goto if inline int long mutable namespace new noexcept not
    not_eq nullptr operator or or_eq private protected public register reinterpret_cast requires
    return short signed sizeof static static_assert static_cast struct switch template this
    thread_local throw true try typedef typeid typename union unsigned using virtual void
    volatile wchar_t while xor xor_eq
    """.split()
)

# Names the workspace already uses for its own files and folders, or that would shadow them.
WORKSPACE_NAMES = frozenset(
    {"include", "setup", "build", "dist", "csrc", "tests", "test", "docs", "opgen", "torch", "generated_ops"}
)

MAX_LENGTH = 64


def validate_op_name(name: str) -> str:
    """Return ``name`` if it can name an op, else raise InvalidOpName saying why."""
    if not name:
        raise InvalidOpName(name=name, reason="it is empty")
    if "/" in name or "\\" in name or ".." in name:
        raise InvalidOpName(name=name, reason="it contains a path separator or '..'")
    if not _IDENTIFIER.fullmatch(name):
        raise InvalidOpName(
            name=name, reason="it must start with a lowercase letter and hold only lowercase letters, digits and '_'"
        )
    if len(name) > MAX_LENGTH:
        raise InvalidOpName(name=name, reason=f"it is longer than {MAX_LENGTH} characters")
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        raise InvalidOpName(name=name, reason="it is a Python keyword")
    if name in CPP_KEYWORDS:
        raise InvalidOpName(name=name, reason="it is a C++ keyword")
    if name in WORKSPACE_NAMES or name.startswith("_"):
        raise InvalidOpName(name=name, reason="the workspace uses that name for its own files")
    return name

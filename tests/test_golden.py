"""Golden files: what each recipe renders, byte for byte, so a template change shows in review.

After a deliberate template change: `python scripts/update_golden.py`, then read the diff.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from golden_cases import CASES, GOLDEN, render_cases, rendered_files
from shared_build import made_once

from opgen.formatting import format_cpp, format_python
from opgen.workspace import Workspace

# One process runs these tests (the other would only wait for the render of every case).
pytestmark = pytest.mark.xdist_group("golden")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    # Rendered once per run (both test processes share it): the tests only read it.
    folder = made_once(tmp_path_factory, "golden", lambda folder: render_cases(Workspace.locate(folder / "generated_ops")))
    return {name: folder / "generated_ops" / name for name in CASES}


@pytest.mark.parametrize("op", CASES)
def test_rendered_files_match_the_golden_files(op: str, rendered: dict[str, Path]) -> None:
    fresh, pinned = rendered_files(rendered[op]), rendered_files(GOLDEN / op)
    assert sorted(fresh) == sorted(pinned), f"{op}: the rendered files differ; run scripts/update_golden.py"
    for name, text in fresh.items():
        assert text == pinned[name], f"{op}/{name} differs from tests/golden; run scripts/update_golden.py"


# Jinja's delimiters as a template leaves them ({{ name }}, {% if %}, {# note #}); C++ brace
# initialisers ({{1, 2}}, {~x, ~y}) are not residue.
JINJA_RESIDUE = re.compile(r"\{\{ ?[A-Za-z_.]+ ?(\||\}\})|\{%|%\}|\{#|#\}")


@pytest.mark.parametrize("op", CASES)
def test_rendered_files_hold_no_template_residue(op: str, rendered: dict[str, Path]) -> None:
    for name, text in rendered_files(rendered[op]).items():
        found = JINJA_RESIDUE.search(text)
        assert found is None, f"{op}/{name} holds {found.group(0)!r}"


@pytest.mark.parametrize("op", CASES)
def test_rendered_files_are_formatted(op: str, rendered: dict[str, Path]) -> None:
    # Every rendered file is a fixed point of its formatter (opgen.formatting), so a user's
    # `ruff format` or `clang-format -i` changes only the lines they wrote.
    for name, text in rendered_files(rendered[op]).items():
        if name.endswith(".py"):
            assert format_python(text) == text, f"{op}/{name} is not ruff-formatted"
        elif name.endswith((".cpp", ".cu", ".h", ".cuh")):
            assert format_cpp(text) == text, f"{op}/{name} is not clang-formatted"


@pytest.mark.parametrize("op", CASES)
def test_cuda_kernels_are_registered_from_a_cpp_file(op: str, rendered: dict[str, Path]) -> None:
    # nvcc parses every header twice (device and host passes); torch/library.h alone is some 20 s
    # of a kernel file's compile. So no .cu includes it: each op registers its CUDA kernels once,
    # from a C++ file of its CUDA side (csrc/<op>_cuda*.cpp, compiled only with CUDA).
    files = rendered_files(rendered[op])
    for name, text in files.items():
        if name.endswith(".cu"):
            assert "torch/library.h" not in text and "TORCH_LIBRARY" not in text, f"{op}/{name}"
    registering = [name for name, text in files.items() if "TORCH_LIBRARY_IMPL(generated_ops, CUDA, m)" in text]
    assert registering and all(re.fullmatch(rf"csrc/{op}_cuda\w*\.cpp", name) for name in registering), registering
    assert len(registering) == 1, registering

"""opgen.jinja_ext: the template files' compiled code is shared by renders, never across a change."""

from __future__ import annotations

from pathlib import Path

from jinja2 import FileSystemLoader
from jinja2.sandbox import SandboxedEnvironment

from opgen.jinja_ext import OpSpecExtension


def environment(folder: Path, **settings: object) -> SandboxedEnvironment:
    """An environment as copier makes one for each render: opgen's extension loaded."""
    return SandboxedEnvironment(loader=FileSystemLoader(folder), extensions=[OpSpecExtension], **settings)  # type: ignore[arg-type]


def test_renders_share_compiled_templates_but_never_stale_or_foreign_code(tmp_path: Path) -> None:
    first, second = tmp_path / "render1", tmp_path / "render2"  # two renders' copies of a template
    for folder in (first, second):
        folder.mkdir()
        (folder / "op.py.jinja").write_text("x = {{ value }}\n")
    template = environment(first).get_template("op.py.jinja")
    assert template.render(value=1) == "x = 1"
    # Another render's environment, the same file elsewhere: the code compiled once serves both.
    again = environment(second).get_template("op.py.jinja")
    assert again.render(value=2) == "x = 2" and again.root_render_func.__code__ is template.root_render_func.__code__
    # An edited file compiles afresh.
    (second / "op.py.jinja").write_text("y = {{ value }}\n")
    assert environment(second).get_template("op.py.jinja").render(value=3) == "y = 3"
    # Other delimiters (copier's _envops) read the same source differently: not the same code.
    (second / "op.py.jinja").write_text("x = {{ value }} [[ value ]]\n")
    brackets = environment(second, variable_start_string="[[", variable_end_string="]]")
    assert brackets.get_template("op.py.jinja").render(value=4) == "x = {{ value }} 4"
    assert environment(second).get_template("op.py.jinja").render(value=4) == "x = 4 [[ value ]]"

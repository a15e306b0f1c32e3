"""Rendering the copier template: the workspace's own files and one op folder.

Every render goes to a temporary folder beside its destination first and is moved into place
only once complete, so an error midway leaves nothing half-written.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import copier

from opgen import __version__
from opgen.errors import InvalidFormula, OpExists, RenderError, WorkspaceError
from opgen.names import validate_op_name
from opgen.recipes import FORMULA, Kind, recipe_for
from opgen.workspace import Workspace


def template_dir() -> Path:
    """The copier template: packaged inside opgen in a wheel, beside it in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "template", here.parent / "template"):
        if (candidate / "copier.yml").is_file():
            return candidate
    raise RenderError(what="anything", reason=f"the opgen template is missing (looked in {here})")


@contextmanager
def _staging_dir(parent: Path, label: str) -> Iterator[Path]:
    """A scratch folder in ``parent`` (same filesystem, so the final move is one rename)."""
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".opgen-{label}-", dir=parent))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _run_copier(destination: Path, data: dict[str, Any], what: str) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # copier's notes on template versions mean nothing here
            copier.run_copy(
                str(template_dir()),
                str(destination),
                data={**data, "opgen_version": __version__},
                defaults=True,
                overwrite=True,
                quiet=True,
            )
    except Exception as error:  # copier raises many types; each means the render failed
        raise RenderError(what=what, reason=f"{type(error).__name__}: {error}") from error


def render_workspace(workspace: Workspace) -> None:
    """Render the workspace's own files into ``workspace.path`` if they are missing.

    A folder that exists already (empty, or holding other files) receives the workspace files
    beside its contents, but never over a file of the same name.
    """
    if workspace.exists:
        return
    with _staging_dir(workspace.path.parent, "workspace") as staging:
        rendered = staging / workspace.package
        _run_copier(rendered, {"scope": "workspace"}, what="the workspace")
        if not workspace.path.exists():
            rendered.rename(workspace.path)
            return
        clashes = sorted(entry.name for entry in rendered.iterdir() if (workspace.path / entry.name).exists())
        if clashes:
            raise WorkspaceError(
                path=str(workspace.path),
                reason=f"it already holds {', '.join(clashes)}, which the workspace files would replace",
                hint="choose an empty or new folder with --workspace",
            )
        for entry in rendered.iterdir():
            entry.rename(workspace.path / entry.name)


def _formula_answers(formula: str, params: Sequence[str], kind: Kind | None) -> dict[str, Any]:
    """The formula recipe's copier answers: the formula parsed, differentiated and printed as code."""
    # Imported here: sympy takes a moment to load, and only formula ops need it.
    from opgen.formula import parse_formula, parse_param, render_formula

    if kind not in (None, FORMULA.kind):
        raise InvalidFormula(
            formula=formula, reason=f"a formula renders an {FORMULA.kind} op, not {kind}", hint="drop --kind"
        )
    return render_formula(parse_formula(formula, [parse_param(text) for text in params]))


def new_op(
    name: str,
    *,
    kind: Kind | None = None,
    workspace: Workspace,
    force: bool = False,
    formula: str | None = None,
    params: Sequence[str] = (),
) -> Path:
    """Render op ``name`` into the workspace (creating the workspace if needed); return its folder.

    With ``formula`` (and its ``params``, each ``NAME=DEFAULT``) the op is the formula's
    elementwise op, with its gradient derived (opgen.formula); it is checked before anything is written.
    """
    validate_op_name(name)
    data: dict[str, Any] = {"scope": "op", "op_name": name}
    if formula is not None:
        data |= {"recipe": FORMULA.name, **_formula_answers(formula, params, kind)}
    elif params:
        raise InvalidFormula(
            formula=" ".join(params), reason="--param needs --formula", what="param", hint="add --formula EXPR"
        )
    else:
        data["recipe"] = recipe_for(name, kind).name
    target = workspace.op_dir(name)
    if target.exists() and not force:
        raise OpExists(name=name, path=str(target))
    render_workspace(workspace)
    with _staging_dir(workspace.path, f"new-{name}") as staging:
        rendered = staging / name
        _run_copier(rendered, data, what=f"op '{name}'")
        if target.exists():
            # --force: swap the old folder out only once the new one is complete.
            retired = staging / f"{name}.replaced"
            target.rename(retired)
        rendered.rename(target)
    return target

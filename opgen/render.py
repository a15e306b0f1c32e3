"""Rendering the copier template: the workspace's own files and one op folder.

Every render goes to a temporary folder beside its destination first and is moved into place
only once complete, so an error midway leaves nothing half-written.

Each render also keeps a snapshot of the template it used inside the workspace
(``.opgen/templates/<id>/``, the id a hash of the template's files) and records the id as
``_commit`` in the folder's answers file: `opgen update` merges from that snapshot (opgen.update),
so updates need no git checkout of opgen and no state outside the workspace.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Literal

from opgen import __version__
from opgen.errors import (
    InvalidActivation,
    InvalidFormula,
    InvalidMlp,
    InvalidSignature,
    KindMismatch,
    NoResidualForm,
    OpExists,
    OpgenError,
    RenderError,
    TemplateNotFound,
    WorkspaceError,
)
from opgen.names import validate_op_name
from opgen.recipes import (
    ACTIVATIONS,
    FORMULA,
    KNOWN_RECIPES,
    LINEAR,
    MLP,
    MLP_ACTIVATIONS,
    MLP_LAYERS,
    MLP_MAX_WIDTH,
    SIGNATURE,
    Kind,
    Recipe,
    known_recipe,
    recipe_for,
)
from opgen.spec import OpSpec, parse_signature
from opgen.workspace import Workspace

TEMPLATE_ENV = "OPGEN_TEMPLATE"
SNAPSHOTS = Path(".opgen") / "templates"
SNAPSHOTS_README = """\
# Template snapshots

`opgen new` and `opgen update` keep here a copy of each opgen template that rendered a folder of
this workspace; each folder's `.copier-answers.yml` names its snapshot as `_commit`. `opgen update`
merges from it to keep your edits while applying the template's changes. Keep this folder with
your ops (commit it); `opgen update` deletes the snapshots no folder names any more.
"""
_NOT_TEMPLATE = shutil.ignore_patterns("__pycache__", "*.pyc", ".DS_Store")


def template_dir() -> Path:
    """The copier template: $OPGEN_TEMPLATE, else packaged inside opgen (wheel), else beside it (checkout)."""
    override = os.environ.get(TEMPLATE_ENV)
    if override:
        chosen = Path(override).expanduser().resolve()
        if not (chosen / "copier.yml").is_file():
            raise TemplateNotFound(path=str(chosen), variable=TEMPLATE_ENV)
        return chosen
    here = Path(__file__).resolve().parent
    for candidate in (here / "template", here.parent / "template"):
        if (candidate / "copier.yml").is_file():
            return candidate
    raise RenderError(what="anything", reason=f"the opgen template is missing (looked in {here})")


def snapshot_id(template: Path) -> str:
    """A short hash of the template's files (names and bytes, caches aside): equal templates, equal ids.

    Python's caches are left out as copies leave them out, so a template and its copies hash alike.
    """
    digest = hashlib.sha256()
    for path in sorted(template.rglob("*")):
        if path.is_file() and not any(_NOT_TEMPLATE("", [part]) for part in path.relative_to(template).parts):
            for part in (path.relative_to(template).as_posix().encode(), path.read_bytes()):
                digest.update(len(part).to_bytes(8, "little") + part)
    return digest.hexdigest()[:12]


def copy_template(destination: Path) -> str:
    """Copy the current template to ``destination`` (a new folder); return its snapshot id.

    Renders use such a copy (or a snapshot: current_template), so the snapshot kept is exactly
    the template used even when the template folder changes meanwhile.
    """
    shutil.copytree(template_dir(), destination, ignore=_NOT_TEMPLATE)
    return snapshot_id(destination)


def current_template(root: Path, staging: Path) -> tuple[Path, str]:
    """The current template to render from, for the workspace at ``root``, and its snapshot id.

    The workspace's own snapshot of it where it holds one intact (its files hash to its id),
    else a copy made in ``staging``: either way the files rendered are the snapshot recorded,
    even when the template folder changes meanwhile. (A copy takes most of a small op's render.)
    """
    stored = snapshot_dir(root, snapshot_id(template_dir()))
    if stored.is_dir() and snapshot_id(stored) == stored.name:
        return stored, stored.name
    return staging / "template", copy_template(staging / "template")


def snapshot_dir(root: Path, snapshot: str) -> Path:
    """Where the workspace at ``root`` keeps snapshot ``snapshot``."""
    return root / SNAPSHOTS / snapshot


def store_snapshot(template: Path, root: Path, snapshot: str) -> None:
    """Keep a copy of ``template`` as snapshot ``snapshot`` of the workspace at ``root`` (once).

    The copy is made beside its place and renamed into it, so it appears complete or not at all.
    """
    target = snapshot_dir(root, snapshot)
    if target.is_dir():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    readme = target.parent.parent / "README.md"
    if not readme.exists():
        readme.write_text(SNAPSHOTS_README)
    staging = Path(tempfile.mkdtemp(prefix=".opgen-snapshot-", dir=target.parent))
    try:
        shutil.copytree(template, staging / snapshot)
        try:
            (staging / snapshot).rename(target)
        except OSError:
            if not target.is_dir():  # another opgen stored the same snapshot meanwhile: fine
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextmanager
def _staging_dir(parent: Path, label: str) -> Iterator[Path]:
    """A scratch folder in ``parent`` (same filesystem, so the final move is one rename)."""
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".opgen-{label}-", dir=parent))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def run_copier(
    command: Literal["run_copy", "run_update"],
    *args: str,
    failure: Callable[[str], OpgenError],
    **options: Any,
) -> None:
    """Run copier's ``command`` (``run_copy`` or ``run_update``) without questions or output.

    opgen gives every answer in ``data`` and renders into scratch folders only, so copier takes
    the defaults and overwrites without asking. Whatever copier raises becomes
    ``failure(reason)``: the caller's error for what it was rendering or updating.
    """
    import copier  # here, not at the top: it takes a third of a second, which `opgen build` need not pay
    from plumbum import local  # copier's own dependency: the environment copier runs git in

    # A copy renders a folder that is no git repository (a scratch copy of a template, or a
    # snapshot) into a new scratch folder, where git has nothing to do; yet copier, finding git on
    # its PATH, asks it about both and about every file it writes (a dozen processes a render,
    # a third of its time). Its PATH (plumbum's own copy of the environment) has no git for a copy.
    # An update's merge is git's, and keeps it.
    without_git = local.env(PATH=os.devnull) if command == "run_copy" else nullcontext()
    try:
        with warnings.catch_warnings(), without_git:
            warnings.simplefilter("ignore")  # copier's notes on template versions and dirty templates mean nothing here
            # unsafe: the template is opgen's own, and it loads opgen's Jinja extension (opgen.jinja_ext).
            getattr(copier, command)(*args, defaults=True, overwrite=True, quiet=True, unsafe=True, **options)
    except OpgenError:
        raise  # opgen's own, already saying what failed
    except Exception as error:  # copier raises many types; each means this render failed
        raise failure(f"{type(error).__name__}: {error}") from error


def _run_copier(template: Path, destination: Path, data: dict[str, Any], what: str, snapshot: str) -> None:
    run_copier(
        "run_copy",
        str(template),
        str(destination),
        data={**data, "opgen_version": __version__, "opgen_snapshot": snapshot},
        failure=lambda reason: RenderError(what=what, reason=reason),
    )


def render_workspace(workspace: Workspace) -> None:
    """Render the workspace's own files into ``workspace.path`` if they are missing.

    A folder that exists already (empty, or holding other files) receives the workspace files
    beside its contents, but never over a file of the same name.
    """
    if workspace.exists:
        return
    with _staging_dir(workspace.path.parent, "workspace") as staging:
        snapshot = copy_template(staging / "template")
        rendered = staging / workspace.package
        _run_copier(staging / "template", rendered, {"scope": "workspace"}, what="the workspace", snapshot=snapshot)
        store_snapshot(staging / "template", rendered, snapshot)
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
    """The formula recipe's copier answers: the formula, checked by parsing it, its inputs and params."""
    # Imported here: sympy takes a moment to load, and only formula ops need it.
    from opgen.formula import formula_answers, parse_formula, parse_param

    if kind not in (None, FORMULA.kind):
        raise InvalidFormula(
            formula=formula, reason=f"a formula renders an {FORMULA.kind} op, not {kind}", hint="drop --kind"
        )
    return formula_answers(parse_formula(formula, [parse_param(text) for text in params]))


def recipe_spec(name: str, recipe: Recipe, answers: Mapping[str, Any], *, residual: bool = False) -> OpSpec:
    """The spec of op ``name`` rendered by ``recipe`` (not from --signature).

    Its recipe's interface (its `--residual` form's with ``residual``), or for a formula op the
    formula's tensors and params (from ``answers``).
    """
    signature = recipe.residual_signature if residual else recipe.signature
    extra = {**recipe.extra, "residual": residual} if recipe.residual_signature else dict(recipe.extra)
    if recipe.name == FORMULA.name:
        inputs = answers["formula_inputs"]
        # A formula of one tensor takes it as x, whatever the formula calls it.
        tensors = [f"Tensor {name}" for name in (inputs if len(inputs) > 1 else ["x"])]
        params = [f"float {p['name']}={float(p['default'])!r}" for p in answers.get("formula_params", [])]
        signature = f"({', '.join(tensors + params)}) -> Tensor"
    assert signature is not None, f"recipe {recipe.name} has no signature of its own"
    spec = parse_signature(
        name, signature, recipe=recipe.name, summary=recipe.summary, layout=recipe.layout, saves=recipe.saves
    )
    return dataclasses.replace(spec, extra=extra) if extra else spec


def _linear_answers(
    name: str, activation: str | None, bias: bool, *, formula: str | None, signature: str | None, params: Sequence[str]
) -> dict[str, Any]:
    """The linear recipe's copier answers: x, weight (and bias) and the activation, checked.

    A named activation runs in the GEMM's epilogue (or ATen's, exact GELU); anything else is a
    formula of one input (the language of --formula), applied by opgen's formula kernels.
    """
    chosen = "none" if activation is None else activation.strip()
    if formula is not None or signature is not None or params:
        option = "--formula" if formula is not None else "--signature" if signature is not None else "--param"
        raise InvalidActivation(
            activation=chosen, reason=f"--kind linear takes no {option}", hint="give the activation as --activation"
        )
    extra: dict[str, Any] = {"activation": chosen}
    if chosen not in ACTIVATIONS:
        # Imported here: sympy takes a moment to load, and only formula activations need it.
        from opgen.formula import formula_answers, parse_formula

        answers = formula_answers(parse_formula(chosen))
        inputs = answers["formula_inputs"]
        if len(inputs) != 1:
            raise InvalidActivation(
                activation=chosen,
                reason=f"an activation is a formula of one input (the pre-activation), but this one has {len(inputs)}: "
                + ", ".join(inputs),
            )
        extra = {"activation": "formula", "formula": answers["formula"], "formula_input": inputs[0]}
    arguments = "Tensor x, Tensor weight, Tensor? bias=None" if bias else "Tensor x, Tensor weight"
    spec = parse_signature(name, f"({arguments}) -> Tensor", recipe=LINEAR.name, summary=LINEAR.summary, layout=LINEAR.layout)
    return {"recipe": LINEAR.name, "spec": dataclasses.replace(spec, extra=extra).to_answers()}


def parse_widths(text: str) -> list[int]:
    """``--widths 100,128,64,10``: the MLP's feature counts, input first, checked."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() for part in parts):
        raise InvalidMlp(option="--widths", value=text, reason="widths are positive integers separated by commas")
    widths = [int(part) for part in parts]
    low, high = MLP_LAYERS
    if not low + 1 <= len(widths) <= high + 1:
        raise InvalidMlp(
            option="--widths",
            value=text,
            reason=f"an MLP has {low} to {high} layers, so {low + 1} to {high + 1} widths (input, hidden..., output), "
            f"not {len(widths)}",
            hint="for a single layer use `opgen new <op> --kind linear`" if len(widths) == 2 else "",
        )
    for width in widths:
        if not 1 <= width <= MLP_MAX_WIDTH:
            raise InvalidMlp(
                option="--widths",
                value=text,
                reason=f"each width must be 1 to {MLP_MAX_WIDTH} (the fused kernel holds a layer's rows on chip), "
                f"not {width}",
                hint=f"split a wider layer off as its own `--kind linear` op, or narrow the network to {MLP_MAX_WIDTH}",
            )
    return widths


def _mlp_answers(
    name: str,
    widths: str | None,
    activation: str | None,
    output_activation: str | None,
    bias: bool,
    *,
    others: Mapping[str, bool],
) -> dict[str, Any]:
    """The MLP recipe's copier answers: x and each layer's weight (and bias), widths and activations."""
    given = [option for option, present in others.items() if present]
    if given:
        raise InvalidMlp(option=given[0], value="", reason="--kind mlp takes no " + ", ".join(given),
                         hint="give --widths, --activation, --output-activation and --no-bias only")  # fmt: skip
    if widths is None:
        raise InvalidMlp(option="--widths", value="", reason="--kind mlp needs the network's widths",
                         hint="add --widths 100,128,64,10 (input, hidden..., output features)")  # fmt: skip
    parsed = parse_widths(widths)
    chosen = {"--activation": "relu" if activation is None else activation.strip(),
              "--output-activation": "none" if output_activation is None else output_activation.strip()}  # fmt: skip
    for option, value in chosen.items():
        if value not in MLP_ACTIVATIONS:
            raise InvalidMlp(option=option, value=value, reason="an MLP's activation is one of " + ", ".join(MLP_ACTIVATIONS))
    layers = len(parsed) - 1
    tensors = ["Tensor x"]
    for layer in range(1, layers + 1):
        tensors += [f"Tensor w{layer}", f"Tensor b{layer}"] if bias else [f"Tensor w{layer}"]
    spec = parse_signature(name, f"({', '.join(tensors)}) -> Tensor", recipe=MLP.name, summary=MLP.summary, layout=MLP.layout)
    extra = {"widths": parsed, "activation": chosen["--activation"], "output_activation": chosen["--output-activation"],
             "bias": bias}  # fmt: skip
    return {"recipe": MLP.name, "spec": dataclasses.replace(spec, extra=extra).to_answers()}


def _signature_answers(
    name: str,
    signature: str | None,
    kind: Kind | None,
    formula: str | None,
    integer_outputs: Sequence[str],
    gradients: bool,
) -> dict[str, Any]:
    """The signature recipe's copier answers: the op's spec, parsed from ``signature``."""
    if signature is None:
        option = f"--int-output {' '.join(integer_outputs)}" if integer_outputs else "--no-grad"
        raise InvalidSignature(signature="", reason=f"{option} needs --signature", hint='add --signature "(Tensor x) -> Tensor"')
    if formula is not None or kind is not None:
        raise InvalidSignature(
            signature=signature,
            reason=f"--signature renders its own kind of op and takes no {'--formula' if formula else '--kind'}",
            hint="drop one of them",
        )
    spec = parse_signature(
        name, signature, recipe=SIGNATURE.name, integer_outputs=integer_outputs, gradients=gradients, layout=SIGNATURE.layout
    )
    return {"recipe": SIGNATURE.name, "spec": spec.to_answers()}


def new_op(
    name: str,
    *,
    kind: Kind | None = None,
    workspace: Workspace,
    force: bool = False,
    formula: str | None = None,
    params: Sequence[str] = (),
    signature: str | None = None,
    integer_outputs: Sequence[str] = (),
    gradients: bool = True,
    activation: str | None = None,
    bias: bool = True,
    recipe: str | None = None,
    residual: bool = False,
    widths: str | None = None,
    output_activation: str | None = None,
) -> Path:
    """Render op ``name`` into the workspace (creating the workspace if needed); return its folder.

    With ``formula`` (and its ``params``, each ``NAME=DEFAULT``) the op is the formula's
    elementwise op, with its gradient derived (opgen.formula); with ``signature`` (a PyTorch
    schema's arguments and outputs) an op of that interface, with placeholder kernels
    (opgen.spec; ``integer_outputs`` are int64, ``gradients=False`` renders no backward). Either is
    checked before anything is written. With ``kind="linear"`` (or an ``activation``, or
    ``bias=False``) a linear layer and its activation (one of ACTIVATIONS, or a formula of one
    input). ``recipe`` renders a known recipe under the name ``name`` (`opgen new add_rmsnorm
    --recipe rmsnorm`); ``residual`` its residual form (x + residual, normalized and returned),
    where it has one. With ``kind="mlp"`` (or ``widths``, or ``output_activation``) a fully
    fused MLP of ``widths`` (``"100,128,64,10"``), ``activation`` between its layers.
    """
    validate_op_name(name)
    data: dict[str, Any] = {"scope": "op", "op_name": name}
    mlp = kind == MLP.kind or widths is not None or output_activation is not None
    if mlp and kind not in (None, MLP.kind):
        raise InvalidMlp(option="--kind", value=kind or "", reason="--widths and --output-activation make an MLP",
                         hint="use --kind mlp")  # fmt: skip
    linear = not mlp and (kind == LINEAR.kind or activation is not None or not bias)
    if linear and kind not in (None, LINEAR.kind):
        raise InvalidActivation(
            activation=activation or "", reason=f"--activation and --no-bias make a linear op, not {kind}", hint="use --kind linear"
        )
    if linear and (recipe is not None or residual):
        raise InvalidActivation(
            activation=activation or "none",
            reason="--kind linear, --activation and --no-bias make a linear layer, not a known recipe's --recipe/--residual form",
            hint="drop --recipe/--residual, or the linear options",
        )
    if mlp:
        others = {"--formula": formula is not None, "--signature": signature is not None, "--param": bool(params),
                  "--recipe": recipe is not None, "--residual": residual, "--int-output": bool(integer_outputs),
                  "--no-grad": not gradients}  # fmt: skip
        data |= _mlp_answers(name, widths, activation, output_activation, bias, others=others)
    elif linear:
        data |= _linear_answers(name, activation, bias, formula=formula, signature=signature, params=params)
    elif recipe is not None or residual:
        chosen = known_recipe(recipe) if recipe is not None else recipe_for(name, kind)
        if kind is not None and kind != chosen.kind:
            raise KindMismatch(name=name, kind=kind, recipe_kind=chosen.kind)
        if signature is not None or formula is not None or params or integer_outputs or not gradients:
            raise InvalidSignature(
                signature=signature or "",
                reason="--recipe and --residual render a known recipe, which takes no --signature, --formula, --param, "
                "--int-output or --no-grad",
                hint="drop one of them",
            )
        if residual and chosen.residual_signature is None:
            raise NoResidualForm(
                recipe=chosen.name, with_residual=[r.name for r in KNOWN_RECIPES.values() if r.residual_signature]
            )
        data["recipe"] = chosen.name
        data["spec"] = recipe_spec(name, chosen, data, residual=residual).to_answers()
    elif signature is not None or integer_outputs or not gradients:
        data |= _signature_answers(name, signature, kind, formula, integer_outputs, gradients)
    elif formula is not None:
        data |= {"recipe": FORMULA.name, **_formula_answers(formula, params, kind)}
        data["spec"] = recipe_spec(name, FORMULA, data).to_answers()
    elif params:
        raise InvalidFormula(
            formula=" ".join(params), reason="--param needs --formula", what="param", hint="add --formula EXPR"
        )
    else:
        own = recipe_for(name, kind)
        data["recipe"] = own.name
        data["spec"] = recipe_spec(name, own, data).to_answers()
    target = workspace.op_dir(name)
    if target.exists() and not force:
        raise OpExists(name=name, path=str(target))
    render_workspace(workspace)
    with _staging_dir(workspace.path, f"new-{name}") as staging:
        template, snapshot = current_template(workspace.path, staging)
        rendered = staging / name
        _run_copier(template, rendered, data, what=f"op '{name}'", snapshot=snapshot)
        store_snapshot(template, workspace.path, snapshot)
        if target.exists():
            # --force: swap the old folder out only once the new one is complete.
            retired = staging / f"{name}.replaced"
            target.rename(retired)
        rendered.rename(target)
    return target


_SHARED_INCLUDE = re.compile(r'^\s*#\s*include\s+"(opgen/[^"]+)"', re.MULTILINE)


def missing_shared_headers(op_dir: Path, workspace: Workspace) -> list[str]:
    """The workspace headers (``opgen/...``) the op's sources include that ``include/`` lacks.

    A workspace rendered by an older opgen lacks the headers added since; `opgen update` adds them.
    """
    wanted: set[str] = set()
    for source in sorted((op_dir / "csrc").glob("*")):
        if source.suffix in {".h", ".cuh", ".cpp", ".cu"}:
            wanted.update(_SHARED_INCLUDE.findall(source.read_text()))
    return sorted(header for header in wanted if not (workspace.path / "include" / header).is_file())


def missing_shared_python(op_dir: Path, workspace: Workspace) -> list[str]:
    """What the op's Python imports from the workspace's own modules that they lack (``_registration.call_op``).

    A workspace rendered by an older opgen lacks the functions added since; `opgen update` adds them.
    """
    wanted: set[tuple[str, str]] = set()
    for source in sorted(op_dir.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module:  # from ..<module> import
                wanted.update((node.module, alias.name) for alias in node.names)
    missing = []
    for module, name in sorted(wanted):
        path = workspace.path / f"{module}.py"
        if name not in (_top_level_names(path) if path.is_file() else set()):
            missing.append(f"{module}.{name}")
    return missing


def _top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names

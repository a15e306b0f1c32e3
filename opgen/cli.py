"""The `opgen` command line: each command parses, calls one library function, prints.

Exit codes: 0 success, 1 failure of the work (build, tests), 2 bad usage or bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from opgen import __version__
from opgen.build import BuildReport, build_ops, progress_display
from opgen.doctor import run_doctor
from opgen.errors import BuildFailed, OpgenError, RemovalNotConfirmed, UpdateCannotCarryOver, UpdateConflicts
from opgen.inventory import Removal, list_ops, remove_op
from opgen.jit import jit_load
from opgen.recipes import KNOWN_RECIPES, Kind
from opgen.render import missing_shared_headers, missing_shared_python, new_op
from opgen.runner import run_op_bench, run_op_tests
from opgen.update import update_ops
from opgen.workspace import Workspace


class _Commands(TyperGroup):
    """opgen's commands, with the CLI's one exception boundary.

    An OpgenError from any command is printed as one line on stderr plus its hint, and sets the
    exit code (1 failure, 2 bad usage).
    """

    def invoke(self, ctx: Any) -> Any:  # a click context (typer may carry its own click)
        try:
            return super().invoke(ctx)
        except OpgenError as error:
            _fail(error)


app = typer.Typer(
    cls=_Commands,
    name="opgen",
    help=(
        "Custom PyTorch CUDA ops in minutes: `opgen new softmax`, `opgen build`, `opgen test softmax`.\n\n"
        f"Known ops render working, fast kernels: {', '.join(KNOWN_RECIPES)}. "
        "Any other name renders a skeleton (elementwise or rowwise) that builds and passes its tests as generated."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)
# `opgen update` shows an edit it cannot carry over up to this many diff lines: enough to see what to undo.
_EDIT_LINES_SHOWN = 40

# The formula language's functions as --formula's help names them. opgen.formula.language owns the
# list (tests/test_cli.py holds the two equal); it is written out here because importing it costs
# every command sympy's import time.
FORMULA_FUNCTIONS_HELP = (
    "exp log log1p expm1 sqrt rsqrt sin cos tanh sigmoid softplus erf erfc logsigmoid abs hypot logaddexp min max"
)

WorkspaceOption = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        "-w",
        help="The workspace folder (a Python package of ops). Default: $OPGEN_WORKSPACE, else ./generated_ops.",
        show_default=False,
    ),
]
OpsArgument = Annotated[
    list[str] | None,
    typer.Argument(help="Ops to act on; all ops of the workspace when none are given.", show_default=False),
]

# The compile options `opgen build` and `opgen dev` share.
CpuOnlyOption = Annotated[
    bool, typer.Option("--cpu-only", help="Compile the CPU kernels only, even where CUDA could be compiled.")
]
JobsOption = Annotated[
    int | None,
    typer.Option(
        "--jobs", "-j", min=1, help="Parallel compile jobs (default: from cores and memory).", show_default=False
    ),
]
ArchOption = Annotated[
    str | None,
    typer.Option(
        "--arch",
        help="CUDA architectures to compile for, e.g. 9.0 or '8.0;9.0' (9.0a, 9.0+PTX also). "
        "Default: $TORCH_CUDA_ARCH_LIST, else the visible GPU's (9.0a for a 9.0 GPU), else 9.0a.",
        show_default=False,
    ),
]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="Show the full compiler output.")]


def _fail(error: OpgenError) -> NoReturn:
    err.print(f"[bold red]error:[/] {error}", soft_wrap=True)
    if error.hint:
        err.print(f"[dim]hint:[/] {error.hint}", soft_wrap=True)
    raise typer.Exit(error.exit_code)


def _version(value: bool) -> None:
    if value:
        out.print(f"opgen {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Custom PyTorch CUDA ops in minutes."""


@app.command()
def new(
    op: Annotated[
        str,
        typer.Argument(
            help=f"The op's name: a known recipe ({', '.join(KNOWN_RECIPES)}) renders its kernels; any other "
            "lowercase identifier renders a skeleton, a formula op, a signature op, a linear layer or an MLP."
        ),
    ],
    kind: Annotated[
        Kind | None,
        typer.Option(
            help="Kind of a new name: elementwise (default) or rowwise (a reduction over the last dim) skeletons, "
            "or linear (a linear layer and its --activation, one cuBLASLt GEMM), "
            "or mlp (a multilayer perceptron of --widths, fused into one kernel).",
            show_default=False,
        ),
    ] = None,
    workspace: WorkspaceOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an op that already exists (its files are overwritten).")
    ] = False,
    formula: Annotated[
        str | None,
        typer.Option(
            help=(
                'An elementwise op from a formula, its gradient derived: "x * tanh(log1p(exp(x)))". '
                f"The language: numbers, names, + - * / **, {FORMULA_FUNCTIONS_HELP}, where(cond, a, b) with a "
                "comparison as cond, pi. Names not given with --param are the tensor inputs, in order of "
                'appearance ("x * sigmoid(y)" takes x and y; they broadcast as in PyTorch).'
            ),
            show_default=False,
        ),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(help="Repeatable, with --formula: NAME=DEFAULT makes NAME a float argument.", show_default=False),
    ] = None,
    signature: Annotated[
        str | None,
        typer.Option(
            help=(
                "An op of any interface, from the arguments and outputs of a PyTorch schema: "
                '"(Tensor x, Tensor? weight, int k, float eps=1e-5) -> (Tensor values, Tensor indices)". '
                "Types: Tensor, Tensor?, int, float, bool, int[], int?, float?, bool?; defaults; '*' before "
                "keyword-only arguments; one or several Tensor outputs. Renders placeholder kernels to edit "
                "(each floating output a copy of the first Tensor argument) that build and pass their tests as generated."
            ),
            show_default=False,
        ),
    ] = None,
    int_output: Annotated[
        list[str] | None,
        typer.Option(
            "--int-output",
            help="Repeatable, with --signature: this output is int64 and carries no gradient "
            "(outputs named indices, index, idx, ids or *_indices, *_ids are already).",
            show_default=False,
        ),
    ] = None,
    no_grad: Annotated[
        bool, typer.Option("--no-grad", help="With --signature: render the op without a backward.")
    ] = False,
    activation: Annotated[
        str | None,
        typer.Option(
            help=(
                "With --kind linear: the activation after the linear layer: none (default), relu, gelu, gelu_tanh "
                '(in the GEMM\'s epilogue), or a formula of one input in the language of --formula ("x*sigmoid(1.702*x)"), '
                "which opgen's formula kernels apply to the GEMM's output."
            ),
            show_default=False,
        ),
    ] = None,
    no_bias: Annotated[
        bool, typer.Option("--no-bias", help="With --kind linear or mlp: linear layers without a bias.")
    ] = False,
    widths: Annotated[
        str | None,
        typer.Option(
            help="With --kind mlp: the features of the input, each hidden layer and the output, 3 to 9 widths of "
            "at most 128 each: 100,128,64,10 is three layers (nn.Linear(100, 128), ..., nn.Linear(64, 10)); "
            "--activation (relu by default; none, gelu, gelu_tanh, silu) follows each hidden layer.",
            show_default=False,
        ),
    ] = None,
    output_activation: Annotated[
        str | None,
        typer.Option(
            help="With --kind mlp: the activation after the last layer: none (default), relu, gelu, gelu_tanh, silu.",
            show_default=False,
        ),
    ] = None,
    recipe: Annotated[
        str | None,
        typer.Option(
            help="Render this known recipe under the op's name, so a workspace holds several forms of it: "
            "`opgen new add_rmsnorm --recipe rmsnorm --residual`.",
            show_default=False,
        ),
    ] = None,
    residual: Annotated[
        bool,
        typer.Option(
            "--residual",
            help="layernorm and rmsnorm: the pre-norm block's fused add, (x, residual, weight...) -> (y, x + residual).",
        ),
    ] = False,
) -> None:
    """Render everything one op needs: CUDA and CPU kernels, binding, Python module, tests, benchmark."""
    located = Workspace.locate(workspace)
    folder = new_op(
        op,
        kind=kind,
        workspace=located,
        force=force,
        formula=formula,
        params=param or (),
        signature=signature,
        integer_outputs=int_output or (),
        gradients=not no_grad,
        activation=activation,
        bias=not no_bias,
        recipe=recipe,
        residual=residual,
        widths=widths,
        output_activation=output_activation,
    )
    out.print(f"[green]created[/] {folder}")
    missing = missing_shared_headers(folder, located) + missing_shared_python(folder, located)
    if missing:
        err.print(
            f"[bold yellow]note:[/] {op} uses {', '.join(missing)}, which this workspace lacks: an older opgen"
            " rendered its shared files",
            soft_wrap=True,
        )
        err.print("[dim]hint:[/] run `opgen update` to bring them up to date, then build", soft_wrap=True)
    out.print(f"next: opgen build {op} && opgen test {op}")


@app.command()
def build(
    ops: OpsArgument = None,
    workspace: WorkspaceOption = None,
    cpu_only: CpuOnlyOption = False,
    jobs: JobsOption = None,
    arch: ArchOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Compile ops in place with ninja: CPU kernels always, CUDA kernels where a toolkit is found.

    Only what changed is rebuilt: ops whose sources, headers and settings are unchanged are
    skipped (without even starting the compiler toolchain), and in an op ninja recompiles only
    the files that changed. An op that fails to compile does not stop the others; the summary
    lists each op as built, up-to-date or failed (with its first compiler error) and the
    architectures built, and the exit code is 1 if any failed. Progress shows live on a
    terminal and as plain lines in logs.
    """
    echo = (lambda line: out.print(line, markup=False, highlight=False, soft_wrap=True)) if verbose else None
    try:
        with progress_display(out) as progress:
            report = build_ops(
                Workspace.locate(workspace),
                ops or (),
                cpu_only=cpu_only,
                jobs=jobs,
                arch=arch,
                echo=echo,
                progress=progress,
            )
    except BuildFailed as error:
        if error.report is not None:
            _print_build_summary(error.report)
        raise
    _print_build_summary(report)


def _print_build_summary(report: BuildReport) -> None:
    out.print(f"mode: {report.mode}", soft_wrap=True)
    table = Table(show_header=True, header_style="bold", box=None)
    for column in ("op", "status", "seconds", "compiled"):
        table.add_column(column)
    colors = {"built": "green", "up-to-date": "cyan", "failed": "red"}
    for outcome in report.outcomes:
        status = f"[{colors.get(outcome.status, 'white')}]{outcome.status}[/]"
        compiled = ""
        if outcome.status == "built":
            files = outcome.compiled
            compiled = (", ".join(files) if len(files) <= 3 else f"{len(files)} files") or "nothing (relinked)"
        elif outcome.status == "failed":
            compiled = ", ".join(outcome.compiled)
        table.add_row(outcome.op, status, f"{outcome.seconds:.1f}", compiled)
    out.print(table)
    for outcome in report.failed:  # whole, never cut to the table's width: it is what to fix
        out.print(Text.assemble((f"{outcome.op}: ", "bold red"), outcome.first_error), soft_wrap=True)
    notes = [f"CUDA architectures {report.architectures}" if report.architectures else "no CUDA kernels"]
    notes.append(f"{report.jobs} parallel jobs" if report.ran_setup else "nothing to compile")
    out.print(
        f"{len(report.outcomes) - len(report.failed)} of {len(report.outcomes)} ops ready in {report.seconds:.1f} s"
        f" ({', '.join(notes)})"
    )


@app.command()
def dev(
    op: Annotated[str, typer.Argument(help="The op to build and load.", show_default=False)],
    workspace: WorkspaceOption = None,
    cpu_only: CpuOnlyOption = False,
    jobs: JobsOption = None,
    arch: ArchOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Build one op just in time and load it, for a quick edit-and-try loop (also from a notebook).

    Compiled by torch.utils.cpp_extension.load with setup.py's sources and flags, into build/jit/<op>/.

    Only a changed source or header is recompiled; unchanged, the cached build loads at once.

    From Python or a notebook: from opgen import load_op; load_op("softmax").softmax(x)
    """
    ws = Workspace.locate(workspace)
    result = jit_load(
        op,
        ws,
        cpu_only=cpu_only,
        jobs=jobs,
        arch=arch,
        verbose=verbose,
        announce=lambda line: out.print(line, markup=False, soft_wrap=True),
    )
    if result.status == "built":
        out.print(f"[green]built[/] {result.op} in {result.seconds:.1f} s")
    else:
        out.print(f"[cyan]reused[/] the cached build of {result.op} ({result.seconds:.1f} s, nothing changed)")
    out.print(f"mode: {result.mode}")
    out.print(f"library: {result.library}", soft_wrap=True)
    where = f", workspace={str(ws.path)!r}" if workspace else ""
    out.print(
        f'use it: from opgen import load_op; {result.op} = load_op("{result.op}"{where}).{result.op}'
        f"  (or torch.ops.generated_ops.{result.op})",
        markup=False,
        soft_wrap=True,
    )


@app.command()
def test(
    ops: OpsArgument = None,
    workspace: WorkspaceOption = None,
    select: Annotated[
        str | None,
        typer.Option("-k", help="Run only the tests whose names match this pytest -k expression.", show_default=False),
    ] = None,
    sanitize: Annotated[
        bool,
        typer.Option(
            "--sanitize",
            help="Instead of the usual tests, run each op's CUDA forward and backward over every kernel path under "
            "compute-sanitizer memcheck, racecheck and initcheck; any report fails. Needs a GPU; takes minutes.",
        ),
    ] = False,
) -> None:
    """Run the ops' generated tests with pytest (CUDA tests are skipped, with the reason, without a GPU)."""
    pytest_args = ["-k", select] if select else []
    if sanitize:
        pytest_args += ["-m", "sanitize"]  # overrides the workspace's default `-m "not sanitize"`
    run_op_tests(Workspace.locate(workspace), ops or (), pytest_args=pytest_args)


def _bench_options_help() -> str:
    from opgen.bench_options import parser

    lines = ["Options of the benchmark, passed on to it (`opgen.bench_options`):"]
    for action in parser()._actions:
        if action.option_strings and action.dest != "help":
            lines.append(f"{', '.join(action.option_strings)}: {(action.help or '').replace('%%', '%')}")
    return "\n\n".join(lines)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True}, epilog=_bench_options_help())
def bench(
    ctx: typer.Context,
    op: Annotated[str, typer.Argument(help="The op to time.")],
    workspace: WorkspaceOption = None,
) -> None:
    """Time an op against PyTorch eager, torch.compile and a device copy (the bandwidth ceiling)."""
    from opgen.bench_options import forwarded

    run_op_bench(Workspace.locate(workspace), op, forwarded(op, ctx.args))


@app.command(name="list")
def list_(
    workspace: WorkspaceOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    """List the workspace's ops: kind, dtypes, template version, what is built, which sources changed since."""
    ws = Workspace.locate(workspace)
    ops = list_ops(ws)
    if as_json:
        typer.echo(json.dumps({"workspace": str(ws.path), "ops": [op.as_json() for op in ops]}, indent=2))
        return
    if not ops:
        out.print("no ops yet: create one with `opgen new <op>`")
        return
    table = Table(header_style="bold", box=None)
    for column in ("op", "kind", "dtypes", "template", "built", "sources"):
        table.add_column(column, overflow="fold")
    short_dtypes = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}
    for op in ops:
        built = {"no": "[dim]no[/]", "CPU": "CPU"}.get(op.built, f"CPU+CUDA {','.join(op.cuda_architectures or ())}")
        if op.built == "no":
            sources = ""
        elif op.stale:
            sources = f"[yellow]changed ({len(op.changed_since_build)})[/]"
        else:
            sources = "unchanged"
        dtypes = " ".join(short_dtypes.get(dtype, dtype) for dtype in op.dtypes)
        table.add_row(op.name, op.kind, dtypes, op.template_version, built, sources)
    out.print(table)


def _stdin_is_terminal() -> bool:
    return sys.stdin.isatty()


@app.command()
def remove(
    op: Annotated[str, typer.Argument(help="The op to delete.", show_default=False)],
    workspace: WorkspaceOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
) -> None:
    """Delete an op: its folder (sources, tests, compiled library) and its objects under build/."""

    def confirm(removal: Removal) -> bool:
        if yes:
            return True
        if not _stdin_is_terminal():
            raise RemovalNotConfirmed(op=removal.op)
        out.print("this deletes:", *(f"  {path}" for path in removal.paths), sep="\n")
        return typer.confirm(f"delete op '{removal.op}'?", default=False)

    removal = remove_op(Workspace.locate(workspace), op, confirm=confirm)
    if not removal.done:
        out.print(f"kept '{removal.op}': nothing deleted")
        return
    out.print(f"[green]removed[/] {removal.op} ({len(removal.paths)} folder(s))")


@app.command()
def update(
    ops: OpsArgument = None,
    workspace: WorkspaceOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change; write nothing.")] = False,
) -> None:
    """Re-render ops and the workspace's shared files from the current template, keeping your edits.

    A three-way merge through copier's update, from the template snapshot each folder was rendered
    from (kept in the workspace's .opgen/) to the current template: your edits stay, the
    template's changes arrive, and where both changed the same lines the file gets conflict
    markers, is listed, and the exit code is 1. An edit the template has no place for (in a file
    it no longer renders, or colliding with a file it rewrote) stops the update with nothing
    written: each such file is listed with the edit, to undo, update and redo; exit code 1. The
    shared files (setup.py, include/opgen/, ...) are always updated too, since new op code may
    need them. Needs git; the workspace needs no repository.
    """
    try:
        report = update_ops(Workspace.locate(workspace), ops or (), dry_run=dry_run)
    except UpdateCannotCarryOver as error:
        _print_stranded_edits(error)
        raise
    marks = {"modified": "M", "added": "A", "deleted": "D"}
    verb = "would change" if report.dry_run else "changed"
    for folder in report.folders:
        label = f"shared files ({folder.name})" if folder.shared else folder.name
        baseline = (
            " [dim](no template snapshot recorded: the current template is its base)[/]" if folder.baseline else ""
        )
        status = f"{len(folder.changes)} file(s) {verb}" if folder.changes else "up to date"
        out.print(f"[bold]{label}[/]: {status}{baseline}")
        for change in folder.changes:
            conflict = "  [bold red]conflict[/]" if change.conflict else ""
            counts = f"+{change.added_lines} -{change.removed_lines}"
            out.print(f"  {marks[change.status]} {escape(change.path)}  {counts}{conflict}")
    if report.dry_run:
        would_conflict = f" ({len(report.conflicts)} file(s) would hold conflicts)" if report.conflicts else ""
        out.print(f"dry run: nothing written{would_conflict}")
    elif report.conflicts:
        _fail(UpdateConflicts(files=report.conflicts))
    elif report.changes:
        out.print(f"next: opgen build {' '.join(ops or [])}".rstrip())


def _print_stranded_edits(error: UpdateCannotCarryOver) -> None:
    """Each file whose edit cannot carry over, why, and the edit (so that it can be undone and redone)."""
    for path, why in error.files.items():
        out.print(f"[bold yellow]cannot carry over[/] {escape(path)}: {why}; your edit:", soft_wrap=True)
        lines = error.edits.get(path, "").splitlines()
        for line in lines[:_EDIT_LINES_SHOWN]:
            out.print(Text(f"    {line}", style="dim"), soft_wrap=True)
        if len(lines) > _EDIT_LINES_SHOWN:
            out.print(f"    [dim]... {len(lines) - _EDIT_LINES_SHOWN} more line(s)[/]")


@app.command()
def doctor(
    workspace: WorkspaceOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Check what builds need (Python, torch, CUDA toolkit, ninja, compiler, GPUs, workspace); exit 1 if a build would fail."""
    report = run_doctor(Workspace.locate(workspace))
    if as_json:
        typer.echo(json.dumps(report.as_json(), indent=2))
    else:
        marks = {"ok": "[green]  ok[/]", "warn": "[yellow]warn[/]", "fail": "[bold red]fail[/]"}
        for check in report.checks:
            out.print(f"{marks[check.status]}  [bold]{check.name}[/]: {check.detail}", soft_wrap=True)
            if check.hint:
                out.print(f"      [dim]fix:[/] {check.hint}", soft_wrap=True)
        out.print(f"builds here: {report.builds}", soft_wrap=True)
    if not report.ok:
        raise typer.Exit(1)


def run() -> None:
    """Console-script entry point."""
    sys.exit(app())

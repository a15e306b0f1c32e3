"""The `opgen` command line: each command parses, calls one library function, prints.

Exit codes: 0 success, 1 failure of the work (build, tests), 2 bad usage or bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from opgen import __version__
from opgen.build import build_ops
from opgen.errors import OpgenError
from opgen.recipes import KNOWN_RECIPES, Kind
from opgen.render import new_op
from opgen.runner import run_op_bench, run_op_tests
from opgen.workspace import Workspace

app = typer.Typer(
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
            help="The op's name: softmax, relu and gelu are known; any other lowercase identifier renders a skeleton."
        ),
    ],
    kind: Annotated[
        Kind | None,
        typer.Option(
            help="Skeleton kind for a new name: elementwise (default) or rowwise (a reduction over the last dim).",
            show_default=False,
        ),
    ] = None,
    workspace: WorkspaceOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an op that already exists (its files are overwritten).")
    ] = False,
) -> None:
    """Render everything one op needs: CUDA and CPU kernels, binding, Python module, tests, benchmark."""
    try:
        folder = new_op(op, kind=kind, workspace=Workspace.locate(workspace), force=force)
    except OpgenError as error:
        _fail(error)
    out.print(f"[green]created[/] {folder}")
    out.print(f"next: opgen build {op} && opgen test {op}")


@app.command()
def build(
    ops: OpsArgument = None,
    workspace: WorkspaceOption = None,
    cpu_only: Annotated[
        bool, typer.Option("--cpu-only", help="Compile the CPU kernels only, even where CUDA could be compiled.")
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs", "-j", min=1, help="Parallel compile jobs (default: from cores and memory).", show_default=False
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show the full compiler output.")] = False,
) -> None:
    """Compile ops in place with ninja: CPU kernels always, CUDA kernels where a toolkit is found."""
    try:
        report = build_ops(
            Workspace.locate(workspace), ops or (), cpu_only=cpu_only, jobs=jobs, echo=out.print if verbose else None
        )
    except OpgenError as error:
        _fail(error)
    out.print(f"mode: {report.mode}")
    out.print(f"[green]built[/] {', '.join(report.ops)} in {report.seconds:.1f} s")


@app.command()
def test(
    ops: OpsArgument = None,
    workspace: WorkspaceOption = None,
    select: Annotated[
        str | None,
        typer.Option("-k", help="Run only the tests whose names match this pytest -k expression.", show_default=False),
    ] = None,
) -> None:
    """Run the ops' generated tests with pytest (CUDA tests are skipped, with the reason, without a GPU)."""
    try:
        run_op_tests(Workspace.locate(workspace), ops or (), pytest_args=["-k", select] if select else [])
    except OpgenError as error:
        _fail(error)


@app.command()
def bench(
    op: Annotated[str, typer.Argument(help="The op to time.")],
    workspace: WorkspaceOption = None,
    device: Annotated[
        str | None, typer.Option(help="cuda or cpu (default: cuda when a GPU is found).", show_default=False)
    ] = None,
    dtype: Annotated[
        list[str] | None,
        typer.Option(
            help="Repeatable: float32, bfloat16, float16, float64 (default: float32 and bfloat16).", show_default=False
        ),
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write measurements and environment as JSON here.", show_default=False)
    ] = None,
    plot_path: Annotated[
        Path | None, typer.Option("--plot", help="Write a PNG of GB/s against size here.", show_default=False)
    ] = None,
    markdown_path: Annotated[
        Path | None, typer.Option("--markdown", help="Write a markdown table of the results here.", show_default=False)
    ] = None,
    no_compile: Annotated[
        bool, typer.Option("--no-compile", help="Leave torch.compile out of the contenders.")
    ] = False,
) -> None:
    """Time an op against PyTorch eager, torch.compile and a device copy (the bandwidth ceiling)."""
    bench_args: list[str] = []
    if device:
        bench_args += ["--device", device]
    for name in dtype or []:
        bench_args += ["--dtype", name]
    if json_path:
        bench_args += ["--json", str(json_path.resolve())]
    if plot_path:
        bench_args += ["--plot", str(plot_path.resolve())]
    if markdown_path:
        bench_args += ["--markdown", str(markdown_path.resolve())]
    if no_compile:
        bench_args.append("--no-compile")
    try:
        run_op_bench(Workspace.locate(workspace), op, bench_args)
    except OpgenError as error:
        _fail(error)


def run() -> None:
    """Console-script entry point."""
    sys.exit(app())

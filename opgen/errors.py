"""Errors opgen raises. The library raises; only the CLI catches, prints and exits.

Each error is built from keyword arguments so that its message is made in one place, and says
what to do next in ``hint``. ``exit_code`` follows the CLI's convention: 2 for bad usage or bad
input (nothing was done), 1 for a failure of the work itself (a build, a test run).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class OpgenError(Exception):
    """Root of every error opgen reports to its user."""

    exit_code = 1
    hint = ""


class UsageError(OpgenError):
    """The user asked for something opgen will not do; nothing was changed."""

    exit_code = 2


class InvalidOpName(ValueError, UsageError):
    """An op name that cannot name a folder, a Python function and a C++ symbol."""

    def __init__(self, *, name: str, reason: str) -> None:
        self.name = name
        self.hint = "use a lowercase identifier such as 'fused_gelu' that is no keyword or workspace file"
        super().__init__(f"invalid op name {name!r}: {reason}")


class OpExists(UsageError):
    """`opgen new` of an op that is already in the workspace."""

    def __init__(self, *, name: str, path: str) -> None:
        self.hint = "pass --force to replace it (its files are overwritten), or choose another name"
        super().__init__(f"op '{name}' already exists at {path}")


class UnknownOp(UsageError):
    """An op named on the command line that the workspace does not have."""

    def __init__(self, *, name: str, known: Iterable[str]) -> None:
        known = sorted(known)
        self.hint = (
            f"known ops: {', '.join(known)}"
            if known
            else "the workspace has no ops yet; create one with `opgen new <op>`"
        )
        super().__init__(f"no op named '{name}' in the workspace")


class UnknownRecipe(ValueError, UsageError):
    """`opgen new --recipe NAME` of a recipe opgen does not have."""

    def __init__(self, *, name: str, known: Iterable[str]) -> None:
        self.hint = f"known recipes: {', '.join(sorted(known))}"
        super().__init__(f"no recipe named {name!r}")


class NoResidualForm(ValueError, UsageError):
    """`opgen new --residual` of a recipe without a residual form."""

    def __init__(self, *, recipe: str, with_residual: Iterable[str]) -> None:
        self.hint = f"--residual works with {', '.join(sorted(with_residual))}"
        super().__init__(f"recipe {recipe!r} has no --residual form")


class KindMismatch(UsageError):
    """`--kind` that contradicts a known recipe's own kind."""

    def __init__(self, *, name: str, kind: str, recipe_kind: str) -> None:
        self.hint = f"drop --kind (the {name} recipe is {recipe_kind}), or choose another name for a {kind} skeleton"
        super().__init__(f"'{name}' is a known {recipe_kind} op, not {kind}")


class WorkspaceError(UsageError):
    """The workspace folder cannot be used (not a folder, not an opgen workspace)."""

    def __init__(self, *, path: str, reason: str, hint: str) -> None:
        self.hint = hint
        super().__init__(f"workspace {path}: {reason}")


class RenderError(OpgenError):
    """The template could not be rendered; nothing was written."""

    def __init__(self, *, what: str, reason: str) -> None:
        self.hint = "this is a bug in the opgen template; please report it with the command you ran"
        super().__init__(f"could not render {what}: {reason}")


class CudaToolkitNotFound(OpgenError):
    """torch is a CUDA build and CUDA was asked for, but no usable toolkit was found."""

    def __init__(self, *, reason: str) -> None:
        self.hint = (
            "set CUDA_HOME to the toolkit folder (the one holding bin/nvcc and lib64/libcudart.so), "
            "or pass --cpu-only to build the CPU kernels alone"
        )
        super().__init__(f"no usable CUDA toolkit: {reason}")


class InvalidArch(ValueError, UsageError):
    """A CUDA architecture list (`--arch`, TORCH_CUDA_ARCH_LIST) that nvcc cannot target."""

    def __init__(self, *, value: str, source: str, reason: str) -> None:
        self.hint = (
            "give compute capabilities such as 9.0, 8.0;9.0 or 9.0a+PTX; "
            "`nvidia-smi --query-gpu=compute_cap --format=csv` prints your GPU's"
        )
        super().__init__(f"invalid CUDA architectures {value!r} from {source}: {reason}")


class BuildFailed(OpgenError):
    """The workspace's setup.py failed."""

    def __init__(self, *, ops: Iterable[str], first_error: str, report: Any = None) -> None:
        self.first_error = first_error
        self.report = report  # the BuildReport, with the ops that did build
        self.hint = "`opgen build -v` shows the full compiler output"
        super().__init__(f"build failed for {', '.join(ops) or 'the workspace'}: {first_error}")


class OpAlreadyLoaded(UsageError):
    """`opgen.load_op` of an op this process already holds another build of."""

    def __init__(self, *, op: str, reason: str) -> None:
        self.hint = (
            "the dispatcher cannot replace an op a process has loaded: restart Python (in a notebook, restart "
            f"the kernel) and call load_op('{op}') before anything imports the workspace package"
        )
        super().__init__(f"cannot load a new build of '{op}' in this process: {reason}")


class OpNotBuilt(OpgenError):
    """Tests or benchmarks asked of an op that has no compiled library yet."""

    def __init__(self, *, ops: Iterable[str]) -> None:
        ops = list(ops)
        self.hint = f"build first: opgen build {' '.join(ops)}"
        super().__init__(f"not built yet: {', '.join(ops)}")


class TestsFailed(OpgenError):
    """Generated tests ran and some failed."""

    __test__ = False  # not a pytest test class

    def __init__(self, *, ops: Iterable[str], exit_code: int) -> None:
        self.pytest_exit_code = exit_code
        self.hint = "the failures are listed above; rerun one op with `opgen test <op>`"
        super().__init__(f"tests failed for {', '.join(ops)} (pytest exit code {exit_code})")


class BenchFailed(OpgenError):
    """A generated benchmark exited with an error."""

    def __init__(self, *, op: str, exit_code: int) -> None:
        self.hint = f"its output is above; run `python -m <workspace>.{op}.bench_{op} --help` for its options"
        super().__init__(f"benchmark of '{op}' failed (exit code {exit_code})")


class RemovalNotConfirmed(UsageError):
    """`opgen remove` without --yes where nobody can be asked (stdin is not a terminal)."""

    def __init__(self, *, op: str) -> None:
        self.hint = f"pass --yes to delete it without asking: opgen remove {op} --yes"
        super().__init__(f"not removing '{op}': deleting an op needs confirmation, and stdin is not a terminal")


class InvalidFormula(ValueError, UsageError):
    """`opgen new --formula` (or `--param`) that opgen will not turn into an op."""

    def __init__(self, *, formula: str, reason: str, hint: str = "", what: str = "formula") -> None:
        self.formula = formula
        self.hint = hint or "see `opgen new --help` for the formula language"
        super().__init__(f"invalid {what} {formula!r}: {reason}")


class InvalidActivation(ValueError, UsageError):
    """`opgen new --kind linear --activation` (or `--no-bias`) that opgen will not turn into an op."""

    def __init__(self, *, activation: str, reason: str, hint: str = "") -> None:
        self.activation = activation
        self.hint = hint or 'use --activation none, relu, gelu, gelu_tanh or a formula of one input ("x*sigmoid(1.702*x)")'
        super().__init__(f"invalid --activation {activation!r}: {reason}")


class InvalidMlp(ValueError, UsageError):
    """`opgen new --kind mlp` (or `--widths`, `--output-activation`) that opgen will not turn into an op."""

    def __init__(self, *, option: str, value: str, reason: str, hint: str = "") -> None:
        self.option = option
        self.hint = hint or (
            "e.g. `opgen new mlp3 --kind mlp --widths 100,128,64,10 --activation relu`: 3 to 9 widths of at most 128, "
            "activations none, relu, gelu, gelu_tanh or silu"
        )
        super().__init__(f"invalid {option} {value!r}: {reason}")


class InvalidSignature(ValueError, UsageError):
    """`opgen new --signature` that opgen will not turn into an op."""

    def __init__(self, *, signature: str, reason: str, hint: str = "") -> None:
        self.signature = signature
        self.hint = hint or (
            'write the part of a PyTorch schema after the name, e.g. "(Tensor x, int dim=-1) -> (Tensor values, '
            'Tensor indices)"; `opgen new --help` lists the supported types'
        )
        # An option that needs --signature, given without one, has no signature to quote.
        super().__init__(f"invalid signature {signature!r}: {reason}" if signature else reason)


class TemplateNotFound(UsageError):
    """$OPGEN_TEMPLATE names a folder without a copier template."""

    def __init__(self, *, path: str, variable: str) -> None:
        self.hint = f"point ${variable} at a copy of opgen's template (a folder with copier.yml), or unset it"
        super().__init__(f"${variable}={path} holds no opgen template (no copier.yml)")


class NoTemplateHistory(UsageError):
    """`opgen update` of a folder whose old template opgen cannot find, so it has no merge base."""

    def __init__(self, *, what: str, reason: str, hint: str) -> None:
        self.hint = hint
        super().__init__(f"cannot update {what}: {reason}")


class UpdateFailed(OpgenError):
    """copier's update (or git under it) failed; nothing in the workspace was changed."""

    def __init__(self, *, what: str, reason: str, hint: str = "") -> None:
        self.hint = (
            hint or "nothing was changed; this is likely a bug in opgen: please report it with the command you ran"
        )
        super().__init__(f"could not update {what}: {reason}")


class UpdateConflicts(OpgenError):
    """`opgen update` merged, but some of the user's edits collide with the template's changes."""

    def __init__(self, *, files: Iterable[str]) -> None:
        self.files = list(files)
        self.hint = (
            "each conflict is a block from '<<<<<<< before updating' (yours) over '=======' to "
            "'>>>>>>> after updating' (the template's): keep what you want, delete the markers, then `opgen build`"
        )
        super().__init__(
            f"{len(self.files)} file(s) hold conflicts between your edits and the template's: {', '.join(self.files)}"
        )


class UpdateCannotCarryOver(OpgenError):
    """`opgen update` found edits the current template has no place for, so it changed nothing.

    ``files`` says for each file (relative to the workspace) why; ``edits`` holds the user's edit
    of it, a unified diff from what opgen rendered, so that it can be undone and redone.
    """

    def __init__(self, *, files: Mapping[str, str], edits: Mapping[str, str]) -> None:
        self.files = dict(files)
        self.edits = dict(edits)
        self.hint = (
            "for each file: undo your edit (the diff above; or delete the file if the template no longer renders "
            "it), run `opgen update` again, then redo the edit where the updated op keeps that code; "
            "to update the other ops meanwhile, name them (`opgen update OP ...`)"
        )
        super().__init__(
            f"{len(self.files)} edit(s) cannot carry over to the current template, so nothing was changed: "
            + ", ".join(self.files)
        )

"""The workspace: the folder (a Python package) that holds every generated op."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from opgen.errors import UnknownOp, WorkspaceError

DEFAULT_WORKSPACE = "generated_ops"
WORKSPACE_ENV = "OPGEN_WORKSPACE"
ANSWERS_FILE = ".copier-answers.yml"


def read_answers(folder: Path) -> dict[str, Any]:
    """The copier answers ``folder`` was rendered with; empty when missing or unreadable."""
    try:
        answers = yaml.safe_load((folder / ANSWERS_FILE).read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return answers if isinstance(answers, dict) else {}


@dataclass(frozen=True)
class Workspace:
    """A workspace folder; its name is the Python package the ops import from."""

    path: Path

    @classmethod
    def locate(cls, path: Path | str | None = None) -> Workspace:
        """``path``, else $OPGEN_WORKSPACE, else ./generated_ops."""
        chosen = path or os.environ.get(WORKSPACE_ENV) or DEFAULT_WORKSPACE
        resolved = Path(chosen).expanduser().resolve()
        if not resolved.name.isidentifier():
            raise WorkspaceError(
                path=str(resolved),
                reason="its name is not a Python identifier, so it cannot be imported as a package",
                hint="name the workspace folder like a Python package, e.g. generated_ops or my_ops",
            )
        if resolved.exists() and not resolved.is_dir():
            raise WorkspaceError(
                path=str(resolved), reason="it is a file, not a folder", hint="choose another --workspace"
            )
        return cls(resolved)

    @property
    def package(self) -> str:
        return self.path.name

    @property
    def exists(self) -> bool:
        """Whether the workspace's own files have been rendered here."""
        return (self.path / "setup.py").is_file() and (self.path / ANSWERS_FILE).is_file()

    def require_exists(self) -> None:
        if not self.exists:
            raise WorkspaceError(
                path=str(self.path),
                reason="no opgen workspace here (no setup.py)",
                hint="create one with `opgen new <op>`, or point --workspace / $OPGEN_WORKSPACE at yours",
            )

    def op_dir(self, name: str) -> Path:
        return self.path / name

    def ops(self) -> list[str]:
        """The op folders, sorted, by the rule setup.py builds with (opgen/rules.py)."""
        from opgen.rules import rules_for

        return rules_for(self.path).op_names(self.path)

    def require_ops(self, names: Iterable[str]) -> list[str]:
        """``names`` if every one is an op here (all ops when none are named), else UnknownOp."""
        self.require_exists()
        known = self.ops()
        names = list(names)
        for name in names:
            if name not in known:
                raise UnknownOp(name=name, known=known)
        return names or known

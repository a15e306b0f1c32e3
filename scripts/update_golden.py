"""Re-render tests/golden/ from the current template (after a deliberate change; read the diff)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from golden_cases import GOLDEN, render_cases, rendered_files

from opgen.workspace import Workspace


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folders = render_cases(Workspace.locate(Path(scratch) / "generated_ops"))
        shutil.rmtree(GOLDEN, ignore_errors=True)
        for name, folder in folders.items():
            for relative, text in rendered_files(folder).items():
                target = GOLDEN / name / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
    print(f"rendered {len(folders)} ops into {GOLDEN}")


if __name__ == "__main__":
    main()

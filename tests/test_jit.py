"""`opgen dev` / `load_op`: JIT builds into build/jit/, reused while nothing changed, one build per process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opgen import jit
from opgen.cli import app
from opgen.errors import UnknownOp
from opgen.toolchain import CudaToolkit
from opgen.workspace import Workspace

runner = CliRunner()


def test_load_op_raises_unknown_op(relu_workspace: Workspace) -> None:
    with pytest.raises(UnknownOp):
        jit.load_op("gelu", relu_workspace, cpu_only=True)


def test_plan_takes_sources_and_flags_from_the_build_config(relu_workspace: Workspace) -> None:
    config = relu_workspace.path / "_build_config.py"
    text = config.read_text()
    assert 'CXX_FLAGS = ["-O3", "-g0", "-fopenmp"]' in text
    config.write_text(text.replace('CXX_FLAGS = ["-O3", "-g0", "-fopenmp"]', 'CXX_FLAGS = ["-O2", "-fopenmp", "-DMINE"]'))
    plan = jit._plan(relu_workspace, "relu", cpu_only=True, jobs=1)
    assert plan.cxx_flags == ["-O2", "-fopenmp", "-DMINE"]
    assert [Path(source).name for source in plan.sources] == ["relu.cpp", "relu_cpu.cpp"]  # no .cu without CUDA
    assert plan.include_dirs == [str(relu_workspace.path / "include")]
    assert plan.folder.parent == relu_workspace.path / "build" / "jit" / "relu"
    assert plan.folder.name.endswith("-cpu") and plan.mode.startswith("CPU kernels only")


@pytest.mark.usefixtures("torch_built_with_cuda")
def test_plan_for_cuda_names_the_toolkit_and_architectures(
    relu_workspace: Workspace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "cuda-test"
    (home / "lib64").mkdir(parents=True)
    (home / "lib64" / "libcudart.so").write_bytes(b"")  # what the workspace's settings check for
    monkeypatch.setattr("opgen.build.find_cuda_toolkit", lambda env: CudaToolkit(home, "13.0"))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0,9.0")
    plan = jit._plan(relu_workspace, "relu", cpu_only=False, jobs=1)
    assert plan.folder.name.endswith("-cuda13.0-sm80-sm90")
    assert Path(plan.sources[-1]).name == "relu_cuda.cu"
    assert plan.env["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0"
    configuration = plan.configuration()
    assert configuration["nvcc_flags"] == plan.nvcc_flags != []
    assert (configuration["toolkit"], configuration["arch"]) == (str(home), "8.0;9.0")
    assert "architectures 8.0;9.0" in plan.mode and str(home) in plan.mode
    # A compiler variable nvcc reads is part of the configuration: a changed one rebuilds.
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-lineinfo")
    assert jit._plan(relu_workspace, "relu", cpu_only=False, jobs=1).configuration() != configuration


def test_cached_library_needs_the_same_configuration_and_nothing_for_ninja_to_do(
    relu_workspace: Workspace, tmp_path: Path
) -> None:
    plan = jit._plan(relu_workspace, "relu", cpu_only=True, jobs=1)
    plan.folder.mkdir(parents=True)
    source = tmp_path / "source.txt"
    source.write_text("v1")
    library = plan.folder / "lib.so"
    # A build file whose one output is made from one input: what ninja's dry run reads.
    (plan.folder / "build.ninja").write_text(f"rule copy\n  command = cp $in $out\nbuild lib.so: copy {source}\n")
    subprocess.run(["ninja", "-C", str(plan.folder)], check=True, capture_output=True)
    configuration = plan.configuration()
    assert jit._cached_library(plan, configuration) is None  # no stamp yet
    (plan.folder / jit.STAMP_FILE).write_text(json.dumps({"library": "lib.so", "configuration": configuration}))
    assert jit._cached_library(plan, configuration) == library
    assert jit._cached_library(plan, {**configuration, "cxx_flags": ["-O0"]}) is None
    later = source.stat().st_mtime_ns + 10**9
    os.utime(source, ns=(later, later))
    assert jit._cached_library(plan, configuration) is None  # ninja has work: the input changed


SCRIPT = textwrap.dedent(
    """
    import sys, torch
    from opgen import load_op
    from opgen.errors import OpAlreadyLoaded
    workspace, steps = sys.argv[1], sys.argv[2].split(",")
    for step in steps:
        if step == "import":
            import generated_ops
            print("imported", generated_ops.built_ops)
        elif step == "touch":
            from pathlib import Path
            path = Path(workspace, "relu", "csrc", "relu.cpp")
            path.write_text(path.read_text() + "\\n")
        else:
            try:
                from opgen.jit import jit_load
                result = jit_load("relu", workspace, cpu_only=True, jobs=2)
            except OpAlreadyLoaded as error:
                print("refused:", error)
                continue
            x = torch.randn(64, dtype=torch.float64, requires_grad=True)
            assert torch.equal(result.module.relu(x), torch.relu(x))
            result.module.relu(x).sum().backward()
            assert torch.equal(x.grad, (x > 0).double())
            import generated_ops
            assert generated_ops.relu is result.module.relu and "relu" in generated_ops.built_ops
            assert torch.equal(torch.ops.generated_ops.relu(x), torch.relu(x))
            print(result.status, result.library)
    """
)


def in_fresh_process(workspace: Workspace, *steps: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(workspace.path), ",".join(steps)],
        cwd=workspace.path.parent,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_jit_build_is_reused_rebuilt_on_change_and_never_loaded_twice(relu_workspace: Workspace) -> None:
    ws = relu_workspace
    first = in_fresh_process(ws, "load", "load")
    assert first.splitlines()[0].startswith("built ") and first.splitlines()[1].startswith("already-loaded ")
    library = Path(first.split()[1])
    assert library.is_relative_to(ws.path / "build" / "jit" / "relu")

    # A fresh process with nothing changed loads the cached library: `opgen dev` says so.
    result = subprocess.run(
        [sys.executable, "-m", "opgen", "dev", "relu", "--cpu-only", "-w", str(ws.path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "reused the cached build of relu" in result.stdout and str(library) in result.stdout
    assert 'load_op("relu"' in result.stdout

    # A header edit recompiles exactly the translation unit that includes it.
    objects = {path.name: path.stat().st_mtime_ns for path in library.parent.glob("*.o")}
    assert set(objects) == {"relu.o", "relu_cpu.o"}
    header = ws.path / "relu" / "csrc" / "relu_math.h"
    header.write_text(header.read_text() + "\n// edited\n")
    assert in_fresh_process(ws, "load").startswith("built ")
    after = {path.name: path.stat().st_mtime_ns for path in library.parent.glob("*.o")}
    assert after["relu.o"] == objects["relu.o"] and after["relu_cpu.o"] > objects["relu_cpu.o"]

    # An `opgen build` library of the same op beside it (a copy of the JIT build stands in for it:
    # loading both would abort the process). After load_op, importing the package uses the JIT build.
    shutil.copy(library, ws.path / "relu" / "_C.abi3.so")
    assert in_fresh_process(ws, "load", "import").splitlines() == [f"reused {library}", "imported ['relu']"]
    # The other way round, load_op refuses and says where the op came from; the process lives on.
    refused = in_fresh_process(ws, "import", "load")
    assert "refused: cannot load a new build of 'relu' in this process" in refused
    assert str(ws.path / "relu" / "_C.abi3.so") in refused
    # Sources changed after the JIT build was loaded: refused too (restart, then it rebuilds).
    changed = in_fresh_process(ws, "load", "touch", "load")
    assert "refused: cannot load a new build of 'relu' in this process: its sources" in changed
    assert in_fresh_process(ws, "load").startswith("built ")

    # A source that does not compile: exit 1 with the first error, and no stamp left behind to
    # claim the last good build's library is current.
    assert list(ws.path.glob("build/jit/relu/*/" + jit.STAMP_FILE)) == [library.parent / jit.STAMP_FILE]
    # (A missing header, so the compiler stops there instead of reading torch's headers first.)
    source = ws.path / "relu" / "csrc" / "relu_cpu.cpp"
    source.write_text('#include "relu_helpers_not_written_yet.h"\n' + source.read_text())
    result = runner.invoke(app, ["dev", "relu", "--cpu-only", "-j", "2", "--workspace", str(ws.path)])
    assert result.exit_code == 1
    first_line = result.stderr.splitlines()[0]
    assert first_line.startswith("error: build failed for relu: ") and "relu_cpu.cpp" in first_line
    assert "error" in first_line.split("relu_cpu.cpp", 1)[1]
    assert "opgen dev relu -v" in result.stderr
    assert not list(ws.path.glob("build/jit/relu/*/" + jit.STAMP_FILE))


def test_dev_says_why_the_build_settings_cannot_be_worked_out(relu_workspace: Workspace) -> None:
    config = relu_workspace.path / "_build_config.py"
    refusal = "\n\ndef resolve(environ=None):\n    raise BuildConfigError('CUDA_HOME=/x holds no CUDA toolkit')\n"
    config.write_text(config.read_text() + refusal)
    result = runner.invoke(app, ["dev", "relu", "--cpu-only", "--workspace", str(relu_workspace.path)])
    assert result.exit_code == 2
    assert "cannot work out the build settings: CUDA_HOME=/x holds no CUDA toolkit" in result.stderr.splitlines()[0]
    assert not (relu_workspace.path / "build").exists()

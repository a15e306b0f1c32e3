"""The product's main job, for real: generate, build (C++ and CUDA where a toolkit is present),
and run the generated tests of softmax, gelu and a skeleton of each kind (in the slow tests'
shared workspace, tests/shared_build.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import shared_build
import torch
from shared_build import SharedProject
from workspace_commands import build_config_module, opgen

from opgen.toolchain import find_cuda_toolkit

# One process runs this module's tests, in order: the last one adds an op to the shared workspace
# and deletes my_op's library (put back by the build it tests).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("end_to_end")]

OPS = shared_build.join(
    {"softmax": [], "gelu": [], "my_op": ["--kind", "elementwise"], "row_op": ["--kind", "rowwise"]},
    workspace="one",
    cuda=["softmax", "gelu", "my_op", "row_op"],
)


@pytest.fixture
def built(shared_projects: Callable[[str], SharedProject]) -> tuple[Path, str]:
    """The folder holding the shared workspace, and the output of the build that built OPS."""
    project = shared_projects("one")
    return project.root, project.build_output(OPS[0])


def cuda_compilable() -> bool:
    return torch.version.cuda is not None and find_cuda_toolkit() is not None


def test_build_compiles_cuda_where_a_toolkit_is_found(built: tuple[Path, str]) -> None:
    root, build = built
    if cuda_compilable():
        assert "CPU and CUDA kernels" in build
    else:
        assert "CPU kernels only" in build
    for name in OPS:
        assert list((root / "generated_ops" / name).glob("_C*.so")), name


def test_the_shared_cpu_build_read_the_torch_headers_precompiled(
    shared_projects: Callable[[str], SharedProject],
) -> None:
    # The shared workspace's CPU-only build compiles its ops' C++ files all in one setup.py run:
    # where setup.py's rule says so for that many files a job (_build_config.py:
    # precompiles_torch_headers; on CI's two cores it does), it precompiled
    # include/opgen/torch_headers.h and handed it to every C++ file with -include, and they read
    # it precompiled: torch/library.h, which each binding includes, is not among the files ninja
    # recorded the compiler reading for it. Otherwise a file got it only where the run's shared
    # folder of precompiled headers (conftest.py) already held it.
    project = shared_projects("one")
    workspace = project.root / "generated_ops"
    rules = build_config_module(workspace)
    names = [op.name for op in shared_build.joined("one") if not op.cuda]
    (build,) = [build for build in project.builds if "--cpu-only" in build["command"]]  # type: ignore[operator]
    jobs = re.search(r"(\d+) parallel jobs", str(build["stdout"]))
    assert jobs is not None, build["stdout"]
    units = sum(path.suffix == ".cpp" for name in names for path in rules.op_sources(name, False, workspace))
    precompiled = rules.precompiles_torch_headers(units, int(jobs.group(1)))
    headers: set[str] = set()
    shared = Path(os.environ[rules.PRECOMPILED_HEADERS_ENV])  # every build of the run keeps it there
    for name in names:
        folder = workspace / "build" / "ops" / name
        included = re.search(r"-include (\S+/torch_headers\.h) ", (folder / "build.ninja").read_text())
        assert included is not None or not precompiled, name
        assert included is None or Path(f"{included.group(1)}.gch").is_file(), name
        assert included is None or Path(included.group(1)).is_relative_to(shared), name
        listed = subprocess.run(["ninja", "-t", "deps"], cwd=folder, capture_output=True, text=True, check=True)
        binding = cpp_objects_read(listed.stdout)[f"{name}.o"]
        assert any(header.endswith("torch/library.h") for header in binding) == (included is None), name
        headers.add(included.group(1) if included else "")
    # The CUDA build (before it, the same flags but the toolkit's include folders) took the same
    # precompiled form where it made one: setup.py leaves those folders out of the command that
    # makes and names it, so the two builds share one.
    (cuda_build,) = [build for build in project.builds if "--cpu-only" not in build["command"]]  # type: ignore[operator]
    cuda_jobs = re.search(r"(\d+) parallel jobs", str(cuda_build["stdout"]))
    cuda_names = [op.name for op in shared_build.joined("one") if op.cuda]
    if cuda_compilable() and cuda_jobs is not None:
        cuda_units = sum(path.suffix == ".cpp" for name in cuda_names for path in rules.op_sources(name, True, workspace))
        if rules.precompiles_torch_headers(cuda_units, int(cuda_jobs.group(1))):
            for name in cuda_names:
                text = (workspace / "build" / "ops" / name / "build.ninja").read_text()
                included = re.search(r"-include (\S+/torch_headers\.h) ", text)
                assert included is not None and {included.group(1)} == headers, (name, headers)


def cpp_objects_read(deps: str) -> dict[str, list[str]]:
    """What ``ninja -t deps`` says the compiler read for each C++ object (not nvcc's .cuda.o), by file name."""
    read: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in deps.splitlines():
        if line and not line[0].isspace():
            target = line.split(":", 1)[0]
            current = read.setdefault(Path(target).name, []) if not target.endswith(".cuda.o") else None
        elif line.strip() and current is not None:
            current.append(line.strip())
    return read


def test_generated_tests_pass(built: tuple[Path, str]) -> None:
    root, _ = built
    result = opgen("test", *OPS, cwd=root)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
    if not torch.cuda.is_available():
        assert "no CUDA GPU found" in result.stdout  # CUDA tests skip with their reason, never silently


def test_package_offers_every_op_both_ways(built: tuple[Path, str]) -> None:
    root, _ = built
    every_op = [op.name for op in shared_build.joined("one")]  # the other modules' ops are built there too
    script = f"""
import torch, generated_ops as g
x = torch.randn(4, 10)
assert sorted(g.built_ops) == sorted({every_op!r}), g.built_ops
torch.testing.assert_close(g.softmax(x), torch.softmax(x, -1))
torch.testing.assert_close(torch.ops.generated_ops.gelu(x, "tanh"), torch.nn.functional.gelu(x, approximate="tanh"))
for name in {list(OPS)!r}:
    has_cuda = torch._C._dispatch_has_kernel_for_dispatch_key(f"generated_ops::{{name}}", "CUDA")
    print(name, "cuda" if has_cuda else "cpu-only")
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    expected = "cuda" if cuda_compilable() else "cpu-only"
    assert result.stdout.split() == [word for name in OPS for word in (name, expected)]


def test_bench_on_cpu_writes_the_documented_json(built: tuple[Path, str], tmp_path: Path) -> None:
    root, _ = built
    report = tmp_path / "softmax.json"
    result = opgen(
        "bench", "softmax", "--device", "cpu", "--dtype", "float32", "--no-compile", "--json", str(report), cwd=root
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(report.read_text())
    assert {"torch", "cuda", "device", "bytes_model"} <= data["environment"].keys()
    contenders = {m["contender"] for m in data["measurements"]}
    assert contenders == {"opgen", "eager"}
    for measurement in data["measurements"]:
        assert measurement["median_ms"] > 0 and measurement["gbps"] > 0
        assert measurement["direction"] in {"forward", "backward"}


def test_a_broken_op_fails_alone_with_its_first_error(built: tuple[Path, str]) -> None:
    root, _ = built
    assert opgen("new", "broken", cwd=root).returncode == 0
    # Where nvcc compiles, the CUDA file is the broken one: ninja starts it first, so an error in
    # a C++ file would wait for nvcc's whole compile of a sound .cu (a minute on CI's cores),
    # while an error in the .cu ends the build once the C++ file compiling beside it is done.
    broken_file = "broken_cuda.cu" if cuda_compilable() else "broken_cpu.cpp"
    statement = {  # a statement of each, whose semicolon goes missing
        "broken_cuda.cu": "opgen::elementwise_forward_kernels<broken_math::Functors>(buffers);",
        "broken_cpu.cpp": "using broken_math::Functors;",
    }[broken_file]
    source = root / "generated_ops" / "broken" / "csrc" / broken_file
    text = source.read_text()
    assert statement in text
    source.write_text(text.replace(statement, statement.removesuffix(";") + "  // missing semicolon", 1))
    # my_op's library deleted from its folder (its build is intact): it must be put back even
    # though the op sorted before it fails.
    for library in (root / "generated_ops" / "my_op").glob("_C*.so"):
        library.unlink()
    try:
        result = opgen("build", "broken", "my_op", cwd=root)
        assert result.returncode == 1
        # The first error, named by its path in the workspace.
        assert f"broken/csrc/{broken_file}" in result.stderr and "error" in result.stderr, result.stderr
        summary = result.stdout
        assert "broken" in summary and "failed" in summary
        assert f"compiled {broken_file}" not in summary  # its progress line does not claim it compiled
        assert "my_op" in summary and "up-to-date" in summary  # the other op is untouched and ready
        assert list((root / "generated_ops" / "my_op").glob("_C*.so"))
        check = "import generated_ops as g; assert 'my_op' in g.built_ops and g.unbuilt_ops == ['broken']"
        assert subprocess.run([sys.executable, "-W", "ignore", "-c", check], cwd=root).returncode == 0
    finally:
        shutil.rmtree(root / "generated_ops" / "broken")

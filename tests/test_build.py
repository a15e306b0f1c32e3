from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.console import Console
from workspace_commands import build_config_module

from opgen import build
from opgen.build import (
    BuildEvent,
    LiveProgress,
    LogReader,
    PlainProgress,
    build_env,
    build_ops,
    default_jobs,
    first_compiler_error,
    parse_arch_list,
    progress_display,
    stale_ops,
)
from opgen.errors import BuildFailed, InvalidArch
from opgen.render import new_op, template_dir
from opgen.rules import BuildRules, opgen_rules, workspace_rules
from opgen.workspace import Workspace

CPU_ENV = {"OPGEN_CUDA": "0"}


def test_first_compiler_error_finds_gcc_and_nvcc_errors() -> None:
    gcc_log = (
        "[1/3] c++ -c a.cpp\nFAILED: a.o\nop/csrc/a.cpp:12:5: error: 'foo' was not declared\nninja: build stopped\n"
    )
    assert first_compiler_error(gcc_log) == "op/csrc/a.cpp:12:5: error: 'foo' was not declared"
    nvcc_log = 'op/csrc/a_cuda.cu(41): error: identifier "bar" is undefined\n1 error detected\n'
    assert first_compiler_error(nvcc_log) == 'op/csrc/a_cuda.cu(41): error: identifier "bar" is undefined'
    assert first_compiler_error("something odd\nlast words\n") == "last words"


def test_jobs_follow_cores_and_free_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "usable_cores", lambda: 16)
    monkeypatch.setattr(build, "available_memory_gib", lambda: 9.5)
    assert default_jobs(with_cuda=True) == 4  # nvcc: 2 GiB a job
    assert default_jobs(with_cuda=False) == 9
    monkeypatch.setattr(build, "available_memory_gib", lambda: 0.5)
    assert default_jobs() == 1  # never zero
    monkeypatch.setattr(build, "available_memory_gib", lambda: 512.0)
    assert default_jobs() == 16
    monkeypatch.undo()
    assert 1 <= default_jobs() <= (os.cpu_count() or 1)


def test_cpu_only_build_never_looks_for_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(env: object) -> None:
        raise AssertionError("looked for a toolkit")

    monkeypatch.setattr(build, "find_cuda_toolkit", explode)
    env, toolkit = build_env(["relu", "gelu"], cpu_only=True, jobs=3)
    assert toolkit is None and env["OPGEN_CUDA"] == "0"
    assert env["OPGEN_OPS"] == "relu,gelu" and env["MAX_JOBS"] == "3"


def test_arch_lists_are_normalized_or_refused() -> None:
    assert parse_arch_list("9.0") == "9.0"
    assert parse_arch_list("8.0, 9.0a 10.0+PTX") == "8.0;9.0a;10.0+PTX"
    assert parse_arch_list("Hopper;native") == "Hopper;native"
    for bad in ("sm_90", "90", "9.0;compute_90", " ", "9.0+ptx"):
        with pytest.raises(InvalidArch) as caught:
            parse_arch_list(bad)
        assert caught.value.exit_code == 2 and "--arch" in str(caught.value)
    with pytest.raises(InvalidArch):  # a bad --arch is refused even where no CUDA is compiled
        build_env(["relu"], cpu_only=True, jobs=1, arch="sm_90")


EVENT = opgen_rules().event_line
SETUP_LOG = f"""\
{
    EVENT(
        phase="settings",
        describe="CPU and CUDA kernels, CUDA architectures 9.0, toolkit /usr/local/cuda",
        cuda_arch_list="9.0",
        ops=["relu", "gelu"],
    )
}
running build_ext
{EVENT(op="relu", phase="compiling")}
[1/2] c++ -MMD -MF /ws/build/temp/relu/csrc/relu_cpu.o.d -O3 -c -c /ws/relu/csrc/relu_cpu.cpp -o /ws/build/relu_cpu.o
[2/2] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -c /ws/relu/csrc/relu_cuda.cu -o /ws/relu_cuda.o
{EVENT(op="relu", phase="linking")}
g++ -shared /ws/build/relu_cpu.o /ws/relu_cuda.o -o build/lib/ws/relu/_C.abi3.so
{EVENT(op="relu", phase="built", seconds=41.5, error="")}
{EVENT(op="gelu", phase="compiling")}
[1/2] c++ -MMD -MF /ws/build/temp/gelu/csrc/gelu_cpu.o.d -O3 -c -c /ws/gelu/csrc/gelu_cpu.cpp -o /ws/build/gelu_cpu.o
FAILED: /ws/build/temp/gelu/csrc/gelu_cpu.o
/ws/gelu/csrc/gelu_cpu.cpp:7:3: error: expected ';' before '}}' token
{EVENT(op="gelu", phase="failed", seconds=3.0, error="error: command 'ninja' failed with exit code 1")}
"""


def test_setup_output_pauses_are_reported_between_its_lines() -> None:
    # A held "compiled" event is shown when setup.py's output pauses: _lines_and_pauses says when.
    def slow_output() -> Iterator[str]:
        yield "[1/2] c++ -c -c /ws/relu/csrc/relu.cpp\n"
        time.sleep(0.3)
        yield "[2/2] c++ -c -c /ws/relu/csrc/relu_cpu.cpp\n"

    seen = list(build._lines_and_pauses(slow_output(), pause_s=0.05))
    assert seen[0].startswith("[1/2]") and seen[-1].startswith("[2/2]")  # type: ignore[union-attr]
    assert None in seen[1:-1] and all(line is None for line in seen[1:-1])


def test_setup_output_becomes_events_and_plain_progress_lines() -> None:
    reader = LogReader()
    events = [event for line in SETUP_LOG.splitlines() for event in reader.read(line)] + reader.release()
    assert events[1] == BuildEvent(op="relu", phase="compiling", detail="relu_cpu.cpp (1/2)")
    lines: list[str] = []
    progress = PlainProgress(lines.append)
    for event in [BuildEvent(op="softmax", phase="up-to-date", seconds=0.0), *events]:
        progress(event)
    assert lines == [
        "relu: compiling",
        "relu: compiled relu_cpu.cpp (1/2)",
        "relu: compiled relu_cuda.cu (2/2)",
        "relu: linking",
        "relu: built in 41.5 s",
        "gelu: compiling",
        "gelu: failed in 3.0 s",  # not "compiled gelu_cpu.cpp": ninja's line for it preceded FAILED
    ]
    assert reader.mode == "CPU and CUDA kernels, CUDA architectures 9.0, toolkit /usr/local/cuda"
    assert reader.architectures == "9.0"
    relu, gelu = reader.outcomes(SETUP_LOG)
    assert relu.compiled == ("relu_cpu.cpp", "relu_cuda.cu") and relu.seconds == 41.5
    assert gelu.status == "failed" and gelu.compiled == ()
    assert gelu.first_error == "/ws/gelu/csrc/gelu_cpu.cpp:7:3: error: expected ';' before '}' token"


def test_logs_get_plain_lines_and_terminals_a_live_table() -> None:
    log = io.StringIO()
    with progress_display(Console(file=log, width=40)) as progress:  # no terminal: plain lines
        progress(BuildEvent(op="relu", phase="compiling", detail="relu_cpu.cpp (1/2)"))
        progress(BuildEvent(op="relu", phase="built", seconds=12.25))
    assert log.getvalue() == "relu: compiled relu_cpu.cpp (1/2)\nrelu: built in 12.2 s\n"

    live = LiveProgress()
    for event in [
        BuildEvent(op="gelu", phase="up-to-date", seconds=0.0),
        BuildEvent(op="relu", phase="queued"),
        BuildEvent(op="softmax", phase="queued"),
        BuildEvent(op="relu", phase="compiling"),
        BuildEvent(op="relu", phase="compiling", detail="relu_cpu.cpp (1/2)"),
        BuildEvent(op="softmax", phase="failed", seconds=3.0),
    ]:
        live(event)
    screen = Console(file=io.StringIO(), width=100, color_system=None)
    screen.print(live)
    gelu, relu, softmax = (" ".join(line.split()) for line in screen.file.getvalue().splitlines())
    assert gelu == "= gelu up-to-date"
    assert relu.startswith("relu compiling relu_cpu.cpp (1/2) done 0 s", 2)  # after the spinner
    assert softmax == "✗ softmax failed 3.0 s"


# The fast path: which ops the workspace's _build_config.py finds up to date, without setup.py.


@pytest.fixture
def built_ws(workspace: Workspace, rendered: Callable[..., Workspace]) -> tuple[Workspace, BuildRules]:
    """A workspace whose relu and gelu look freshly built (CPU only) as setup.py leaves them."""
    rendered(workspace.path, "relu", "gelu")
    config = workspace_rules(workspace.path)
    assert config is not None
    settings = config.resolve(CPU_ENV)
    for op in ("relu", "gelu"):
        config.write_stamp(op, settings, workspace.path)
        mark_built(workspace, op)
    return workspace, config


def mark_built(workspace: Workspace, op: str) -> None:
    library = workspace.op_dir(op) / "_C.abi3.so"
    library.write_bytes(b"")
    later = time.time() + 100  # newer than every input, as after a link
    os.utime(library, (later, later))


def touch_later(path: Path) -> None:
    later = time.time() + 200  # newer than the library
    os.utime(path, (later, later))


def stale(workspace: Workspace, config: BuildRules, env: dict[str, str] = CPU_ENV) -> list[str]:
    return stale_ops(workspace, ["gelu", "relu"], config, config.resolve(env))


def test_cuda_side_sources_compile_only_with_cuda(workspace: Workspace) -> None:
    # softmax keeps its kernels (.cu) apart from their host binding (softmax_cuda_binding.cpp):
    # both need CUDA, so a CPU-only build leaves both out; an op whose name holds "cuda" keeps
    # its CPU kernel.
    new_op("softmax", workspace=workspace)
    new_op("cuda_cpu_mix", workspace=workspace)
    config = workspace_rules(workspace.path)
    assert config is not None

    def names(op: str, with_cuda: bool) -> list[str]:
        return [path.name for path in config.op_sources(op, with_cuda, workspace.path)]

    assert names("softmax", False) == ["softmax.cpp", "softmax_cpu.cpp"]
    assert names("softmax", True) == ["softmax.cpp", "softmax_cpu.cpp", "softmax_cuda_binding.cpp", "softmax_cuda.cu"]
    assert names("cuda_cpu_mix", False) == ["cuda_cpu_mix.cpp", "cuda_cpu_mix_cpu.cpp"]


def test_fresh_build_is_up_to_date(built_ws: tuple[Workspace, BuildRules]) -> None:
    workspace, config = built_ws
    assert stale(workspace, config) == []


@pytest.mark.parametrize(
    "changed",
    ["relu/csrc/relu_cpu.cpp", "relu/csrc/relu_cuda.cu", "include/opgen/elementwise.cuh", "setup.py"],
)
def test_a_touched_input_makes_the_ops_using_it_stale(built_ws: tuple[Workspace, BuildRules], changed: str) -> None:
    workspace, config = built_ws
    touch_later(workspace.path / changed)
    expected = {
        "relu/csrc/relu_cpu.cpp": ["relu"],
        "relu/csrc/relu_cuda.cu": [],  # a CPU-only build does not compile it
        "include/opgen/elementwise.cuh": ["gelu", "relu"],  # .cuh too, not only .h
        "setup.py": ["gelu", "relu"],  # its flags may have changed
    }[changed]
    assert stale(workspace, config) == expected


def test_a_changed_setting_makes_every_op_stale(built_ws: tuple[Workspace, BuildRules]) -> None:
    workspace, config = built_ws
    assert stale(workspace, config, {**CPU_ENV, "CXXFLAGS": "-g"}) == ["gelu", "relu"]
    assert stale(workspace, config, {**CPU_ENV, "TORCH_CUDA_ARCH_LIST": "8.0"}) == []  # no CUDA: arch is moot


def test_a_changed_cuda_arch_makes_every_op_stale(
    built_ws: tuple[Workspace, BuildRules], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, config = built_ws
    toolkit = tmp_path / "cuda"
    (toolkit / "lib64").mkdir(parents=True)
    (toolkit / "lib64" / "libcudart.so").write_bytes(b"")
    monkeypatch.setattr(config, "torch_build", lambda: ("2.9.0+cu128", "12.8", "abc"))
    cuda_env = {"CUDA_HOME": str(toolkit), "TORCH_CUDA_ARCH_LIST": "9.0"}
    assert stale(workspace, config, cuda_env) == ["gelu", "relu"]  # built CPU-only before
    settings = config.resolve(cuda_env)
    for op in ("gelu", "relu"):
        config.write_stamp(op, settings, workspace.path)
        mark_built(workspace, op)
    assert stale(workspace, config, cuda_env) == []
    assert stale(workspace, config, {**cuda_env, "TORCH_CUDA_ARCH_LIST": "8.0;9.0"}) == ["gelu", "relu"]
    assert stale(workspace, config, {**cuda_env, "NVCC_APPEND_FLAGS": "-G"}) == ["gelu", "relu"]
    monkeypatch.setattr(config, "torch_build", lambda: ("2.10.0+cu128", "12.8", "def"))
    assert stale(workspace, config, cuda_env) == ["gelu", "relu"]  # another torch


def test_added_or_removed_sources_and_missing_library_make_the_op_stale(
    built_ws: tuple[Workspace, BuildRules],
) -> None:
    workspace, config = built_ws
    extra = workspace.op_dir("relu") / "csrc" / "relu_extra.cpp"
    extra.write_text("// more\n")
    os.utime(extra, (0, 0))  # even with an old mtime (copied, checked out), the source list changed
    assert stale(workspace, config) == ["relu"]
    extra.unlink()
    assert stale(workspace, config) == []
    (workspace.op_dir("gelu") / "csrc" / "gelu_cpu.cpp").unlink()
    assert stale(workspace, config) == ["gelu"]
    (workspace.op_dir("relu") / "_C.abi3.so").unlink()
    assert stale(workspace, config) == ["gelu", "relu"]


def test_nothing_to_do_never_starts_setup_py(
    built_ws: tuple[Workspace, BuildRules], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, _ = built_ws

    def explode(*args: object, **kwargs: object) -> None:
        raise AssertionError("setup.py was started")

    monkeypatch.setattr(build.subprocess, "Popen", explode)
    events: list[BuildEvent] = []
    report = build_ops(workspace, cpu_only=True, jobs=1, progress=events.append)
    assert not report.ran_setup and report.architectures is None
    assert [(o.op, o.status) for o in report.outcomes] == [("gelu", "up-to-date"), ("relu", "up-to-date")]
    assert [event.phase for event in events] == ["up-to-date", "up-to-date"]
    assert report.mode.startswith("CPU kernels only")


FAKE_SETUP = """\
import os
from _build_config import event_line
print(event_line(phase="settings", describe="CPU kernels only (test)", cuda_arch_list=None,
                 ops=os.environ["OPGEN_OPS"].split(",")), flush=True)
for op in os.environ["OPGEN_OPS"].split(","):
    print(event_line(op=op, phase="compiling"), flush=True)
    print(f"[1/1] c++ -c -c {op}/csrc/{op}_cpu.cpp -o x.o", flush=True)
    if op == "gelu":
        print("FAILED: x.o", flush=True)
        print(f"{os.getcwd()}/{op}/csrc/{op}_cpu.cpp:3:1: error: expected unqualified-id", flush=True)
        print(event_line(op=op, phase="failed", seconds=0.2, error="error: ninja failed"), flush=True)
    else:
        print(event_line(op=op, phase="linking"), flush=True)
        print(event_line(op=op, phase="built", seconds=0.3, error=""), flush=True)
raise SystemExit(1 if "gelu" in os.environ["OPGEN_OPS"] else 0)
"""


def test_only_stale_ops_go_to_setup_py_and_a_failure_is_reported(
    built_ws: tuple[Workspace, BuildRules],
) -> None:
    workspace, _ = built_ws
    setup = workspace.path / "setup.py"
    setup.write_text(FAKE_SETUP)
    os.utime(setup, (0, 0))  # the fake itself must not make every op stale
    touch_later(workspace.op_dir("relu") / "csrc" / "relu.cpp")
    events: list[BuildEvent] = []
    report = build_ops(workspace, ["relu", "gelu"], cpu_only=True, jobs=1, progress=events.append)
    assert report.ran_setup and '"ops": ["relu"]' in report.log  # gelu was up to date: not handed over
    assert [(o.op, o.status, o.compiled) for o in report.outcomes] == [
        ("relu", "built", ("relu_cpu.cpp",)),
        ("gelu", "up-to-date", ()),
    ]
    assert [event.phase for event in events if event.op == "relu"] == [
        "queued",
        "compiling",
        "compiling",
        "linking",
        "built",
    ]
    touch_later(workspace.op_dir("gelu") / "csrc" / "gelu.cpp")
    with pytest.raises(BuildFailed) as caught:
        build_ops(workspace, cpu_only=True, jobs=1)
    failed = caught.value.report
    assert [(o.op, o.status, o.compiled) for o in failed.outcomes] == [
        ("gelu", "failed", ()),  # the file ninja tried did not compile
        ("relu", "built", ("relu_cpu.cpp",)),
    ]
    # The first error, with its path relative to the workspace, in the report and the message.
    assert failed.failed[0].first_error == "gelu/csrc/gelu_cpu.cpp:3:1: error: expected unqualified-id"
    assert str(caught.value).endswith(": gelu/csrc/gelu_cpu.cpp:3:1: error: expected unqualified-id")


def test_many_jobs_build_ops_side_by_side_each_in_its_own_setup_run(
    built_ws: tuple[Workspace, BuildRules],
) -> None:
    workspace, _ = built_ws
    setup = workspace.path / "setup.py"
    # The fake records how it was started: the ops it got, its jobs and its objects' folder.
    setup.write_text(
        FAKE_SETUP.replace(
            "import os\n",
            "import os, sys\nprint('started', os.environ['OPGEN_OPS'], os.environ['MAX_JOBS'], sys.argv[1:], flush=True)\n",
            1,
        )
    )
    os.utime(setup, (0, 0))
    for op in ("relu", "gelu"):
        touch_later(workspace.op_dir(op) / "csrc" / f"{op}.cpp")
    # (ops, jobs) -> ops built at once: one job an op where jobs are many, as before where few.
    lanes = {(2, 6): 2, (5, 16): 5, (200, 16): 16, (1, 16): 1, (3, 2): 1, (3, 5): 1}
    assert {case: build.build_lanes(*case) for case in lanes} == lanes
    with pytest.raises(BuildFailed) as caught:
        build_ops(workspace, cpu_only=True, jobs=6)
    report = caught.value.report
    started = sorted(line.split(" ", 3)[1:] for line in report.log.splitlines() if line.startswith("started"))
    temp = workspace.path / "build" / "ops"
    assert started == [
        ["gelu", "3", str(["build_ext", "--inplace", "--build-temp", str(temp / "gelu")])],
        ["relu", "3", str(["build_ext", "--inplace", "--build-temp", str(temp / "relu")])],
    ]
    # One op failing leaves the other built, and the failure names the op and its first error.
    assert [(o.op, o.status) for o in report.outcomes] == [("gelu", "failed"), ("relu", "built")]
    assert str(caught.value).endswith(": gelu/csrc/gelu_cpu.cpp:3:1: error: expected unqualified-id")


def test_torch_headers_are_precompiled_for_builds_with_enough_cpp_files_a_job(relu_workspace: Workspace) -> None:
    rules = build_config_module(relu_workspace.path)
    per_job = rules.PRECOMPILE_UNITS_PER_JOB
    assert per_job >= 2  # making it costs about two files' time while the other jobs wait
    for jobs in (1, 2, 16):
        assert rules.precompiles_torch_headers(per_job * jobs, jobs)
        assert not rules.precompiles_torch_headers(per_job * jobs - 1, jobs)
    # One op (a binding and a CPU file), as `opgen new softmax && opgen build` compiles: never.
    assert not rules.precompiles_torch_headers(2, 1) and not rules.precompiles_torch_headers(0, 0)


def test_the_precompiled_header_has_a_folder_per_command_torch_and_header_text(
    relu_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = build_config_module(relu_workspace.path)
    monkeypatch.delenv(rules.PRECOMPILED_HEADERS_ENV, raising=False)  # the suite shares one (conftest.py)
    command = ["c++", "-O3", "-std=c++20"]
    folder = rules.precompiled_header_folder(command, "2.11.0 abc", relu_workspace.path)
    assert folder.parent == relu_workspace.path / "build" / "pch"
    assert rules.precompiled_header_folder(list(command), "2.11.0 abc", relu_workspace.path) == folder
    others = {
        rules.precompiled_header_folder([*command, "-DX"], "2.11.0 abc", relu_workspace.path),
        rules.precompiled_header_folder(command, "2.12.0 def", relu_workspace.path),
    }
    header = relu_workspace.path / "include" / rules.TORCH_HEADERS
    header.write_text(header.read_text() + "#include <ATen/ops/sum.h>\n")
    others.add(rules.precompiled_header_folder(command, "2.11.0 abc", relu_workspace.path))
    assert len(others) == 3 and folder not in others
    header.unlink()  # a user's deletion: the ops build without a precompiled header, not fail
    assert rules.precompiled_header_folder(command, "2.11.0 abc", relu_workspace.path) is None


@pytest.mark.slow
def test_real_build_is_incremental_and_skips_setup_when_nothing_changed(relu_workspace: Workspace) -> None:
    """One op, CPU only: a cold build, a no-change build, then one touched file."""
    workspace = relu_workspace
    cold = build_ops(workspace, cpu_only=True, jobs=2)
    assert [(o.status, sorted(o.compiled)) for o in cold.outcomes] == [("built", ["relu.cpp", "relu_cpu.cpp"])]
    # CXX_FLAGS' -g0 wins over the -g of Python's own flags: no debug info (a third of the compile time).
    (library,) = workspace.op_dir("relu").glob("_C*.so")
    assert b".debug_info" not in library.read_bytes()

    again = build_ops(workspace, cpu_only=True, jobs=2)
    assert not again.ran_setup and again.outcomes[0].status == "up-to-date"

    (workspace.op_dir("relu") / "csrc" / "relu_cpu.cpp").touch()  # now: the rebuilt library is newer
    command = [sys.executable, "-m", "opgen", "build", "--cpu-only", "-j", "2", "-w", str(workspace.path)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=workspace.path.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    # Plain progress lines (stdout is no terminal): only the touched file was recompiled.
    assert "relu: compiled relu_cpu.cpp (1/1)\nrelu: linking\nrelu: built in " in result.stdout


@pytest.mark.usefixtures("torch_built_with_cuda")
def test_build_setup_resolves_the_settings_build_list_and_dev_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relu_workspace: Workspace
) -> None:
    from opgen.toolchain import CudaToolkit

    workspace = relu_workspace
    home = tmp_path / "cuda"
    (home / "lib64").mkdir(parents=True)
    (home / "lib64" / "libcudart.so").write_bytes(b"")  # what the workspace's settings check for
    monkeypatch.setattr(build, "find_cuda_toolkit", lambda env: CudaToolkit(home, "13.0"))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0 9.0")
    monkeypatch.delenv("OPGEN_CUDA", raising=False)
    setup = build.build_setup(workspace, ["relu"], jobs=1)
    assert setup.settings is not None and setup.toolkit is not None, setup.problem
    assert setup.settings.cuda_arch_list == setup.env["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0"  # setup.py gets the same
    assert setup.settings.cuda_home == setup.env["CUDA_HOME"] == str(home)
    # OPGEN_CUDA=0 makes setup.py compile CPU kernels only: the setup names no toolkit either.
    monkeypatch.setenv("OPGEN_CUDA", "0")
    cpu = build.build_setup(workspace, ["relu"], jobs=1)
    assert cpu.toolkit is None and cpu.settings is not None and not cpu.settings.with_cuda
    edited = "INTERFACE = 2\n\ndef resolve(environ):\n    raise ValueError('edited wrongly')\n"
    (workspace.path / "_build_config.py").write_text(edited)
    broken = build.build_setup(workspace, ["relu"], jobs=1)
    assert broken.config is not None and broken.settings is None and broken.problem == "edited wrongly"
    # An older form of the file (no INTERFACE 2) is not called at all: setup.py decides.
    (workspace.path / "_build_config.py").write_text(edited.replace("INTERFACE = 2", "INTERFACE = 1"))
    older = build.build_setup(workspace, ["relu"], jobs=1)
    assert older.config is None and older.problem == "no loadable _build_config.py of interface 2"


def test_workspaces_share_precompiled_headers_in_the_folder_the_environment_names(tmp_path: Path) -> None:
    rules = build_config_module(template_dir() / "workspace")
    shared = {rules.PRECOMPILED_HEADERS_ENV: str(tmp_path / "pch")}
    folders = []
    for name in ("a", "b"):
        workspace = tmp_path / name / "generated_ops"
        (workspace / "include" / "opgen").mkdir(parents=True)
        (workspace / "include" / rules.TORCH_HEADERS).write_text("#include <torch/library.h>\n")
        # The workspace's own include folder is among a build's flags; the key leaves it out.
        command = ["c++", "-O3", f"-I{workspace}/include", "-I/torch/include"]
        folders.append(rules.precompiled_header_folder(command, "2.11.0 abc", workspace, shared))
        assert rules.precompiled_header_folder(command, "2.11.0 abc", workspace, {}).parent == workspace / "build" / "pch"
    assert folders[0] == folders[1] and folders[0].parent == tmp_path / "pch"
    # Any other flag still makes a folder of its own.
    other = ["c++", "-O2", f"-I{tmp_path / 'a' / 'generated_ops'}/include", "-I/torch/include"]
    assert rules.precompiled_header_folder(other, "2.11.0 abc", tmp_path / "a" / "generated_ops", shared) != folders[0]

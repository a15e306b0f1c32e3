from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opgen.build import build_setup, stale_ops
from opgen.cli import app
from opgen.inventory import (
    SETTINGS_CHANGED,
    UNDECIDED,
    build_rule,
    cuda_architectures,
    list_ops,
    remove_op,
)
from opgen.render import new_op
from opgen.workspace import Workspace

runner = CliRunner()


def fake_fatbin(entries: list[tuple[int, int]]) -> bytes:
    """A fat binary of (kind, arch) entries, each with an 8-byte payload, laid out as nvcc does."""
    body = b""
    for kind, arch in entries:
        header = struct.pack("<HHIQIIHHI", kind, 0x101, 64, 8, 0, 0, 0, 0, arch).ljust(64, b"\0")
        body += header + b"\xaa" * 8
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def fake_elf(sections: dict[str, bytes]) -> bytes:
    """A minimal 64-bit little-endian ELF file holding ``sections`` (and its section-name table)."""
    names = b"\0" + b"".join(name.encode() + b"\0" for name in [*sections, ".shstrtab"])
    contents = [*sections.values(), names]
    data = bytearray(64)
    offsets = []
    for content in contents:
        offsets.append(len(data))
        data += content
    section_table = len(data)
    data += bytes(64)  # the null section
    name_offset = 1
    for name, content, offset in zip([*sections, ".shstrtab"], contents, offsets, strict=True):
        data += struct.pack("<IIQQQQIIQQ", name_offset, 1, 0, 0, offset, len(content), 0, 0, 1, 0)
        name_offset += len(name) + 1
    data[:16] = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    struct.pack_into("<Q", data, 0x28, section_table)
    struct.pack_into("<HHH", data, 0x3A, 64, len(contents) + 1, len(contents))
    return bytes(data)


@pytest.fixture
def ws(workspace: Workspace, rendered: Callable[..., Workspace]) -> Workspace:
    return rendered(workspace.path, "relu", "softmax", ("my_op", {"kind": "rowwise"}))


def fake_build(workspace: Workspace, op: str, library: bytes = b"not really a library") -> Path:
    """What a build leaves: the op's library, and its objects under build/ as setuptools lays them out."""
    objects = workspace.path / "build" / "temp.linux-x86_64-cpython-311" / op / "csrc"
    objects.mkdir(parents=True)
    (objects / f"{op}.o").write_bytes(b"")
    lib_copy = workspace.path / "build" / "lib.linux-x86_64-cpython-311" / workspace.package / op
    lib_copy.mkdir(parents=True)
    (lib_copy / "_C.abi3.so").write_bytes(library)
    rule = build_rule(workspace)
    assert rule is not None
    rule.config.write_stamp(op, rule.settings, workspace.path)  # the configuration the build would record
    jit_build = workspace.path / "build" / "jit" / op / "torch-x-cpu"
    jit_build.mkdir(parents=True)
    (jit_build / f"{op}.so").write_bytes(b"")
    so = workspace.op_dir(op) / "_C.abi3.so"
    so.write_bytes(library)
    later = time.time() + 10  # later than every source, whatever the filesystem's mtime resolution
    os.utime(so, (later, later))
    return so


def test_cuda_architectures_read_from_the_embedded_fat_binary(tmp_path: Path) -> None:
    library = tmp_path / "_C.abi3.so"
    library.write_bytes(fake_elf({".text": b"\x90" * 5, ".nv_fatbin": fake_fatbin([(2, 80), (2, 90), (1, 90)])}))
    assert cuda_architectures(library) == ("8.0", "9.0+PTX")


def test_a_library_without_cuda_code_has_no_architectures(tmp_path: Path) -> None:
    library = tmp_path / "_C.abi3.so"
    library.write_bytes(fake_elf({".text": b"\x90" * 5}))
    assert cuda_architectures(library) is None
    library.write_bytes(b"garbage")
    assert cuda_architectures(library) is None


def test_list_reads_each_ops_answers_and_build_state(ws: Workspace) -> None:
    fake_build(ws, "relu", fake_elf({".nv_fatbin": fake_fatbin([(2, 90)])}))
    fake_build(ws, "softmax", fake_elf({".text": b""}))
    ops = {op.name: op for op in list_ops(ws)}
    assert sorted(ops) == ["my_op", "relu", "softmax"]
    assert (ops["relu"].recipe, ops["relu"].kind, ops["relu"].built) == ("relu", "elementwise", "CPU+CUDA")
    assert ops["relu"].cuda_architectures == ("9.0",)
    assert (ops["softmax"].kind, ops["softmax"].built) == ("rowwise", "CPU")
    assert (ops["my_op"].recipe, ops["my_op"].kind, ops["my_op"].built) == ("rowwise", "rowwise", "no")
    assert ops["relu"].dtypes == ("float32", "float64", "float16", "bfloat16")
    assert ops["relu"].template_version == "0.1.0"
    assert not ops["relu"].stale and not ops["softmax"].stale


def test_list_names_sources_newer_than_the_library(ws: Workspace) -> None:
    so = fake_build(ws, "relu")
    later = so.stat().st_mtime + 5
    os.utime(ws.op_dir("relu") / "csrc" / "relu_math.h", (later, later))
    os.utime(ws.path / "include" / "opgen" / "checks.h", (later, later))
    (relu,) = [op for op in list_ops(ws) if op.name == "relu"]
    assert relu.stale
    assert relu.changed_since_build == ("include/opgen/checks.h", "relu/csrc/relu_math.h")


def stale_by_build(workspace: Workspace) -> set[str]:
    """The ops `opgen build` would hand to setup.py now (build_ops's own decision, without running it)."""
    names = workspace.ops()
    setup = build_setup(workspace, names, jobs=1)
    assert setup.config is not None and setup.settings is not None, setup.problem
    return set(stale_ops(workspace, names, setup.config, setup.settings))


def test_list_and_build_agree_on_what_changed(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    for op in ("relu", "softmax", "my_op"):
        fake_build(ws, op)

    def stale() -> dict[str, tuple[str, ...]]:
        listed = {op.name: op.changed_since_build for op in list_ops(ws) if op.stale}
        assert set(listed) == stale_by_build(ws)
        return listed

    assert stale() == {}
    later = (ws.op_dir("relu") / "_C.abi3.so").stat().st_mtime + 5
    # Not an input of the build (no source, no header): neither rebuilds nor counts as a change.
    (ws.op_dir("relu") / "csrc" / "NOTES.md").write_text("my notes\n")
    os.utime(ws.op_dir("relu") / "csrc" / "NOTES.md", (later, later))
    assert stale() == {}
    # setup.py is an input of every op.
    os.utime(ws.path / "setup.py", (later, later))
    assert stale() == {op: ("setup.py",) for op in ("my_op", "relu", "softmax")}
    for op in ("relu", "softmax", "my_op"):
        os.utime(ws.op_dir(op) / "_C.abi3.so", (later + 1, later + 1))
    assert stale() == {}
    # A changed compiler variable is a changed build setting: no file changed, yet both rebuild.
    monkeypatch.setenv("CXXFLAGS", "-O1")
    assert stale() == {op: (SETTINGS_CHANGED,) for op in ("my_op", "relu", "softmax")}
    monkeypatch.delenv("CXXFLAGS")
    # A library built for another Python is no build of this one.
    (ws.op_dir("relu") / "_C.abi3.so").rename(ws.op_dir("relu") / "_C.cpython-39-x86_64-linux-gnu.so")
    assert stale() == {"relu": ("relu/_C.cpython-39-x86_64-linux-gnu.so is no library this Python loads",)}


def test_list_where_the_workspace_rule_says_less(ws: Workspace) -> None:
    fake_build(ws, "relu")
    config_file = ws.path / "_build_config.py"
    source = config_file.read_text()
    # An older _build_config.py (another INTERFACE): list cannot say why, and still finds the library.
    config_file.write_text(source.replace("INTERFACE = 2", "INTERFACE = 1"))
    assert [(op.built, op.changed_since_build) for op in list_ops(ws) if op.name == "relu"] == [("CPU", (UNDECIDED,))]
    # A broken one: `opgen build` then hands every op to setup.py, and list cannot say why.
    config_file.write_text(source + "\nthis is not Python\n")
    assert [op.changed_since_build for op in list_ops(ws) if op.built != "no"] == [(UNDECIDED,)]


def test_list_cli_table_and_json(ws: Workspace) -> None:
    fake_build(ws, "relu")
    table = runner.invoke(app, ["list", "--workspace", str(ws.path)])
    assert table.exit_code == 0
    assert "relu" in table.stdout and "softmax" in table.stdout and "my_op" in table.stdout
    data = json.loads(runner.invoke(app, ["list", "--json", "--workspace", str(ws.path)]).stdout)
    assert data["workspace"] == str(ws.path)
    by_name = {op["name"]: op for op in data["ops"]}
    assert by_name["relu"]["built"] == "CPU" and by_name["relu"]["stale"] is False
    assert by_name["my_op"]["built"] == "no" and by_name["my_op"]["library"] is None


def test_list_without_a_workspace_exits_2(workspace: Workspace) -> None:
    result = runner.invoke(app, ["list", "--workspace", str(workspace.path)])
    assert result.exit_code == 2 and "opgen new" in result.stderr


def test_remove_deletes_the_folder_and_its_build_products_only(ws: Workspace) -> None:
    fake_build(ws, "relu")
    fake_build(ws, "softmax")
    removal = remove_op(ws, "relu")
    assert removal.done
    assert not ws.op_dir("relu").exists()
    assert not list((ws.path / "build").rglob("relu*")) and not list((ws.path / "build").rglob("*/relu"))
    assert ws.ops() == ["my_op", "softmax"]
    assert (ws.op_dir("softmax") / "_C.abi3.so").is_file()
    assert list((ws.path / "build").glob("temp.*/softmax/csrc/softmax.o"))
    assert (ws.path / "build" / "opgen-config" / "softmax.txt").is_file()
    assert not (ws.path / "build" / "jit" / "relu").exists() and (ws.path / "build" / "jit" / "softmax").is_dir()
    assert (ws.path / "include" / "opgen" / "checks.h").is_file()


def test_remove_unknown_op_exits_2_and_touches_nothing(ws: Workspace) -> None:
    before = sorted(ws.path.rglob("*"))
    result = runner.invoke(app, ["remove", "gelu", "--yes", "--workspace", str(ws.path)])
    assert result.exit_code == 2 and "no op named 'gelu'" in result.stderr and "known ops:" in result.stderr
    assert sorted(ws.path.rglob("*")) == before


@pytest.mark.parametrize("name", ["include", "build", "..", "../ops_ws"])
def test_remove_refuses_what_is_not_an_op(ws: Workspace, name: str) -> None:
    fake_build(ws, "relu")
    result = runner.invoke(app, ["remove", name, "--yes", "--workspace", str(ws.path)])
    assert result.exit_code == 2
    assert (ws.path / "include").is_dir() and (ws.path / "build").is_dir()


def test_remove_without_yes_off_a_terminal_refuses_with_a_hint(ws: Workspace) -> None:
    result = runner.invoke(app, ["remove", "relu", "--workspace", str(ws.path)])
    assert result.exit_code == 2 and "--yes" in result.stderr
    assert ws.op_dir("relu").is_dir()


def test_remove_on_a_terminal_asks_first(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("opgen.cli._stdin_is_terminal", lambda: True)
    declined = runner.invoke(app, ["remove", "relu", "--workspace", str(ws.path)], input="n\n")
    assert declined.exit_code == 0 and "nothing deleted" in declined.stdout
    assert ws.op_dir("relu").is_dir()
    accepted = runner.invoke(app, ["remove", "relu", "--workspace", str(ws.path)], input="y\n")
    assert accepted.exit_code == 0 and "removed" in accepted.stdout
    assert not ws.op_dir("relu").exists()


def test_remove_with_yes(ws: Workspace) -> None:
    result = runner.invoke(app, ["remove", "softmax", "--yes", "--workspace", str(ws.path)])
    assert result.exit_code == 0
    assert ws.ops() == ["my_op", "relu"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_architectures_of_a_real_nvcc_library(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(float* x) { x[threadIdx.x] = 1.f; }\n")
    library = tmp_path / "k.so"
    arch_flags = ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=[sm_90,compute_90]"]
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", *arch_flags, str(source), "-o", str(library)], check=True)
    assert cuda_architectures(library) == ("8.0", "9.0+PTX")


@pytest.mark.slow
def test_remove_then_build_leaves_the_op_neither_built_nor_importable(workspace: Workspace) -> None:
    for op in ("gelu", "relu"):
        new_op(op, workspace=workspace)
    assert runner.invoke(app, ["build", "--cpu-only", "--workspace", str(workspace.path)]).exit_code == 0
    assert runner.invoke(app, ["remove", "gelu", "--yes", "--workspace", str(workspace.path)]).exit_code == 0
    rebuilt = runner.invoke(app, ["build", "--cpu-only", "--workspace", str(workspace.path)])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert not workspace.op_dir("gelu").exists()
    # The template snapshots that `opgen update` keeps under .opgen/ hold every recipe, gelu's too.
    leftovers = [
        path
        for path in [*workspace.path.rglob("gelu*"), *workspace.path.rglob("*/gelu")]
        if ".opgen" not in path.relative_to(workspace.path).parts
    ]
    assert not leftovers
    probe = (
        f"import torch, {workspace.package} as ws\n"
        "assert ws.built_ops == ['relu'], ws.built_ops\n"
        "assert not hasattr(ws, 'gelu')\n"
        "assert not hasattr(torch.ops.generated_ops, 'gelu')\n"
        "x = torch.tensor([-1.0, 2.0])\n"
        "assert ws.relu(x).tolist() == [0.0, 2.0]\n"
    )
    env = {**os.environ, "PYTHONPATH": str(workspace.path.parent)}
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("recipe", "kind"), [("formula", "elementwise"), ("softmax", "rowwise"), ("rowwise", "rowwise")]
)
def test_kind_of_each_recipe(recipe: str, kind: str) -> None:
    from opgen.inventory import _kind_of

    assert _kind_of(recipe) == kind

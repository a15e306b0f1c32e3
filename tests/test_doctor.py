from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opgen import doctor
from opgen.cli import app
from opgen.doctor import check_architectures, check_cuda_toolkit, cuda_arch_list, run_doctor
from opgen.render import new_op
from opgen.rules import opgen_rules
from opgen.toolchain import CudaToolkit
from opgen.workspace import Workspace

runner = CliRunner()


def fake_toolkit(root: Path, release: str) -> Path:
    """A folder with an nvcc that reports ``release`` and a libcudart: what find_cuda_toolkit accepts."""
    (root / "bin").mkdir(parents=True)
    (root / "lib64").mkdir()
    (root / "lib64" / "libcudart.so").write_bytes(b"")
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --list-gpu-arch ]; then echo compute_80; echo compute_90; exit 0; fi\n'
        f'echo "Cuda compilation tools, release {release}, V{release}.1"\n'
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return root


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "visible_gpus", lambda: [])
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)


@pytest.fixture
def torch_cuda_13(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "check_torch", lambda: (doctor.Check("torch", "ok", "fake, CUDA 13.2"), "13.2"))


def statuses(report: doctor.DoctorReport) -> dict[str, str]:
    return {check.name: check.status for check in report.checks}


def test_cuda_home_without_a_toolkit_fails_naming_the_problem_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_gpu: None, torch_cuda_13: None
) -> None:
    empty = tmp_path / "cuda"
    empty.mkdir()
    monkeypatch.setenv("CUDA_HOME", str(empty))
    result = runner.invoke(app, ["doctor", "--workspace", str(tmp_path / "generated_ops")])
    assert result.exit_code == 1
    assert f"CUDA_HOME={empty} holds no toolkit" in result.stdout
    assert "set CUDA_HOME to the toolkit folder" in result.stdout
    data = json.loads(runner.invoke(app, ["doctor", "--json", "--workspace", str(tmp_path / "ws")]).stdout)
    (toolkit,) = [check for check in data["checks"] if check["name"] == "CUDA toolkit"]
    assert toolkit["status"] == "fail" and "CUDA_HOME" in toolkit["hint"] and not data["ok"]


def test_no_gpu_is_reported_and_cuda_still_compiles(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_gpu: None,
    torch_cuda_13: None,
    rendered: Callable[..., Workspace],
) -> None:
    monkeypatch.setenv("CUDA_HOME", str(fake_toolkit(tmp_path / "cuda", "13.0")))
    workspace = rendered(tmp_path / "generated_ops", "relu")
    report = run_doctor(workspace)
    found = statuses(report)
    assert found["GPUs"] == "warn" and found["CUDA toolkit"] == "ok" and found["workspace"] == "ok"
    assert report.ok, report.checks
    assert report.builds.startswith("CPU and CUDA kernels") and report.cuda_architectures == ["9.0a"]
    result = runner.invoke(app, ["doctor", "--workspace", str(workspace.path)])
    assert result.exit_code == 0, result.stdout
    assert "none visible" in result.stdout and "CPU and CUDA kernels" in result.stdout


def test_toolkit_of_another_major_version_than_torch_fails(tmp_path: Path) -> None:
    env = {"CUDA_HOME": str(fake_toolkit(tmp_path / "cuda", "12.4")), "PATH": os.environ["PATH"]}
    check, toolkit = check_cuda_toolkit("13.2", env)
    assert check.status == "fail" and toolkit is None
    assert "13.2" in check.detail and "CUDA 13.x" in check.hint and "--cpu-only" in check.hint


def test_no_toolkit_anywhere_is_a_warning_cpu_builds_still_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(doctor, "find_cuda_toolkit", lambda env: None)
    check, toolkit = check_cuda_toolkit("13.2", {"PATH": str(tmp_path)})
    assert check.status == "warn" and toolkit is None and "CPU kernels only" in check.detail


def test_cpu_build_of_torch_needs_no_toolkit() -> None:
    check, toolkit = check_cuda_toolkit(None, {"CUDA_HOME": "/nowhere"})
    assert check.status == "ok" and toolkit is None


def test_missing_compiler_fails(tmp_path: Path) -> None:
    check = doctor.check_compiler({"CXX": "no-such-compiler-xyz", "PATH": str(tmp_path)})
    assert check.status == "fail" and "CXX" in check.hint


def test_ninja_missing_from_path_is_a_warning(tmp_path: Path) -> None:
    assert doctor.check_ninja({"PATH": str(tmp_path)}).status == "warn"


def test_architecture_list_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = Workspace.locate(tmp_path / "generated_ops")  # no workspace yet: opgen's own rules
    visible: list[str | None] = ["9.0"]
    monkeypatch.setattr(opgen_rules(), "visible_gpu_arch", lambda: visible[0])
    assert cuda_arch_list({"TORCH_CUDA_ARCH_LIST": "8.0;9.0"}, workspace) == ("8.0;9.0", "TORCH_CUDA_ARCH_LIST")
    # A visible Hopper GPU gets its arch-specific target (wgmma for the matmul's Hopper kernel).
    assert cuda_arch_list({}, workspace) == ("9.0a", "the visible GPU")
    visible[0] = "8.0"
    assert cuda_arch_list({}, workspace) == ("8.0", "the visible GPU")
    assert cuda_arch_list({"TORCH_CUDA_ARCH_LIST": "native"}, workspace)[0] == "8.0"
    visible[0] = None
    assert cuda_arch_list({}, workspace)[0] == "9.0a"
    new_op("relu", workspace=workspace)
    config = workspace.path / "_build_config.py"
    config.write_text(config.read_text().replace('DEFAULT_CUDA_ARCH = "9.0a"', 'DEFAULT_CUDA_ARCH = "8.6"'))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the workspace's rules see no GPU either
    assert cuda_arch_list({}, workspace) == ("8.6", "the workspace's DEFAULT_CUDA_ARCH (no GPU visible)")


def test_architecture_list_is_the_workspace_build_configs_answer(
    tmp_path: Path, rendered: Callable[..., Workspace]
) -> None:
    workspace = rendered(tmp_path / "generated_ops", "relu")
    env = {"TORCH_CUDA_ARCH_LIST": "8.0, 9.0"}
    assert cuda_arch_list(env, workspace) == ("8.0;9.0", "TORCH_CUDA_ARCH_LIST")  # as setup.py passes it on
    config = workspace.path / "_build_config.py"
    config.write_text(config.read_text() + '\n\ndef cuda_arch_choice(environ):\n    return "8.9;12.0", "mine"\n')
    assert cuda_arch_list(env, workspace) == ("8.9;12.0", "mine")


def test_architecture_the_toolkit_cannot_compile_fails(tmp_path: Path) -> None:
    home = fake_toolkit(tmp_path / "cuda", "13.0")
    toolkit = CudaToolkit(home, "13.0")
    assert check_architectures("8.0;9.0+PTX", "TORCH_CUDA_ARCH_LIST", toolkit).status == "ok"
    failed = check_architectures("7.0;9.0", "TORCH_CUDA_ARCH_LIST", toolkit)
    assert failed.status == "fail" and "7.0" in failed.detail and "TORCH_CUDA_ARCH_LIST" in failed.hint


def test_workspace_checks(tmp_path: Path) -> None:
    workspace = Workspace.locate(tmp_path / "generated_ops")
    assert doctor.check_workspace(workspace).status == "warn"
    new_op("relu", workspace=workspace)
    check = doctor.check_workspace(workspace)
    assert check.status == "ok" and "relu" in check.detail


def test_doctor_on_this_machine_runs() -> None:
    """Whatever the machine has, doctor reports every check and agrees with its exit code."""
    result = runner.invoke(app, ["doctor", "--json"])
    data = json.loads(result.stdout)
    names = [check["name"] for check in data["checks"]]
    assert names == [
        "python",
        "torch",
        "CUDA toolkit",
        "ninja",
        "git",
        "C++ compiler",
        "GPUs",
        "CUDA architectures",
        "workspace",
    ]
    assert result.exit_code == (0 if data["ok"] else 1)


def test_git_missing_is_a_warning_naming_update(tmp_path: Path) -> None:
    check = doctor.check_git({"PATH": str(tmp_path)})
    assert check.status == "warn" and "opgen update" in check.detail and check.hint == "install git"


def test_git_found_reports_its_version() -> None:
    check = doctor.check_git({"PATH": os.environ["PATH"]})
    assert check.status == "ok" and check.detail.startswith("git version")


def test_architectures_written_with_commas_are_checked_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "_supported_archs", lambda _toolkit: ["compute_80", "compute_90"])
    toolkit = CudaToolkit(Path("/nonexistent"), "13.0")
    assert check_architectures("8.0,9.0", "--arch", toolkit).status == "ok"
    assert "cannot compile for 7.0" in check_architectures("7.0,9.0", "--arch", toolkit).detail

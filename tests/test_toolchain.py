from __future__ import annotations

import stat
from pathlib import Path

import pytest

from opgen import toolchain
from opgen.errors import CudaToolkitNotFound
from opgen.toolchain import find_cuda_toolkit, is_toolkit


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def fake_toolkit(home: Path) -> Path:
    """A folder shaped like a CUDA toolkit whose nvcc answers --version and --dryrun."""
    executable(
        home / "bin" / "nvcc",
        "#!/bin/sh\n"
        'case "$*" in\n'
        f'  *--dryrun*) echo "#$ _HERE_={home}/bin" >&2 ;;\n'
        '  *--version*) echo "Cuda compilation tools, release 13.0, V13.0.88" ;;\n'
        "esac\n",
    )
    (home / "lib64").mkdir(parents=True)
    (home / "lib64" / "libcudart.so").write_text("")
    return home


@pytest.fixture(autouse=True)
def no_standard_locations(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(toolchain, "STANDARD_LOCATIONS", ())
    monkeypatch.setattr(toolchain, "versioned_locations", lambda: [])


def test_cuda_home_wins_and_reports_its_version(tmp_path: Path) -> None:
    home = fake_toolkit(tmp_path / "cuda-13.0")
    found = find_cuda_toolkit({"CUDA_HOME": str(home), "PATH": ""})
    assert found is not None and found.home == home.resolve() and found.version == "13.0"


def test_a_cuda_home_without_a_toolkit_is_an_error_naming_the_fix(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(CudaToolkitNotFound, match="holds no toolkit") as raised:
        find_cuda_toolkit({"CUDA_HOME": str(tmp_path / "empty"), "PATH": ""})
    assert "set CUDA_HOME" in raised.value.hint


def test_a_wrapper_nvcc_on_path_leads_to_the_real_toolkit(tmp_path: Path) -> None:
    home = fake_toolkit(tmp_path / "real" / "cuda-13.0")
    wrappers = tmp_path / "usr" / "local" / "bin"
    executable(wrappers / "nvcc", f'#!/bin/sh\nexec {home}/bin/nvcc "$@"\n')
    assert not is_toolkit(wrappers.parent)  # the folder that holds the wrapper is no toolkit
    found = find_cuda_toolkit({"PATH": str(wrappers)})
    assert found is not None and found.home == home.resolve()


def test_a_wrapper_to_nothing_is_an_error(tmp_path: Path) -> None:
    wrappers = tmp_path / "bin"
    executable(wrappers / "nvcc", "#!/bin/sh\nexit 1\n")
    with pytest.raises(CudaToolkitNotFound, match=r"no folder with bin/nvcc and lib64/libcudart\.so"):
        find_cuda_toolkit({"PATH": str(wrappers)})


def test_no_nvcc_anywhere_means_no_toolkit(tmp_path: Path) -> None:
    assert find_cuda_toolkit({"PATH": str(tmp_path)}) is None

"""Fixtures shared by opgen's tests, and how the suite avoids doing the same work twice.

pytest-xdist runs the suite in two processes (addopts: ``-n 2 --dist loadgroup``): tests go to
whichever process is free, except that the tests of an ``xdist_group`` stay in one process, in
file order. Tests marked ``heavy`` (seconds each, though not ``slow``) are handed out first, so
that both processes finish together. What many tests need is made once per run, not once per process: ``made_once``
builds it in the folder both processes share, under a file lock, and every later caller finds it
there.

- ``rendered(destination, *ops)``: a copy of a workspace holding ``ops``, each combination rendered
  once per run (copier takes about a second an op).
- ``shared_projects(name)``: the built workspaces of the slow tests (tests/shared_build.py; two,
  built at once by the two processes). Each op is compiled once per run, whatever module uses it.
  A module with ops of a new kind joins one with one line at its top, and takes the fixture::

      OPS = shared_build.join({"my_mlp": ["--kind", "mlp"]}, workspace="two", cuda=["my_mlp"], broken=BROKEN)

      @pytest.mark.slow
      def test_mlp_passes_its_generated_tests(shared_projects: Callable[[str], SharedProject]) -> None:
          result = opgen("test", *OPS, cwd=shared_projects("two").root)

  Tests must not change the shared workspace's ops (another process may be testing them): a
  deliberately broken stand-in joins as an op of its own (``broken=``, built as
  ``shared_build.broken_name(op)``), and a test that must edit or rebuild an op builds its own.
  (One test adds an op there: test_end_to_end's last, which builds an op that does not compile
  beside my_op, whose library it deletes; its module's ops are its own, and its ``xdist_group``
  runs it after the module's other tests.)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
import shared_build
from shared_build import SharedProject, made_once, run_folder
from workspace_commands import build_config_module

from opgen.render import TEMPLATE_ENV, new_op, template_dir
from opgen.rules import BuildRules
from opgen.workspace import Workspace


def _share_the_cores() -> None:
    """Give each of pytest-xdist's processes its share of the cores for torch's CPU threads.

    torch starts one OpenMP thread per core in every process, so two test processes (and the
    pytest runs and Python stand-ins they start, which inherit the setting) oversubscribe CI's two
    cores: OpenMP's waiting threads spin, which cost the fast tier a third of its CPU time. A
    thread count the user set is kept.
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers <= 1:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = str(max(1, cores // workers))
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, threads)
    if "torch" in sys.modules:  # imported already (a plugin): it read the variables at import
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


_share_the_cores()

PRECOMPILED_HEADERS_ENV = build_config_module(template_dir() / "workspace").PRECOMPILED_HEADERS_ENV


@pytest.fixture(scope="session", autouse=True)
def _one_folder_of_precompiled_headers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every build of the run keeps its precompiled torch headers in one folder, as
    $OPGEN_PCH_CACHE lets a user's workspaces do: the many small workspaces the tests build take the
    form the shared workspaces' builds made, instead of parsing the torch headers again (some 10 s
    a C++ file on CI's cores). A folder the user set is kept."""
    if os.environ.get(PRECOMPILED_HEADERS_ENV):
        yield
        return
    os.environ[PRECOMPILED_HEADERS_ENV] = str(run_folder(tmp_path_factory) / "pch")
    yield
    os.environ.pop(PRECOMPILED_HEADERS_ENV, None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``heavy`` (seconds each) first, the rest in file order.

    pytest-xdist hands tests out in this order (after the xdist groups, the largest first), so
    the long ones start early and the two processes end together, on short tests, instead of
    one running a long test while the other has finished. The sort is stable: an xdist group's
    tests keep their order.
    """
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


@pytest.fixture(scope="session")
def shared_projects(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], SharedProject]:
    """The slow tests' shared workspace of a name: every op the collected modules joined to it, built."""

    def project(workspace: str) -> SharedProject:
        build = partial(shared_build.render_and_build, workspace)
        return shared_build.read(made_once(tmp_path_factory, shared_build.key(workspace), build))

    return project


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """A workspace path in a fresh temporary folder (not rendered yet)."""
    monkeypatch.delenv("OPGEN_WORKSPACE", raising=False)
    return Workspace.locate(tmp_path / "ops_ws")


# An op to render: its name, or its name and new_op's keyword arguments.
OpToRender = str | tuple[str, dict[str, object]]


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Workspace]:
    """``rendered(destination, *ops)``: a fresh copy at ``destination`` of a workspace holding ``ops``.

    Each combination is rendered once per test run (made_once; copier takes about a second an op)
    and copied (milliseconds) for every test that asks for it, so tests still own, and may edit,
    their copy.
    """

    def workspace_with(destination: Path, *ops: OpToRender) -> Workspace:
        calls = [(op, {}) if isinstance(op, str) else op for op in ops]
        template = os.environ.get(TEMPLATE_ENV)  # a test's own template renders its own workspaces
        key = repr((template, destination.name, *((name, sorted(kwargs.items())) for name, kwargs in calls)))

        def render(folder: Path) -> None:
            for name, kwargs in calls:
                new_op(name, workspace=Workspace.locate(folder / destination.name), **kwargs)  # type: ignore[arg-type]

        name = "rendered-" + hashlib.sha256(key.encode()).hexdigest()[:12]
        source = made_once(tmp_path_factory, name, render) / destination.name
        shutil.copytree(source, destination, symlinks=True)
        return Workspace.locate(destination)

    return workspace_with


@pytest.fixture
def relu_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rendered: Callable[..., Workspace]) -> Workspace:
    """A fresh workspace named generated_ops holding relu (rendered, not built)."""
    monkeypatch.delenv("OPGEN_WORKSPACE", raising=False)
    return rendered(tmp_path / "generated_ops", "relu")


@pytest.fixture
def torch_built_with_cuda(monkeypatch: pytest.MonkeyPatch) -> str:
    """The workspace's build settings see a CUDA 13.0 build of torch, whatever torch is installed.

    Tests that mock a CUDA toolkit need this too: with a CPU build of torch the settings rightly
    compile CPU kernels only, since such a torch cannot load CUDA kernels.
    """
    from opgen import build

    load = build.workspace_rules

    def load_with_cuda_torch(workspace: Path) -> BuildRules | None:
        config = load(workspace)
        torch_build = getattr(config, "torch_build", None)  # None too for a test's broken file
        if torch_build is not None:
            version, _, git = torch_build()
            monkeypatch.setattr(config, "torch_build", lambda: (version, "13.0", git))
        return config

    monkeypatch.setattr(build, "workspace_rules", load_with_cuda_torch)
    return "13.0"

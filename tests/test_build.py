from __future__ import annotations

import pytest

from opgen import build
from opgen.build import build_env, default_jobs, first_compiler_error


def test_first_compiler_error_finds_gcc_and_nvcc_errors() -> None:
    gcc_log = (
        "[1/3] c++ -c a.cpp\nFAILED: a.o\nop/csrc/a.cpp:12:5: error: 'foo' was not declared\nninja: build stopped\n"
    )
    assert first_compiler_error(gcc_log) == "op/csrc/a.cpp:12:5: error: 'foo' was not declared"
    nvcc_log = 'op/csrc/a_cuda.cu(41): error: identifier "bar" is undefined\n1 error detected\n'
    assert first_compiler_error(nvcc_log) == 'op/csrc/a_cuda.cu(41): error: identifier "bar" is undefined'
    assert first_compiler_error("something odd\nlast words\n") == "last words"


def test_jobs_default_to_at_least_one() -> None:
    assert default_jobs() >= 1


def test_cpu_only_build_never_looks_for_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(env: object) -> None:
        raise AssertionError("looked for a toolkit")

    monkeypatch.setattr(build, "find_cuda_toolkit", explode)
    env, toolkit = build_env(["relu", "gelu"], cpu_only=True, jobs=3)
    assert toolkit is None and env["OPGEN_CUDA"] == "0"
    assert env["OPGEN_OPS"] == "relu,gelu" and env["MAX_JOBS"] == "3"

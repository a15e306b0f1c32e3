"""opgen.testing: the input helpers the generated tests share."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from opgen.testing import FLOAT_DTYPES, misaligned, non_contiguous, random_tensor


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(), (1,), (3, 5), (2, 0)], ids=str)
def test_misaligned_keeps_values_and_shape_off_a_16_byte_boundary(dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    tensor = random_tensor(shape, dtype, "cpu")
    moved = misaligned(tensor)
    assert moved.is_contiguous() and moved.shape == tensor.shape and torch.equal(moved, tensor)
    if tensor.numel():
        assert moved.data_ptr() % 16 != 0


def test_random_tensor_is_never_all_zero_and_has_both_signs() -> None:
    values = random_tensor((1000,), torch.float32, "cpu")
    assert (values > 0).any() and (values < 0).any()


def test_non_contiguous_keeps_values() -> None:
    tensor = random_tensor((4, 6), torch.float64, "cpu")
    view = non_contiguous(tensor)
    assert not view.is_contiguous() and torch.equal(view, tensor)


def test_what_generated_tests_import_loads_no_build_machinery() -> None:
    # A generated test imports opgen.testing (and its bench opgen.bench): neither may pull in the
    # build, rendering, the CLI or their libraries, which cost startup time in every test process.
    script = (
        "import sys, opgen.testing, opgen.testing.op_suite, opgen.testing.tensor_op_suite, opgen.bench\n"
        "heavy = {'opgen.build', 'opgen.cli', 'opgen.render', 'opgen.update', 'opgen.jit', 'rich', 'typer', 'copier'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
        "import opgen\n"
        "assert opgen.new_op.__module__ == 'opgen.render'  # still there, on first use\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"

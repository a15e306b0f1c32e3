"""opgen.testing: the input helpers the generated tests share."""

from __future__ import annotations

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

"""opgen.testing.distributed: the two-process DDP check, run over gloo on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from opgen.testing.distributed import check_ddp_training_step

pytestmark = pytest.mark.heavy  # each starts two processes


def test_an_op_that_matches_its_reference_passes(tmp_path: Path) -> None:
    check_ddp_training_step(
        op="torch.nn.functional:gelu",
        reference="torch.nn.functional:gelu",
        params={"approximate": "tanh"},
        device_type="cpu",
        scratch=tmp_path,
    )


def test_an_op_that_differs_from_its_reference_fails_naming_the_gradient(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"DDP gradient of 0\.weight differs from the reference"):
        check_ddp_training_step(
            op="torch.nn.functional:silu", reference="torch.nn.functional:gelu", params={}, device_type="cpu", scratch=tmp_path
        )


def test_an_op_of_two_inputs_takes_the_hidden_layer_in_two_parts(tmp_path: Path) -> None:
    check_ddp_training_step(
        op="torch:mul", reference="torch:mul", params={}, device_type="cpu", scratch=tmp_path, inputs=2
    )

from __future__ import annotations

import pytest

from opgen.errors import KindMismatch
from opgen.recipes import KNOWN_RECIPES, recipe_for


def test_known_names_get_their_recipe() -> None:
    assert recipe_for("softmax").name == "softmax"
    assert recipe_for("gelu").kind == "elementwise"
    assert set(KNOWN_RECIPES) >= {"softmax", "relu", "gelu"}


def test_other_names_get_a_skeleton_of_their_kind() -> None:
    assert recipe_for("my_op").name == "elementwise"
    assert recipe_for("my_op", "rowwise").name == "rowwise"
    assert recipe_for("my_op").skeleton


def test_a_kind_that_contradicts_a_known_recipe_is_refused() -> None:
    with pytest.raises(KindMismatch, match="known rowwise op"):
        recipe_for("softmax", "elementwise")
    assert recipe_for("softmax", "rowwise").name == "softmax"

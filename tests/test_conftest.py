"""The suite's own helpers say what they did when a dataset is missing."""

from __future__ import annotations

import os

import pytest

from tests.conftest import DATA_DIR, data_path


def test_a_missing_dataset_names_the_path_looked_at_and_never_repeats_the_setting():
    with pytest.raises(pytest.skip.Exception) as skipped:
        data_path("no-such-dataset", "x.json")
    reason = str(skipped.value)
    assert str(DATA_DIR / "no-such-dataset" / "x.json") in reason and "absent" in reason
    if "HUB_DATA_DIR" in os.environ:  # already set: telling to set it is no help
        assert "set HUB_DATA_DIR" not in reason
    else:
        assert "set HUB_DATA_DIR" in reason

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


def test_a_hanging_test_fails_at_its_timeout_instead_of_stalling_the_run(tmp_path, request):
    import subprocess
    import sys
    import tomllib
    from pathlib import Path

    config = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert config["tool"]["pytest"]["ini_options"]["timeout"] <= 60  # every test, unless it sets its own
    hang = tmp_path / "test_hang.py"
    hang.write_text("import time\n\ndef test_hangs():\n    while True:\n        time.sleep(0.05)\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "timeout=2", str(hang)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1 and "Timeout" in done.stdout, done.stdout[-500:]

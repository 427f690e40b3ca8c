"""The fault suite finds the loopback fakes from the installed command too, not only under pytest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_openai_fake_is_found_when_tests_is_not_on_the_path(tmp_path):
    # As `agents-hub eval faults` runs: the script's folder first on sys.path, not the checkout.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = (
        f"import sys; sys.path[:] = [p for p in sys.path if p not in ('', {str(ROOT)!r})]\n"
        "from scopehub.eval.faults._harness import fake_openai\n"
        "print(fake_openai().__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "tests.fakes.openai_server"

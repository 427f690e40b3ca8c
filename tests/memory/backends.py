"""The memory backends the conformance suite runs against.

Each entry opens a fresh, empty store for one test, given the test's ``request`` (to
ask for other fixtures) and its ``tmp_path``. SQLite is always here; PostgreSQL gets a
new, migrated database on the session's server (the ``postgres_store_url`` fixture in
tests/conftest.py), and its tests skip, saying why, where no server can be started.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from scopehub.memory import MemoryStore, open_store

Opener = Callable[[pytest.FixtureRequest, Path], MemoryStore]

BACKENDS: dict[str, Opener] = {
    "sqlite": lambda request, tmp_path: open_store(tmp_path / "conformance.db"),
    "postgres": lambda request, tmp_path: open_store(request.getfixturevalue("postgres_store_url")),
}

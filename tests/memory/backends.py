"""The memory backends the conformance suite runs against.

Each entry opens a fresh, empty store for one test. SQLite is always here; a backend
that needs a server (PostgreSQL) adds itself when one can be started, and otherwise
its tests skip saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from scopehub.memory import MemoryStore, open_store

BACKENDS: dict[str, Callable[[Path], MemoryStore]] = {
    "sqlite": lambda tmp_path: open_store(tmp_path / "conformance.db"),
}

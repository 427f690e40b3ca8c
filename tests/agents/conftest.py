"""Fixtures for the agent tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scopehub.memory import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A real store in a temporary file."""
    db = Store(tmp_path / "hub.db")
    yield db
    db.close()

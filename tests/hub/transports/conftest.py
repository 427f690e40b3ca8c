"""Fixtures for the maildir tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from scopehub.memory import Store
from tests.hub.transports.helpers import StoreHub


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "maildir"


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "hub.db") as opened:
        yield opened


@pytest.fixture
def hub(store: Store) -> StoreHub:
    return StoreHub(store)

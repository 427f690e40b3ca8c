"""Archive search tests: the store fixture, on SQLite in memory or (for tests marked ``on_both_backends``) a fresh PostgreSQL database."""

from __future__ import annotations

import pytest

from scopehub.memory import Store
from tests.memory.search.helpers import open_backend


@pytest.fixture
def store(request: pytest.FixtureRequest) -> Store:
    """SQLite in memory; a fresh PostgreSQL database for tests marked ``on_both_backends``."""
    opened = open_backend(request, getattr(request, "param", "sqlite"))
    with opened:
        yield opened

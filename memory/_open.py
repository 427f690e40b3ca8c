"""One way to open the store, for the CLI, the transports and the evaluation alike.

``HUB_DB`` (or ``--db``) is a SQLite file path or a ``sqlite:///path`` URL. A URL of
any other scheme must not be mistaken for a file name (``postgresql://...`` once made
a folder called ``postgresql:``): it stops with a clear error naming what is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

from ._store import Store
from .errors import StoreError

__all__ = ["open_store", "store_location"]

_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$")


def store_location(target: str | Path) -> tuple[str, str]:
    """``(backend, location)`` for a database setting: ``("sqlite", path)`` or the URL's scheme."""
    text = str(target)
    match = _URL.match(text)
    if match is None:
        return "sqlite", text
    scheme = match["scheme"].lower()
    if scheme == "sqlite":
        # sqlite:///relative.db and sqlite:////absolute.db, as SQLAlchemy spells them
        rest = match["rest"]
        return "sqlite", rest[1:] if rest.startswith("/") else rest
    return scheme, text


def open_store(target: str | Path, *, must_exist: bool = False) -> Store:
    """Open the store named by ``target``.

    ``must_exist`` is for read-only commands: a missing SQLite file is an error rather
    than a new empty database.
    """
    backend, location = store_location(target)
    if backend == "sqlite":
        if must_exist and location != ":memory:" and not Path(location).exists():
            raise StoreError(f"no database at {location} (set HUB_DB or --db, or import a chat log first)")
        return Store(location)
    if backend in ("postgresql", "postgres"):
        raise StoreError("PostgreSQL is not supported by this release; use a SQLite file for HUB_DB")
    raise StoreError(f"unknown database URL scheme {backend!r} in HUB_DB: use a SQLite file path or sqlite:///path")

"""One way to open the store, for the CLI, the transports and the evaluation alike.

``HUB_DB`` (or ``--db``) is a SQLite file path, a ``sqlite:///path`` URL, or a
``postgresql://`` URL (several workers on one database). A URL is never mistaken for a
file name (``postgresql://...`` once made a folder called ``postgresql:``): an unknown
scheme or a missing driver stops with a clear error naming what is missing.
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


def open_store(
    target: str | Path,
    *,
    must_exist: bool = False,
    pg_erase_vacuum: str | None = None,
    pg_lock_timeout: float | None = None,
) -> Store:
    """Open the store named by ``target``: a SQLite file, or a PostgreSQL URL.

    ``must_exist`` is for read-only commands: a missing SQLite file is an error rather
    than a new empty database. ``postgresql://`` (or ``postgres://``) needs the
    ``postgres`` extra; without it the error says what to install. ``pg_erase_vacuum``
    ("plain" or "full") is how a PostgreSQL store vacuums after an erase; ``pg_lock_timeout``
    how many seconds its statements wait for a locked table or row (None: the store's default).
    """
    backend, location = store_location(target)
    if backend == "sqlite":
        if must_exist and location != ":memory:" and not Path(location).exists():
            raise StoreError(f"no database at {location} (set HUB_DB or --db, or import a chat log first)")
        return Store(location)
    if backend in ("postgresql", "postgres"):
        try:
            from .postgres import PostgresStore
        except ImportError as exc:
            raise StoreError(
                f"HUB_DB is a PostgreSQL URL but its driver is not installed ({exc.name or exc}):"
                " pip install 'scopehub[postgres]'"
            ) from exc
        return PostgresStore(location, erase_vacuum=pg_erase_vacuum, lock_timeout=pg_lock_timeout)
    raise StoreError(
        f"unknown database URL scheme {backend!r} in HUB_DB: use a SQLite file path, sqlite:///path"
        " or postgresql://user:password@host/dbname"
    )

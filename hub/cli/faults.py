"""Faults a person is told in one line, never with a traceback: the database, a model, a file.

:func:`fault_line` says what went wrong in one line, or None for anything else (a bug,
which keeps its traceback). :class:`FaultLineFormatter` applies it to log records: a
fail-open path that logs the fault it survived (``log.exception``) prints one line, not a
stack, unless the log level is DEBUG.
"""

from __future__ import annotations

import logging

__all__ = ["FaultLineFormatter", "fault_line"]


def fault_line(exc: BaseException) -> str | None:
    """One line for a database, model or file fault (None: not one, let it show as the bug it is)."""
    import sqlite3

    from scopehub.hub.errors import HubError
    from scopehub.memory import StoreError

    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, sqlite3.Error):
        if "locked" in text or "busy" in text:
            return f"the database is busy ({text}): another process holds its write lock; try again in a moment"
        return f"database: {text}"
    if getattr(exc, "sqlstate", None) == "55P03":  # lock_not_available: HUB_PG_LOCK_TIMEOUT ran out
        return (
            f"PostgreSQL is busy ({text.split(' LINE ')[0]}): another session holds a table or row this needed"
            " locked for longer than HUB_PG_LOCK_TIMEOUT; try again in a moment"
        )
    if any(kind.__module__.split(".")[0] in ("psycopg", "psycopg_pool") for kind in type(exc).__mro__):
        return f"PostgreSQL: {text}"
    if isinstance(exc, (HubError, StoreError)):
        return text
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        return f"{exc.strerror or text}{where}"
    return None


class FaultLineFormatter(logging.Formatter):
    """A log record whose exception is a fault (:func:`fault_line`) is one line, the fault
    at its end, instead of the message and a traceback; other exceptions (bugs), and every
    one at DEBUG, keep their traceback."""

    def format(self, record: logging.LogRecord) -> str:
        exc = record.exc_info[1] if record.exc_info else None
        line = fault_line(exc) if exc is not None else None
        if line is None or logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
            return super().format(record)
        brief = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
        brief.msg, brief.args = f"{record.getMessage()} ({type(exc).__name__}: {line})", None
        return super().format(brief)

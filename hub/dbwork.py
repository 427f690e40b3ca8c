"""Store work off the event loop: a small, bounded pool of threads, one store session per step.

The store's interface is synchronous (every record function, tool and the conformance
suite use it as it is). Where its calls wait on the network (PostgreSQL), a step of
store work runs in one of :data:`DB_THREADS` threads, inside one store session (one
pooled connection for the whole step, not one per call), so the event loop keeps serving
other chats meanwhile. On SQLite the work runs where it is: its calls never wait on the
network and this process is the single writer, so a thread hop would only add CPU and
latency. Chosen over psycopg's async API because it leaves the store protocol untouched;
measured with ``agents-hub bench hub --db-threads on|off`` and ``bench workers``.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any, TypeVar

__all__ = ["DB_THREADS", "db_executor", "in_db_thread", "offloads", "use_db_threads"]

_T = TypeVar("_T")

# Threads that run the sync part of turns, for every hub of the process (HUB_DB_THREADS,
# see use_db_threads). The CPU part holds the GIL anyway; the threads overlap database
# round trips, and each holds a pooled connection while it runs a step: the default leaves
# two of PostgreSQL's 10 pooled connections to the calls made on the event loop itself.
# 4 threads against 32 answer slots queued turns behind each other's round trips
# (bench workers, one worker: 32 msg/s); 8 with 64 slots keep the database busy instead.
DB_THREADS = 8

_threads = DB_THREADS
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def use_db_threads(threads: int) -> int:
    """Size the process's thread pool (``0``: the default, :data:`DB_THREADS`); returns the size.

    Called when a hub is built from its settings (HUB_DB_THREADS); a pool already made with
    another size is replaced (its threads finish what they run)."""
    global _threads, _executor
    size = int(threads) if threads and threads > 0 else DB_THREADS
    with _executor_lock:
        if _executor is not None and _threads != size:  # the pool was made with _threads
            _executor.shutdown(wait=False)
            _executor = None
        _threads = size
    return size


def db_executor() -> ThreadPoolExecutor:
    """The process's bounded thread pool for the store work of turns (made on first use)."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=_threads, thread_name_prefix="hub-db")
        return _executor


def offloads(store: Any) -> bool:
    """Whether store work leaves the event loop: yes for a database over the network
    (PostgreSQL); no for SQLite, where a call never waits on the network and this process
    is the single writer (a thread hop would only add CPU and latency)."""
    return not getattr(getattr(store, "dialect", None), "is_sqlite", True)


async def in_db_thread(store: Any, work: Callable[..., _T], *args: Any, threads: bool | None = None) -> _T:
    """``work(*args)`` inside one store session: in the database thread pool when the store
    :func:`offloads` (or ``threads`` says so), else right here.

    A cancelled caller still waits for the thread to finish its step (milliseconds): a
    thread cannot be stopped, and what the caller holds (a scope's lock) must outlast it.
    """
    if not (threads if threads is not None else offloads(store)):
        return _in_session(store, work, *args)
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(db_executor(), contextvars.copy_context().run, _in_session, store, work, *args)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait([future])
        if not future.cancelled():
            future.exception()  # seen: no "exception was never retrieved" later
        raise


def _in_session(store: Any, work: Callable[..., _T], *args: Any) -> _T:
    session = getattr(store, "session", None)
    with session() if session is not None else nullcontext():
        return work(*args)



"""The database threads (hub/dbwork.py): a step's result or failure comes back to its caller,
a cancelled caller waits for its step, the pool is bounded and sized by HUB_DB_THREADS."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from scopehub.hub import dbwork

REQUEST = contextvars.ContextVar("request", default="none")


class Sessions:
    """A store stand-in that counts the sessions its steps run in."""

    def __init__(self) -> None:
        self.opened = 0

    def session(self):
        from contextlib import contextmanager

        @contextmanager
        def one():
            self.opened += 1
            yield

        return one()


def test_a_step_runs_in_a_database_thread_in_one_session_and_hands_back_its_result_or_failure():
    store = Sessions()

    async def main() -> None:
        REQUEST.set("turn 7")
        loop_thread = threading.get_ident()
        ran = await dbwork.in_db_thread(store, lambda: (threading.get_ident(), threading.current_thread().name, REQUEST.get()), threads=True)
        assert ran[0] != loop_thread and ran[1].startswith("hub-db") and ran[2] == "turn 7"  # the caller's context goes along
        with pytest.raises(ZeroDivisionError):
            await dbwork.in_db_thread(store, lambda: 1 / 0, threads=True)
        assert await dbwork.in_db_thread(store, lambda a, b: a + b, 2, 3, threads=False) == 5  # here, on the loop
        assert store.opened == 3

    asyncio.run(main())


def test_a_cancelled_caller_waits_for_its_step_to_finish():
    """A thread cannot be stopped: what the caller holds (a scope's lock) must outlast it."""
    finished: list[float] = []

    def slow() -> None:
        time.sleep(0.3)
        finished.append(time.monotonic())

    async def main() -> float:
        task = asyncio.create_task(dbwork.in_db_thread(None, slow, threads=True))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic()

    returned = asyncio.run(main())
    assert finished and finished[0] <= returned


def test_the_pool_runs_at_most_its_size_at_once_and_is_resized():
    running, most = 0, 0
    lock = threading.Lock()

    def step() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1

    async def main() -> None:
        await asyncio.gather(*(dbwork.in_db_thread(None, step, threads=True) for _ in range(9)))

    try:
        assert dbwork.use_db_threads(3) == 3
        asyncio.run(main())
        assert most == 3
        most = 0
        assert dbwork.use_db_threads(0) == dbwork.DB_THREADS
        asyncio.run(main())
        assert most == min(9, dbwork.DB_THREADS)
    finally:
        dbwork.use_db_threads(0)

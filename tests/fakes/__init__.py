"""Loopback fakes for the test suite: an OpenAI-compatible server and a Telegram Bot API.

Both run an aiohttp app on 127.0.0.1 (free port) in a background thread with its own
event loop, so the same object serves synchronous tests and async code::

    from tests.fakes import FakeBotAPI, FakeOpenAI

    with FakeOpenAI() as llm, FakeBotAPI() as tg:
        ...  # llm.base_url, tg.base_url

`LoopbackServer` holds the shared lifecycle; subclasses only build the aiohttp app.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Self, TypeVar

from aiohttp import web

if TYPE_CHECKING:
    from tests.fakes.bot_api import FakeBotAPI
    from tests.fakes.openai_server import FakeOpenAI

__all__ = ["FakeBotAPI", "FakeOpenAI", "LoopbackServer"]

T = TypeVar("T")


class LoopbackServer:
    """An aiohttp app served on 127.0.0.1 from a daemon thread with its own event loop.

    Use as a context manager or call `start()` / `stop()`. `stop()` is idempotent and
    returns quickly: handlers are cancelled when their client goes away
    (``handler_cancellation=True``) and open connections get `shutdown_timeout` seconds.
    """

    host = "127.0.0.1"

    def __init__(self, *, port: int = 0, shutdown_timeout: float = 0.25) -> None:
        self._requested_port = port
        self._shutdown_timeout = shutdown_timeout
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._lock = threading.RLock()
        self._closing = False

    # -- subclass hooks ---------------------------------------------------------------

    def build_app(self) -> web.Application:
        """Return the aiohttp application to serve (called in the server thread)."""
        raise NotImplementedError

    def on_loop_started(self) -> None:
        """Called in the server thread once the loop runs (create asyncio primitives here)."""

    # -- lifecycle --------------------------------------------------------------------

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        if self.port is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """True between a successful `start()` and `stop()`."""
        return self._thread is not None and self._thread.is_alive() and self._ready.is_set()

    def start(self, timeout: float = 5.0) -> Self:
        """Start serving; returns once the port is bound."""
        if self._thread is not None:
            raise RuntimeError(f"{type(self).__name__} already started")
        self._closing = False
        self._ready.clear()
        self._startup_error = None
        self._thread = threading.Thread(
            target=self._run, name=f"{type(self).__name__}-loop", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError(f"{type(self).__name__} did not start within {timeout} s")
        if self._startup_error is not None:
            self._thread.join(timeout)
            self._thread = None
            raise RuntimeError(f"{type(self).__name__} failed to start") from self._startup_error
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and join the thread (idempotent)."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        self._closing = True
        if loop.is_running():
            self.wake()
            future = asyncio.run_coroutine_threadsafe(self._cleanup(), loop)
            # Best effort: the loop is stopped below whatever happens here.
            with contextlib.suppress(Exception):
                future.result(timeout)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        self._thread = None
        self._loop = None
        self.port = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        # Joining the thread blocks briefly; keep the caller's loop responsive meanwhile.
        await asyncio.to_thread(self.stop)

    # -- helpers for subclasses and tests ---------------------------------------------

    def call_in_loop(self, coro: Coroutine[Any, Any, T], timeout: float = 5.0) -> T:
        """Run a coroutine on the server loop from another thread and return its result."""
        if self._loop is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def wake(self) -> None:
        """Thread-safe: wake long-polling handlers (they re-check their condition)."""
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(self._on_wake)

    def _on_wake(self) -> None:
        """Called in the loop by `wake()`; subclasses set their asyncio events here."""

    # -- internals --------------------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._startup())
        except BaseException as exc:  # reported to start()
            self._startup_error = exc
            self._ready.set()
            loop.close()
            self._loop = None
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    async def _startup(self) -> None:
        self.on_loop_started()
        runner = web.AppRunner(
            self.build_app(),
            handler_cancellation=True,
            shutdown_timeout=self._shutdown_timeout,
            access_log=None,
        )
        await runner.setup()
        site = web.TCPSite(
            runner, self.host, self._requested_port, shutdown_timeout=self._shutdown_timeout
        )
        await site.start()
        self._runner = runner
        # Port 0 picks a free port; read back the one actually bound.
        self.port = int(runner.addresses[0][1])

    async def _cleanup(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def __getattr__(name: str) -> Any:
    # Lazy re-exports: the submodules import LoopbackServer from here.
    if name == "FakeOpenAI":
        from tests.fakes.openai_server import FakeOpenAI

        return FakeOpenAI
    if name == "FakeBotAPI":
        from tests.fakes.bot_api import FakeBotAPI

        return FakeBotAPI
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The direct route to an OpenAI-compatible server: ``openai/<name>`` with an ``api_base``.

For that model string litellm's generic ``openai/`` provider sends the request as it is
to ``<api_base>/chat/completions`` and hands back the answer; on the way it builds a
logging payload and prices every call (for a model its cost map does not know, about ten
failed look-ups a call), then the openai SDK and httpx add their own layers. Measured
against the loopback fake here: 5-7 ms of CPU a call through litellm, 0.2-0.5 ms for the
same exchange over one kept-alive aiohttp connection. A self-hosted server (vLLM,
llama.cpp's server, LM Studio, Ollama's ``/v1``) is exactly this case, and the hub makes
one to three such calls a message; every other provider still goes through litellm.

The request body is what litellm sends for these calls (``model`` without the ``openai/``
prefix, ``messages``, and ``tools`` / ``response_format`` when given), and the answer is
read as litellm reads an OpenAI answer, so the reply and the call's record are the same
either way. Failures come back as the adapter's retry logic expects them: an HTTP status
on :class:`ProviderError` (with ``Retry-After``), a timeout as ``TimeoutError``, a lost
connection or an answer that is not a completion as ``ModelUnavailable``.

The connections live on a small event loop of their own in a daemon thread, so they are
kept alive across calls whatever loop the caller runs on (each ``asyncio.run`` of a CLI
command, python-telegram-bot's loop) and never left unclosed by a loop that ends.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from scopehub.hub.errors import ModelUnavailable

__all__ = ["ProviderError", "is_openai_compatible", "post_chat", "stream_chat"]

_PREFIX = "openai/"


def is_openai_compatible(model: str, api_base: str | None) -> bool:
    """Whether ``model`` at ``api_base`` is litellm's generic OpenAI-compatible provider."""
    return bool(api_base) and model.startswith(_PREFIX) and len(model) > len(_PREFIX)


class _Headers(dict):
    """Response headers by lower-case name (what ``_retry_after`` reads)."""

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)


class _Response:
    def __init__(self, status: int, headers: Mapping[str, str]) -> None:
        self.status_code = status
        self.headers = _Headers({k.lower(): v for k, v in headers.items()})


class ProviderError(Exception):
    """The server answered with an error status (``status_code``; ``response.headers``)."""

    def __init__(self, status: int, headers: Mapping[str, str], body: str) -> None:
        message = body
        try:
            error = json.loads(body).get("error")
            if isinstance(error, dict) and error.get("message"):
                message = str(error["message"])
            elif isinstance(error, str):
                message = error
        except (ValueError, AttributeError):
            pass
        super().__init__(f"HTTP {status}: {message.strip()[:500]}")
        self.status_code = status
        self.response = _Response(status, headers)


class _Connections:
    """One aiohttp session, on an event loop of its own in a daemon thread (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0
        self._session: Any = None

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # a forked child starts its own
                self._pid = os.getpid()
                self._session = None
                ready = threading.Event()
                loop = asyncio.new_event_loop()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    ready.set()
                    loop.run_forever()

                threading.Thread(target=run, name="model-http", daemon=True).start()
                ready.wait()
                self._loop = loop
                atexit.register(self.close)
            return self._loop

    def close(self, timeout: float = 2.0) -> None:
        """Close the connections and stop their loop (at exit: an unclosed session would warn)."""
        with self._lock:
            if self._pid != os.getpid():
                return  # a forked child: the loop's thread is the parent's
            loop, session, self._loop, self._session = self._loop, self._session, None, None
        if loop is None or loop.is_closed():
            return
        if session is not None:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(session.close(), loop).result(timeout)
        loop.call_soon_threadsafe(loop.stop)

    async def post(self, url: str, headers: dict[str, str], body: bytes, timeout: float) -> tuple[int, dict[str, str], bytes]:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64, enable_cleanup_closed=True))
        try:
            async with self._session.post(url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                return response.status, dict(response.headers), await response.read()
        except aiohttp.ClientError as exc:
            raise ModelUnavailable(f"cannot reach {url}: {type(exc).__name__}: {exc}") from exc

    async def stream(
        self, url: str, headers: dict[str, str], body: bytes, timeout: float, deliver: Callable[[bytes | None], None]
    ) -> tuple[int, dict[str, str], bytes]:
        """POST ``body`` and hand each server-sent event's ``data`` to ``deliver`` (None at the end).

        Returns the status and headers, with the body when the status is an error (nothing delivered then).
        """
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64, enable_cleanup_closed=True))
        try:
            async with self._session.post(url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                if response.status >= 400:
                    return response.status, dict(response.headers), await response.read()
                async for line in response.content:  # one line at a time, however the bytes arrive
                    if line.startswith(b"data:"):
                        data = line[5:].strip()
                        if data == b"[DONE]":
                            break
                        if data:
                            deliver(data)
                return response.status, dict(response.headers), b""
        except aiohttp.ClientError as exc:
            raise ModelUnavailable(f"cannot reach {url}: {type(exc).__name__}: {exc}") from exc
        finally:
            deliver(None)


_CONNECTIONS = _Connections()


def _request(api_base: str, api_key: str, body: dict[str, Any]) -> tuple[str, dict[str, str], bytes]:
    url = api_base.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"}
    return url, headers, json.dumps(body, ensure_ascii=False).encode()


async def post_chat(
    api_base: str, api_key: str, body: dict[str, Any], *, timeout: float
) -> dict[str, Any]:
    """POST ``body`` to ``<api_base>/chat/completions``; the answer's JSON.

    Raises :class:`ProviderError` for an error status, ``TimeoutError`` after ``timeout``
    seconds, ``ModelUnavailable`` for a lost connection or an answer that is no completion.
    """
    url, headers, data = _request(api_base, api_key, body)
    future = asyncio.run_coroutine_threadsafe(_CONNECTIONS.post(url, headers, data, timeout), _CONNECTIONS.loop())
    try:
        status, response_headers, raw = await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        future.cancel()  # the request stops in the connections' loop too
        raise
    if status >= 400:
        raise ProviderError(status, response_headers, raw.decode(errors="replace"))
    try:
        answer = json.loads(raw)
    except ValueError as exc:
        raise ModelUnavailable(f"{url} answered {status} with a body that is not JSON: {exc}") from exc
    if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list) or not answer["choices"]:
        raise ModelUnavailable(f"{url} answered with no 'choices'")
    return answer


async def stream_chat(
    api_base: str, api_key: str, body: dict[str, Any], *, timeout: float, on_chunk: Callable[[dict[str, Any]], Awaitable[None]]
) -> None:
    """POST ``body`` (with ``stream: true``) to ``<api_base>/chat/completions``; ``on_chunk`` gets
    each chunk's JSON, in order, on the caller's loop.

    Failures as for :func:`post_chat`; a chunk that is not a JSON object is ``ModelUnavailable``.
    """
    url, headers, data = _request(api_base, api_key, body)
    loop = asyncio.get_running_loop()
    arrived: asyncio.Queue[bytes | None] = asyncio.Queue()

    def deliver(item: bytes | None) -> None:  # runs on the connections' loop
        loop.call_soon_threadsafe(arrived.put_nowait, item)

    future = asyncio.run_coroutine_threadsafe(_CONNECTIONS.stream(url, headers, data, timeout, deliver), _CONNECTIONS.loop())
    try:
        while (item := await arrived.get()) is not None:
            try:
                chunk = json.loads(item)
            except ValueError as exc:
                raise ModelUnavailable(f"{url} streamed a chunk that is not JSON: {exc}") from exc
            if not isinstance(chunk, dict):
                raise ModelUnavailable(f"{url} streamed a chunk that is not an object")
            await on_chunk(chunk)
        status, response_headers, raw = await asyncio.wrap_future(future)
    except BaseException:
        future.cancel()  # the request stops in the connections' loop too
        raise
    if status >= 400:
        raise ProviderError(status, response_headers, raw.decode(errors="replace"))

"""The loopback server: OpenAI's chat completions, embeddings and transcriptions, and Anthropic's messages, answered from a script."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import web

from tests.fakes import LoopbackServer

from ._cache import PromptCache, _anthropic_units, _openai_units
from ._steps import (
    _ERROR_TYPES,
    Delay,
    Error,
    Malformed,
    Raw,
    Responder,
    ScriptItem,
    Step,
    Text,
    ToolCalls,
    _as_step,
    _default_responder,
    _rough_tokens,
)

# -- server ---------------------------------------------------------------------------


class FakeOpenAI(LoopbackServer):
    """A scripted OpenAI-compatible server on 127.0.0.1; see the module docstring."""

    def __init__(
        self,
        *,
        default: Responder | None = None,
        embedding_dim: int = 8,
        port: int = 0,
        prompt_cache: bool = False,
        cache_min_tokens: int = 0,
        stream_chunk_delay: float = 0.0,
        transcribe: Callable[[str, bytes, dict[str, str]], str | Step] | None = None,
    ) -> None:
        super().__init__(port=port)
        self.stream_chunk_delay = stream_chunk_delay
        self.transcribe = transcribe or (lambda name, content, fields: f"transcript of {name}")
        self._transcriptions: list[dict[str, Any]] = []
        self.default: Responder = default or _default_responder
        self.embedding_dim = embedding_dim
        # A simulated provider prompt cache (see PromptCache); off: usage says nothing about it.
        self.prompt_cache = PromptCache(cache_min_tokens) if prompt_cache else None
        self._script: deque[ScriptItem] = deque()
        self._requests: list[dict[str, Any]] = []
        self._embedding_requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._cond = threading.Condition(self._lock)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` - pass as litellm's ``api_base``."""
        return f"{self.root_url}/v1"

    # -- test-side API ------------------------------------------------------------

    def script(self, *steps: ScriptItem) -> None:
        """Append steps (a `Step`, a plain string for text, or a responder callable)."""
        with self._lock:
            self._script.extend(steps)

    @property
    def remaining(self) -> int:
        """Number of scripted steps not consumed yet."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A snapshot of every chat-completions request body received, in order."""
        with self._lock:
            return list(self._requests)

    @property
    def transcription_requests(self) -> list[dict[str, Any]]:
        """Every transcription request: ``{"filename", "content", "fields"}``, in order."""
        with self._lock:
            return list(self._transcriptions)

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        """A snapshot of every embeddings request body received, in order."""
        with self._lock:
            return list(self._embedding_requests)

    @property
    def last_request(self) -> dict[str, Any]:
        """The most recent chat request body (AssertionError when there is none)."""
        with self._lock:
            if not self._requests:
                raise AssertionError("the fake model received no request")
            return self._requests[-1]

    def wait_requests(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Block until at least `count` chat requests arrived; return them."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= count, timeout):
                raise AssertionError(
                    f"expected {count} model requests within {timeout} s, got {len(self._requests)}"
                )
            return list(self._requests)

    def reset(self) -> None:
        """Forget recorded requests and any unconsumed script."""
        with self._lock:
            self._script.clear()
            self._requests.clear()
            self._embedding_requests.clear()

    # -- app ----------------------------------------------------------------------

    def build_app(self) -> web.Application:
        app = web.Application()
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/chat/completions", self._chat)
            app.router.add_post(f"{prefix}/embeddings", self._embeddings)
        app.router.add_post("/v1/messages", self._anthropic_messages)
        app.router.add_post("/v1/audio/transcriptions", self._transcription)
        return app

    async def _transcription(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            return _error_response(400, "a file is required")
        content = upload.file.read()
        fields = {k: str(v) for k, v in form.items() if k != "file"}
        with self._cond:
            self._transcriptions.append({"filename": upload.filename, "content": content, "fields": fields})
            self._cond.notify_all()
        answer = self.transcribe(upload.filename or "audio", content, fields)
        if not isinstance(answer, str):
            while isinstance(answer, Delay):
                await asyncio.sleep(answer.seconds)
                answer = answer.then or Text("")
            if isinstance(answer, Text):
                answer = answer.content
            else:
                return await self._respond(answer, {})
        return web.json_response({"text": answer})

    async def _read_json(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error_response(400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return _error_response(400, "request body must be a JSON object")
        return body

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._read_json(request)
        if isinstance(body, web.Response):
            return body
        with self._cond:
            self._requests.append(body)
            self._cond.notify_all()
            item = self._script.popleft() if self._script else self.default
        step = self._resolve(item, body)
        if body.get("stream"):
            return await self._stream(step, body, request)
        return await self._respond(step, body)

    async def _stream(self, step: Step, body: dict[str, Any], request: web.Request) -> web.StreamResponse:
        """A completion as server-sent events (``stream: true``)."""
        while isinstance(step, Delay):
            await asyncio.sleep(step.seconds)
            step = step.then or Text("ok")
        if not isinstance(step, Text | ToolCalls):
            return await self._respond(step, body)
        whole = self._completion(step, body)
        base = {k: whole[k] for k in ("id", "created", "model", "system_fingerprint")} | {"object": "chat.completion.chunk"}
        message = whole["choices"][0]["message"]
        deltas: list[dict[str, Any]] = []
        if isinstance(step, Text):
            words = step.content.split(" ")
            pieces = [" ".join(words[i : i + 3]) + (" " if i + 3 < len(words) else "") for i in range(0, len(words), 3)]
            deltas = [{"role": "assistant", "content": piece} for piece in pieces] or [{"role": "assistant", "content": ""}]
        else:
            calls = [dict(call, index=i) for i, call in enumerate(message["tool_calls"])]
            deltas = [{"role": "assistant", "content": message.get("content"), "tool_calls": calls}]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)

        async def send(chunk: dict[str, Any]) -> None:
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        for index, delta in enumerate(deltas):
            if index and self.stream_chunk_delay:
                await asyncio.sleep(self.stream_chunk_delay)
            await send(base | {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]})
        finish = whole["choices"][0]["finish_reason"]
        await send(base | {"choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            await send(base | {"choices": [], "usage": whole["usage"]})
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    def _resolve(self, item: ScriptItem | None, body: dict[str, Any]) -> Step:
        if callable(item):
            item = item(body)
        if item is None:
            return Text("ok")
        return _as_step(item)

    async def _respond(self, step: Step, body: dict[str, Any]) -> web.StreamResponse:
        if isinstance(step, Delay):
            await asyncio.sleep(step.seconds)
            return await self._respond(step.then or Text("ok"), body)
        if isinstance(step, Error):
            payload = step.body
            if payload is None:
                payload = {
                    "error": {
                        "message": f"fake error {step.status}",
                        "type": _ERROR_TYPES.get(step.status, "api_error"),
                        "param": None,
                        "code": str(step.status),
                    }
                }
            data = payload if isinstance(payload, str) else json.dumps(payload)
            return web.Response(
                status=step.status,
                text=data,
                content_type="application/json",
                headers=dict(step.headers),
            )
        if isinstance(step, Malformed):
            return web.Response(
                status=step.status, text=step.raw_text, content_type=step.content_type
            )
        if isinstance(step, Raw):
            return web.json_response(step.body)
        return web.json_response(self._completion(step, body))

    def _completion(self, step: Text | ToolCalls, body: dict[str, Any]) -> dict[str, Any]:
        n = next(self._ids)
        if isinstance(step, Text):
            message: dict[str, Any] = {"role": "assistant", "content": step.content}
            finish = step.finish_reason
            completion_tokens = _rough_tokens(step.content)
        else:
            calls = [
                {
                    "id": c.call_id or f"call_{n}_{i}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for i, c in enumerate(step.calls)
            ]
            message = {"role": "assistant", "content": step.content, "tool_calls": calls}
            finish = "tool_calls"
            completion_tokens = _rough_tokens(calls)
        prompt_tokens = _rough_tokens(
            {"messages": body.get("messages", []), "tools": body.get("tools", [])}
        )
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if self.prompt_cache is not None:
            # OpenAI style: every request's prefix is cached automatically.
            units = _openai_units(body)
            with self._lock:
                cached = self.prompt_cache.read(units)
                self.prompt_cache.write(units, range(1, len(units) + 1))
            usage["prompt_tokens_details"] = {"cached_tokens": min(cached, prompt_tokens)}
        return {
            "id": f"chatcmpl-fake-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "system_fingerprint": "fp_fake",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": usage,
        }

    async def _anthropic_messages(self, request: web.Request) -> web.StreamResponse:
        """Anthropic's Messages API, enough for litellm's ``anthropic/`` provider: the
        request is recorded like a chat request; text and tool calls come back as content
        blocks; with ``prompt_cache`` the usage reports cache reads and writes at the
        request's ``cache_control`` breakpoints, as Anthropic does."""
        body = await self._read_json(request)
        if isinstance(body, web.Response):
            return body
        with self._cond:
            self._requests.append(body)
            self._cond.notify_all()
            item = self._script.popleft() if self._script else self.default
        step = self._resolve(item, body)
        if not isinstance(step, Text | ToolCalls):
            return await self._respond(step, body)
        n = next(self._ids)
        if isinstance(step, Text):
            content: list[dict[str, Any]] = [{"type": "text", "text": step.content}]
            stop = "end_turn"
        else:
            content = [{"type": "text", "text": step.content}] if step.content else []
            content += [
                {"type": "tool_use", "id": c.call_id or f"toolu_{n}_{i}", "name": c.name, "input": json.loads(c.arguments or "{}")}
                for i, c in enumerate(step.calls)
            ]
            stop = "tool_use"
        units = _anthropic_units(body)
        total = sum(tokens for _, tokens, _ in units)
        usage = {"input_tokens": total, "output_tokens": _rough_tokens(content)}
        if self.prompt_cache is not None:
            marks = [i + 1 for i, (_, _, marked) in enumerate(units) if marked]
            with self._lock:
                read = self.prompt_cache.read(units, marks)
                written = self.prompt_cache.write(units, marks) - read if marks else 0
            # Anthropic's input_tokens excludes what was read from or written to the cache.
            usage = {
                "input_tokens": total - read - max(written, 0),
                "output_tokens": usage["output_tokens"],
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": max(written, 0),
            }
        return web.json_response(
            {
                "id": f"msg_fake_{n}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "claude-fake"),
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
            }
        )

    async def _embeddings(self, request: web.Request) -> web.StreamResponse:
        body = await self._read_json(request)
        if isinstance(body, web.Response):
            return body
        with self._lock:
            self._embedding_requests.append(body)
        inputs = body.get("input", [])
        if isinstance(inputs, str) or (inputs and isinstance(inputs[0], int)):
            inputs = [inputs]
        data = [
            {"object": "embedding", "index": i, "embedding": self.embed(item)}
            for i, item in enumerate(inputs)
        ]
        tokens = _rough_tokens(inputs)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "fake-embedding"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def embed(self, item: str | Sequence[int]) -> list[float]:
        """The deterministic unit vector the server returns for `item`."""
        seed = item if isinstance(item, str) else json.dumps(list(item))
        digest = b""
        counter = 0
        while len(digest) < self.embedding_dim * 2:
            digest += hashlib.sha256(f"{counter}:{seed}".encode()).digest()
            counter += 1
        values = [
            int.from_bytes(digest[2 * i : 2 * i + 2], "big") / 65535.0 - 0.5
            for i in range(self.embedding_dim)
        ]
        norm = math.sqrt(sum(v * v for v in values)) or 1.0
        return [v / norm for v in values]


def _error_response(status: int, message: str) -> web.Response:
    return web.json_response(
        {
            "error": {
                "message": message,
                "type": _ERROR_TYPES.get(status, "api_error"),
                "param": None,
                "code": None,
            }
        },
        status=status,
    )

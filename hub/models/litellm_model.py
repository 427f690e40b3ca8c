"""The production adapter: ``litellm.acompletion`` with bounded retries (Retry-After
honoured; only 408/409/429/5xx and network errors are retried).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import random
import sys
import uuid
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from scopehub.hub.errors import ModelError, ModelUnavailable
from scopehub.hub.models.base import ModelResponse, ToolCall, check_request_allowed
from scopehub.hub.models.openai_compat import is_openai_compatible, post_chat, stream_chat

log = logging.getLogger(__name__)

# litellm's own loggers; whatever handler it gives them must not write to standard output.
_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm")


def import_litellm() -> Any:
    """litellm, imported the one way the hub uses it: offline cost map, and nothing on
    standard output (a command's stdout carries only its output, JSON for ``--json``).

    litellm prints a "Provider List" banner and "Give Feedback" hints with ``print`` unless
    ``suppress_debug_info`` is set, and may attach stream handlers of its own to its
    loggers: those are pointed at standard error, where the hub's logs go.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    for name in _LITELLM_LOGGERS:
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) is sys.stdout:
                handler.setStream(sys.stderr)
    return litellm


def _ignore_unstarted_requests() -> None:
    """litellm.acompletion builds its request coroutine in a worker thread and then awaits it;
    a call cancelled in between (a timeout, learning paused for a new message) leaves that
    coroutine never started, and Python warns when it is collected. Nothing was sent and
    nothing leaks: the warning is noise in every run's log, so it is not shown. (Set before
    each request: a caller that restores the warning filters, as pytest does, drops it.)"""
    warnings.filterwarnings("ignore", message=r"coroutine '\w+\.acompletion' was never awaited", category=RuntimeWarning)


# litellm exception classes that mean "try again later".
_RETRYABLE_NAMES = {
    "Timeout",
    "APITimeoutError",
    "RateLimitError",
    "APIConnectionError",
    "InternalServerError",
    "ServiceUnavailableError",
    "BadGatewayError",
}


def _is_retryable(exc: BaseException) -> bool:
    """Timeouts, rate limits, conflicts and server errors: worth another try; 4xx are not."""
    if isinstance(exc, ModelUnavailable) or any(cls.__name__ in _RETRYABLE_NAMES for cls in type(exc).__mro__):
        return True  # includes garbled 200 answers, which litellm raises as InternalServerError
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in (408, 409, 429) or status >= 500)


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    # "nan" or "inf" would make asyncio.sleep hang the whole loop.
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


class LiteLLMModel:
    """The production adapter: ``litellm.acompletion`` with retries and backoff."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        cache_marks: str = "auto",
        direct: bool = True,
    ) -> None:
        self.name = model
        self.cache_marks = cache_marks
        self.api_base = api_base or None
        self.api_key = api_key or None
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        # openai/<name> with an api_base goes straight to the server (openai_compat.py);
        # False sends it through litellm like every other provider.
        self.direct = direct

    def warm_up(self) -> None:
        """Import litellm now (seconds of CPU): a transport calls this off its event loop at start.

        Not for an OpenAI-compatible server reached directly: those calls never need it.
        """
        if self.direct and is_openai_compatible(self.name, self.api_base):
            return
        import_litellm()

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        model: str | None = None,
        json_mode: bool = False,
        timeout: float | None = None,
    ) -> ModelResponse:
        model_name = model or self.name
        if self.direct and is_openai_compatible(model_name, self.api_base):
            # An OpenAI-compatible server: straight there, without litellm's per-call logging
            # and pricing (see openai_compat.py); the same request, the same answer.
            check_request_allowed(model_name, self.api_base)
            return await self._with_retries(self._direct_call(messages, tools, model_name, json_mode, timeout or self.timeout), model_name)
        kwargs = self._request(messages, model_name, tools=tools, json_mode=json_mode, timeout=timeout)

        async def once() -> ModelResponse:
            litellm = import_litellm()
            response = await asyncio.wait_for(litellm.acompletion(**kwargs), timeout=kwargs["timeout"] + 5)
            return _from_litellm(response, model_name)

        return await self._with_retries(once, model_name)

    async def stream(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        on_text: Callable[[str], Awaitable[None]],
        tools: Sequence[dict[str, Any]] | None = None,
        model: str | None = None,
        timeout: float | None = None,
    ) -> ModelResponse:
        """Like :meth:`complete`, calling ``on_text(text so far)`` as the answer's text arrives.

        Retried like :meth:`complete` until the first text arrived; a failure after it is
        raised (the text shown so far cannot be taken back by a retry).
        """
        model_name = model or self.name
        shown = False
        if self.direct and is_openai_compatible(model_name, self.api_base):
            check_request_allowed(model_name, self.api_base)

            async def on_chunk(text: str) -> None:
                nonlocal shown
                shown = True
                await on_text(text)

            call = self._direct_stream(messages, tools, model_name, timeout or self.timeout, on_chunk)
            return await self._with_retries(call, model_name, retry_while=lambda: not shown)
        kwargs = self._request(messages, model_name, tools=tools, timeout=timeout)
        kwargs.update(stream=True, stream_options={"include_usage": True})

        async def once() -> ModelResponse:
            nonlocal shown
            litellm = import_litellm()

            budget = kwargs["timeout"] + 5
            async with asyncio.timeout(budget):
                chunks, text = [], ""
                async for chunk in await litellm.acompletion(**kwargs):
                    chunks.append(chunk)
                    choices = getattr(chunk, "choices", None) or []
                    delta = getattr(getattr(choices[0], "delta", None), "content", None) if choices else None
                    if delta:
                        text += delta
                        shown = True
                        await on_text(text)
            built = litellm.stream_chunk_builder(chunks, messages=list(messages))
            if built is None:
                raise ModelUnavailable(f"model {model_name} streamed nothing")
            return _from_litellm(built, model_name)

        return await self._with_retries(once, model_name, retry_while=lambda: not shown)

    def _request(
        self,
        messages: Sequence[dict[str, Any]],
        model_name: str,
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        json_mode: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """litellm's arguments for one request (the test guard checked first)."""
        check_request_allowed(model_name, self.api_base)
        _ignore_unstarted_requests()
        import_litellm()
        kwargs: dict[str, Any] = {
            "model": model_name,
            "messages": self._marked(messages, model_name),
            "timeout": timeout or self.timeout,
            "num_retries": 0,  # we retry ourselves, with Retry-After honoured and a bound
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
            kwargs["api_key"] = self.api_key or "sk-no-key"
        elif self.api_key:
            kwargs["api_key"] = self.api_key
        if tools:
            kwargs["tools"] = list(tools)
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    def _direct_body(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None, model_name: str, json_mode: bool = False
    ) -> dict[str, Any]:
        """The body litellm's openai/ provider sends for these arguments (it leaves out keys whose value is None)."""
        sent = [{k: v for k, v in message.items() if v is not None} for message in self._marked(messages, model_name)]
        body: dict[str, Any] = {"model": model_name.split("/", 1)[1], "messages": sent}
        if tools:
            body["tools"] = list(tools)
        if json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    def _direct_call(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        model_name: str,
        json_mode: bool,
        timeout: float,
    ) -> Callable[[], Awaitable[ModelResponse]]:
        body = self._direct_body(messages, tools, model_name, json_mode)
        api_base, api_key = self.api_base or "", self.api_key or "sk-no-key"

        async def call() -> ModelResponse:
            answer = await asyncio.wait_for(post_chat(api_base, api_key, body, timeout=timeout), timeout=timeout + 5)
            return from_openai_json(answer, model_name)

        return call

    def _direct_stream(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        model_name: str,
        timeout: float,
        on_text: Callable[[str], Awaitable[None]],
    ) -> Callable[[], Awaitable[ModelResponse]]:
        # What litellm sends for a stream: the same body with stream and stream_options.
        body = self._direct_body(messages, tools, model_name) | {"stream": True, "stream_options": {"include_usage": True}}
        api_base, api_key = self.api_base or "", self.api_key or "sk-no-key"

        async def call() -> ModelResponse:
            chunks: list[dict[str, Any]] = []
            text = ""

            async def on_chunk(chunk: dict[str, Any]) -> None:
                nonlocal text
                chunks.append(chunk)
                delta = _delta_text(chunk)
                if delta:
                    text += delta
                    await on_text(text)

            async with asyncio.timeout(timeout + 5):
                await stream_chat(api_base, api_key, body, timeout=timeout, on_chunk=on_chunk)
            if not chunks:
                raise ModelUnavailable(f"model {model_name} streamed nothing")
            built = from_openai_stream(chunks, model_name)
            return built if built is not None else _built_by_litellm(chunks, messages, model_name)

        return call

    async def _with_retries(
        self, once: Callable[[], Awaitable[ModelResponse]], model_name: str, *, retry_while: Callable[[], bool] = lambda: True
    ) -> ModelResponse:
        attempt = 0
        while True:
            try:
                return await once()
            except TimeoutError as exc:
                error: BaseException = exc
                retryable = True
            except Exception as exc:
                error = exc
                retryable = _is_retryable(exc)
                if not retryable:
                    raise ModelError(f"model {model_name} failed: {type(exc).__name__}: {_short(exc)}") from exc
            if attempt >= self.retries or not retry_while():
                raise ModelUnavailable(
                    f"model {model_name} unavailable after {attempt + 1} attempts: {type(error).__name__}: {_short(error)}"
                ) from error
            delay = _retry_after(error)
            if delay is None:
                delay = self.backoff * (2**attempt) * (0.75 + random.random() / 2)
            delay = min(delay, self.max_backoff)
            log.warning("model %s: %s; retrying in %.1fs", model_name, type(error).__name__, delay)
            await asyncio.sleep(delay)
            attempt += 1

    def _marked(self, messages: Sequence[dict[str, Any]], model_name: str) -> list[dict[str, Any]]:
        """Messages with their cache breakpoints kept only where the provider takes them.

        The context builder marks the end of each agent's stable part with
        ``cache_control``. Claude caches only up to such marks; OpenAI and Gemini cache
        repeated prefixes by themselves, and some OpenAI-compatible servers would choke
        on the extra key, so elsewhere it is removed before sending.
        """
        keep = self.cache_marks == "on" or (self.cache_marks == "auto" and takes_cache_marks(model_name))
        if keep:
            return [dict(message) for message in messages]
        return [{k: v for k, v in message.items() if k != "cache_control"} for message in messages]


_MARKING_PROVIDERS = {"anthropic", "bedrock", "vertex_ai", "azure_ai", "openrouter", "databricks"}


def takes_cache_marks(model: str) -> bool:
    """Whether ``model`` caches only at explicit ``cache_control`` breakpoints (Claude)."""
    provider, _, name = model.rpartition("/") if "/" in model else ("", "", model)
    provider = provider.split("/", 1)[0]
    return "claude" in name.lower() and (provider in _MARKING_PROVIDERS or not provider)


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).strip().replace("\n", " ")
    return text[:limit] + ("…" if len(text) > limit else "")


def _from_litellm(response: Any, model_name: str) -> ModelResponse:
    try:
        choice = response.choices[0]
        message = choice.message
    except (AttributeError, IndexError, TypeError) as exc:
        raise ModelUnavailable(f"model {model_name} returned no choices") from exc
    calls = []
    for index, call in enumerate(getattr(message, "tool_calls", None) or []):
        function = getattr(call, "function", None)
        name = getattr(function, "name", None) or ""
        arguments = getattr(function, "arguments", None) or "{}"
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(ToolCall(id=getattr(call, "id", None) or f"call_{index}", name=name, arguments=arguments))
    usage = getattr(response, "usage", None)
    cached, written = _cache_usage(usage)
    return ModelResponse(
        content=getattr(message, "content", None),
        tool_calls=tuple(calls),
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        model=getattr(response, "model", None) or model_name,
        cached_tokens=cached,
        cache_write_tokens=written,
    )


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _cache_usage(usage: Any) -> tuple[int | None, int | None]:
    """(cached, written) input tokens as litellm normalised them; (None, None) when the
    provider said nothing about caching (it may not cache, or not report it)."""
    details = getattr(usage, "prompt_tokens_details", None)
    # OpenAI-style prompt_tokens_details.cached_tokens; Anthropic's cache_read_input_tokens
    # (litellm copies it into the details too).
    read = _int_or_none(getattr(details, "cached_tokens", None))
    if read is None:
        read = _int_or_none(getattr(usage, "cache_read_input_tokens", None))
    written = _int_or_none(getattr(usage, "cache_creation_input_tokens", None))
    if written is None:
        written = _int_or_none(getattr(details, "cache_creation_tokens", None))
    if read is None and written is None:
        return None, None
    return read or 0, written or 0


def from_openai_json(answer: dict[str, Any], model_name: str) -> ModelResponse:
    """An OpenAI chat-completion answer, read as litellm reads it (missing usage counts 0,
    a tool call without an id gets a fresh one, non-string arguments become JSON)."""
    message = answer["choices"][0].get("message") or {}
    if not isinstance(message, dict):
        raise ModelUnavailable(f"model {model_name} returned no message")
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments") or "{}"
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(ToolCall(id=call.get("id") or str(uuid.uuid4()), name=function.get("name") or "", arguments=arguments))
    usage = answer.get("usage") or {}
    cached, written = _cache_usage(_Fields(usage))
    return ModelResponse(
        content=message.get("content"),
        tool_calls=tuple(calls),
        prompt_tokens=_int_or_none(usage.get("prompt_tokens")) or 0,
        completion_tokens=_int_or_none(usage.get("completion_tokens")) or 0,
        model=answer.get("model") or model_name,
        cached_tokens=cached,
        cache_write_tokens=written,
    )


class _Fields:
    """A JSON object read like litellm's objects (``getattr``, None when absent)."""

    def __init__(self, data: Any) -> None:
        self._data = data if isinstance(data, dict) else {}

    def __getattr__(self, name: str) -> Any:
        value = self._data.get(name)
        return _Fields(value) if isinstance(value, dict) else value


def _delta_text(chunk: dict[str, Any]) -> str | None:
    """The answer's text in a streamed chunk (what litellm's chunk carries as ``choices[0].delta.content``)."""
    choices = chunk.get("choices") or []
    delta = choices[0].get("delta") if choices and isinstance(choices[0], dict) else None
    content = delta.get("content") if isinstance(delta, dict) else None
    return content if isinstance(content, str) else None


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


_PLAIN_DELTA_KEYS = frozenset({"role", "content", "tool_calls"})


def from_openai_stream(chunks: Sequence[dict[str, Any]], model_name: str) -> ModelResponse | None:
    """A streamed OpenAI answer's chunks, assembled as litellm's ``stream_chunk_builder`` does.

    Only for the plain case, which is what an OpenAI-compatible server sends: one choice,
    text and/or whole tool calls, and one usage chunk with both counts. Anything else
    (several choices, reasoning or refusal fields, no usage, which litellm estimates with
    its tokenizer) is None: the caller hands those chunks to litellm's own builder.
    """
    usage: Any = None
    parts: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        if chunk.get("usage") is not None:
            if usage is not None:
                return None  # litellm merges several usage chunks by rules of its own
            usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not isinstance(choices, list) or len(choices) > 1:
            return None
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if choice.get("index", 0) != 0 or not isinstance(delta, dict):
                return None
            if any(value is not None and key not in _PLAIN_DELTA_KEYS for key, value in delta.items()):
                return None
            content = delta.get("content")
            if content is not None:
                if not isinstance(content, str):
                    return None
                parts.append(content)
            fragments = delta.get("tool_calls")
            if fragments is None:
                continue
            if not isinstance(fragments, list) or not fragments:
                return None
            for fragment in fragments:
                function = fragment.get("function") if isinstance(fragment, dict) else None
                if not isinstance(function, dict) or fragment.get("custom") is not None:
                    return None
                call = calls.setdefault(fragment.get("index", 0), {"id": None, "name": None, "arguments": []})
                if fragment.get("id"):
                    call["id"] = fragment["id"]
                if function.get("name"):
                    call["name"] = function["name"]
                arguments = function.get("arguments")
                if arguments is not None:
                    if not isinstance(arguments, str):
                        return None
                    call["arguments"].append(arguments)
    if not isinstance(usage, dict) or not (_is_count(usage.get("prompt_tokens")) and _is_count(usage.get("completion_tokens"))):
        return None
    if any(not call["id"] or not call["name"] for call in calls.values()):
        return None  # litellm drops such a call
    text = "".join(parts)
    if not calls and not text:
        return None
    cached, written = _cache_usage(_Fields(usage))
    return ModelResponse(
        content=(text if parts else None) if calls else text,
        tool_calls=tuple(
            ToolCall(id=call["id"], name=call["name"], arguments="".join(call["arguments"]) or "{}")
            for _, call in sorted(calls.items(), key=lambda item: item[0])
        ),
        prompt_tokens=usage["prompt_tokens"],
        completion_tokens=usage["completion_tokens"],
        model=_streamed_model(model_name),
        cached_tokens=cached,
        cache_write_tokens=written,
    )


def _streamed_model(model_name: str) -> str:
    """The model a litellm stream names: the one asked for, without the ``openai/`` prefix (not the server's)."""
    return model_name.split("/", 1)[1]


def _built_by_litellm(chunks: Sequence[dict[str, Any]], messages: Sequence[dict[str, Any]], model_name: str) -> ModelResponse:
    """Chunks :func:`from_openai_stream` does not vouch for, assembled by litellm itself."""
    litellm = import_litellm()
    from litellm.types.utils import ModelResponseStream

    named = [dict(chunk, model=_streamed_model(model_name)) for chunk in chunks]
    built = litellm.stream_chunk_builder([ModelResponseStream(**chunk) for chunk in named], messages=list(messages))
    if built is None:
        raise ModelUnavailable(f"model {model_name} streamed nothing")
    return _from_litellm(built, model_name)

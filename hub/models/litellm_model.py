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
from collections.abc import Sequence
from typing import Any

from scopehub.hub.errors import ModelError, ModelUnavailable
from scopehub.hub.models.base import ModelResponse, ToolCall, check_request_allowed

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
    ) -> None:
        self.name = model
        self.cache_marks = cache_marks
        self.api_base = api_base or None
        self.api_key = api_key or None
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff

    def warm_up(self) -> None:
        """Import litellm now (seconds of CPU): a transport calls this off its event loop at start."""
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
        check_request_allowed(model_name, self.api_base)
        litellm = import_litellm()
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
        attempt = 0
        while True:
            try:
                response = await asyncio.wait_for(litellm.acompletion(**kwargs), timeout=(timeout or self.timeout) + 5)
                return _from_litellm(response, model_name)
            except TimeoutError as exc:
                error: BaseException = exc
                retryable = True
            except Exception as exc:
                error = exc
                retryable = _is_retryable(exc)
                if not retryable:
                    raise ModelError(f"model {model_name} failed: {type(exc).__name__}: {_short(exc)}") from exc
            if attempt >= self.retries:
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

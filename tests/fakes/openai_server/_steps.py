"""What the fake model answers: the steps a script plays (text, tool calls, errors, delays, malformed bodies) and their constructors."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

# -- steps ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """An assistant message with plain content."""

    content: str
    finish_reason: str = "stop"


@dataclass(frozen=True)
class ToolCall:
    """One function call inside an assistant message (`arguments` is a JSON string)."""

    name: str
    arguments: str
    call_id: str | None = None


@dataclass(frozen=True)
class ToolCalls:
    """An assistant message carrying one or more tool calls (and optional content)."""

    calls: tuple[ToolCall, ...]
    content: str | None = None


@dataclass(frozen=True)
class Error:
    """An HTTP error response (OpenAI-style error body unless `body` is given)."""

    status: int
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Delay:
    """Sleep `seconds`, then answer with `then` (to trigger client timeouts)."""

    seconds: float
    then: Step | None = None


@dataclass(frozen=True)
class Malformed:
    """A response whose body is `raw_text` verbatim (not valid JSON / not a completion)."""

    raw_text: str
    status: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Raw:
    """A JSON body sent as is with status 200 (a hand-made completion)."""

    body: Any


Step: TypeAlias = Text | ToolCalls | Error | Delay | Malformed | Raw


Responder: TypeAlias = Callable[[dict[str, Any]], "Step | str"]


ScriptItem: TypeAlias = "Step | str | Responder"


def text(content: str, *, finish_reason: str = "stop") -> Text:
    """An assistant text reply."""
    return Text(content, finish_reason)


def tool_call(
    name: str, arguments: Mapping[str, Any] | str, call_id: str | None = None
) -> ToolCalls:
    """An assistant message with a single tool call (dict arguments are JSON-encoded)."""
    args = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return ToolCalls((ToolCall(name, args, call_id),))


def tool_calls(
    calls: Iterable[ToolCalls | ToolCall | tuple[str, Mapping[str, Any] | str]],
    *,
    content: str | None = None,
) -> ToolCalls:
    """Several tool calls in one assistant message.

    Items may be `tool_call(...)` results, `ToolCall`s or ``(name, arguments)`` tuples.
    """
    merged: list[ToolCall] = []
    for item in calls:
        if isinstance(item, ToolCalls):
            merged.extend(item.calls)
        elif isinstance(item, ToolCall):
            merged.append(item)
        else:
            merged.extend(tool_call(item[0], item[1]).calls)
    return ToolCalls(tuple(merged), content)


def error(status: int, body: Any = None, headers: Mapping[str, str] | None = None) -> Error:
    """An HTTP error, e.g. ``error(429, headers={"Retry-After": "1"})`` or ``error(500)``."""
    return Error(status, body, dict(headers or {}))


def delay(seconds: float, then: Step | str | None = None) -> Delay:
    """Answer after `seconds` with `then` (default: text "ok")."""
    return Delay(seconds, _as_step(then) if then is not None else None)


def malformed(
    raw_text: str, *, status: int = 200, content_type: str = "application/json"
) -> Malformed:
    """HTTP `status` (200) with `raw_text` as the body."""
    return Malformed(raw_text, status, content_type)


def raw(body: Any) -> Raw:
    """HTTP 200 with an arbitrary JSON body."""
    return Raw(body)


def _as_step(item: Step | str) -> Step:
    return Text(item) if isinstance(item, str) else item


def _default_responder(_request: dict[str, Any]) -> Step:
    return Text("ok")


def _rough_tokens(value: Any) -> int:
    """About one token per four characters of the JSON, at least 1."""
    return max(1, len(json.dumps(value, ensure_ascii=False)) // 4)


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "service_unavailable",
}

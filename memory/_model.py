"""Plain data the store hands out: immutable, cheap, safe to pass to pure code."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import InvalidScope

__all__ = ["CallRecord", "Message", "NewMessage", "Usage", "validate_scope"]

_SCOPE_RE = re.compile(r"^(user|group):[^\s:][^\s]{0,199}$")


def validate_scope(scope: str) -> str:
    """Return ``scope`` unchanged if it is ``user:<id>`` or ``group:<id>``, else raise."""
    if not isinstance(scope, str) or not _SCOPE_RE.match(scope):
        raise InvalidScope(
            f"invalid scope {scope!r}: expected 'user:<id>' (one customer) or 'group:<id>' (one group)"
        )
    return scope


@dataclass(frozen=True, slots=True)
class Message:
    """One stored message with its route (the tag)."""

    id: int
    scope: str
    role: str  # "user" or "agent"
    text: str
    ts: float  # unix seconds, UTC
    agent: str | None = None  # the route's agent (the tag); for agent replies, the author
    also_sees: tuple[str, ...] = ()
    via: str | None = None  # how it was routed: explicit, reply, local, sticky, llm, import...
    sender: str | None = None
    chat: str | None = None
    reply_to: int | None = None
    ext_id: str | None = None
    needs: tuple[str, ...] = ()  # eval annotation: ext ids of the messages an answer needs


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message about to be stored (the store assigns ``id``)."""

    scope: str
    role: str
    text: str
    ts: float | None = None
    agent: str | None = None
    also_sees: tuple[str, ...] = ()
    via: str | None = None
    sender: str | None = None
    chat: str | None = None
    reply_to: int | None = None
    ext_id: str | None = None
    needs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CallRecord:
    """Token accounting for one agent call: every section counted, plus the full-history cost."""

    scope: str
    agent: str
    message_id: int | None
    via: str | None
    also_sees: tuple[str, ...]
    tokens: dict[str, int]  # persona, rules, tools, facts, lessons, awareness, digest, history, message, total
    full_history_tokens: int
    model: str | None = None
    latency_ms: float | None = None
    prompt_tokens: int | None = None  # as the provider reported them, cached ones included
    completion_tokens: int | None = None
    ok: bool = True
    ts: float | None = None
    extra: dict = field(default_factory=dict)
    # Prompt caching as the provider reported it; None: it reported nothing about caching.
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    billed_tokens: float | None = None  # input in full-price tokens (None: unknown)
    cost: float | None = None  # USD from litellm's cost map (None: unknown model, never 0)
    # Why a failed call failed: the exception's class and message (secrets redacted by the
    # store, :func:`~._redact.redact_secrets`); None for a call that did not fail that way.
    error_class: str | None = None
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """What one scope has cost so far, against what full history would have cost.

    ``tokens_sent`` counts each call's built request (exact, per section); the provider
    figures cover every request of each call (tool rounds included) and only the calls
    whose provider reported them.
    """

    scope: str
    messages: int
    agent_calls: int
    tokens_sent: int
    full_history_tokens: int
    prompt_tokens: int = 0  # provider-reported input tokens, cached ones included
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    calls_reporting_usage: int = 0  # calls whose provider reported token usage
    calls_reporting_cache: int = 0  # ... and said something about prompt caching
    billed_tokens: float = 0.0  # over the calls whose billed-equivalent is known
    calls_billed_unknown: int = 0
    cost: float = 0.0  # USD over the calls whose model the cost map knows
    calls_cost_unknown: int = 0  # calls with usage whose model has no price
    router_calls: int = 0  # the optional LLM router's calls (not agent calls)
    router_tokens: int = 0  # their input and output tokens, as the provider reported them
    extractor_calls: int = 0  # the fact extractor's calls (after replies, off the request path)
    extractor_tokens: int = 0

    @property
    def saving(self) -> float:
        """Share of tokens scoping saved (0.0 when nothing was sent yet)."""
        if self.full_history_tokens <= 0:
            return 0.0
        return 1.0 - self.tokens_sent / self.full_history_tokens

"""A provider prompt cache, simulated over replayed calls: what a request would be billed.

Providers bill a repeated request prefix at a fraction of the input price:

- OpenAI caches every request's prefix by itself once it is at least 1,024 tokens long,
  and counts hits in steps of 128 tokens; cached input costs half (gpt-4o family; less on
  newer models); entries live 5-10 minutes without use.
- Anthropic (Claude) caches only prefixes that end at a ``cache_control`` breakpoint,
  from 1,024 tokens on (2,048 on Haiku); reads cost 0.1x, writes 1.25x the input price;
  entries live 5 minutes, refreshed on every hit.
- Gemini caches implicitly (from 1,024 or 2,048 tokens) much like OpenAI.

The model here: a request is a list of *segments* (the stable part: tools, persona and
rules; then facts and the other context sections; then each history message; then the
message). A call may read the longest prefix of its segments that an earlier call of
the same cache *key* wrote within ``ttl`` seconds, if it is at least ``min_prefix``
tokens (rounded down to ``block``). With ``breakpoints`` only prefixes ending at marked
segments are written (the stable part, and the request's end with ``mark_end``);
otherwise every prefix of every request is. Billed-equivalent input tokens are
``uncached + cached * read_price + written * write_price``.

Cache keys: ``agent``, the calls of one agent in one chat share a cache (each agent's
request starts with its own stable part, so nothing else could be hit); ``scope``, every
call of a chat extends one cache whatever the agent, as if all agents shared one stable
part and rendered each message the same way: the best case for a full-history prompt,
which grows by appending. The stable part
is also shared across chats in production; that matters only when ``min_prefix`` is below
its size (a few hundred tokens here) and is not modelled.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

__all__ = ["PRESETS", "CacheModel", "CacheTotals", "PrefixCache", "Segment"]


@dataclass(frozen=True, slots=True)
class CacheModel:
    """How a provider caches prompt prefixes and prices cached input (see module doc)."""

    key: str = "agent"  # agent | scope
    min_prefix: int = 1024
    block: int = 128
    ttl: float = 300.0
    read_price: float = 0.5
    write_price: float = 1.0
    breakpoints: bool = False
    mark_end: bool = False

    def describe(self) -> str:
        marks = "at breakpoints (stable part" + (", request end)" if self.mark_end else ")") if self.breakpoints else "automatic"
        return (
            f"per-{self.key} prefix cache, {marks}, min {self.min_prefix:,} tokens in steps of {self.block}, "
            f"TTL {self.ttl:g} s, cached input at {self.read_price:g}x, writes at {self.write_price:g}x"
        )


PRESETS: dict[str, CacheModel] = {
    "openai": CacheModel(min_prefix=1024, block=128, ttl=300.0, read_price=0.5, write_price=1.0),
    "anthropic": CacheModel(min_prefix=1024, block=1, ttl=300.0, read_price=0.1, write_price=1.25, breakpoints=True),
}


@dataclass(frozen=True, slots=True)
class Segment:
    """One part of a request: its bytes' identity, its tokens, and what it stands for.

    ``key`` is the same for the same bytes; ``shared`` names the part whatever agent it is
    rendered for (the stored message's id), used by the per-scope best case.
    """

    key: str
    tokens: int
    stable: bool = False  # the stable part (tools, persona, rules): a breakpoint follows it
    shared: str = ""


@dataclass
class CacheTotals:
    """Sums over the calls of one mode under one cache model."""

    calls: int = 0
    request_tokens: int = 0
    stable_tokens: int = 0
    cached_tokens: int = 0
    written_tokens: int = 0
    billed_tokens: float = 0.0

    def per_call(self) -> dict[str, float]:
        calls = max(self.calls, 1)
        return {
            "request_tokens_per_call": round(self.request_tokens / calls, 1),
            "stable_prefix_tokens_per_call": round(self.stable_tokens / calls, 1),
            "cached_tokens_per_call": round(self.cached_tokens / calls, 1),
            "cache_write_tokens_per_call": round(self.written_tokens / calls, 1),
            "billed_tokens_per_call": round(self.billed_tokens / calls, 1),
            "cached_share": round(self.cached_tokens / self.request_tokens, 4) if self.request_tokens else 0.0,
        }


@dataclass
class PrefixCache:
    """The cache of one chat under one model; :meth:`bill` one call after another, in time order."""

    model: CacheModel
    totals: CacheTotals = field(default_factory=CacheTotals)
    _entries: dict[tuple[str, str], float] = field(default_factory=dict)  # (key, prefix digest) -> last use

    def bill(self, agent: str, segments: Sequence[Segment], now: float) -> float:
        """Billed-equivalent input tokens of one call at time ``now``; adds it to the totals."""
        model = self.model
        owner = agent if model.key == "agent" else "*"
        digests, ends, marks = [], [], []
        digest, total = hashlib.blake2b(digest_size=16), 0
        for index, segment in enumerate(segments):
            # Under a per-scope cache the stable part stands for one shared by every agent, and
            # a message for itself however it is labelled for the agent at hand.
            if model.key == "scope":
                digest.update(("stable" if segment.stable else (segment.shared or segment.key)).encode() + b"\x00")
            else:
                digest.update(segment.key.encode() + b"\x00")
            total += segment.tokens
            digests.append(digest.hexdigest())
            ends.append(total)
            if segment.stable or (model.mark_end and index == len(segments) - 1):
                marks.append(index)
        cached = 0
        for index in range(len(segments) - 1, -1, -1):
            seen = self._entries.get((owner, digests[index]))
            if seen is not None and now - seen <= model.ttl and ends[index] >= model.min_prefix:
                cached = ends[index] - ends[index] % max(model.block, 1)
                self._entries[(owner, digests[index])] = now  # a hit refreshes the entry
                break
        writes = marks if model.breakpoints else range(len(segments))
        written_end = 0
        for index in writes:
            if ends[index] >= model.min_prefix:
                self._entries[(owner, digests[index])] = now
                written_end = max(written_end, ends[index])
        written = max(0, written_end - cached) if model.breakpoints else 0
        billed = (total - cached - written) + cached * model.read_price + written * model.write_price
        t = self.totals
        t.calls += 1
        t.request_tokens += total
        t.stable_tokens += sum(s.tokens for s in segments if s.stable)
        t.cached_tokens += cached
        t.written_tokens += written
        t.billed_tokens += billed
        return billed


def preset(name: str, **overrides: object) -> CacheModel:
    """A provider's cache model with some options changed (None leaves the preset's value)."""
    base = PRESETS[name]
    changes = {k: v for k, v in overrides.items() if v is not None}
    model = replace(base, **changes)  # type: ignore[arg-type]
    if model.block < 1 or model.min_prefix < 0 or model.ttl < 0 or math.isnan(model.read_price):
        raise ValueError("cache model: block >= 1, min_prefix >= 0, ttl >= 0")
    return model

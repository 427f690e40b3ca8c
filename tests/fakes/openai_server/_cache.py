"""A simulated provider prompt cache: which prefix of a request was seen before, in rough tokens."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

from ._steps import _rough_tokens

Unit: TypeAlias = tuple[str, int, bool]  # (serialised block, rough tokens, carries cache_control)


class PromptCache:
    """A provider's prefix cache, simulated: a request is a list of units (tools, then each
    system block or message); a prefix of units hits when an earlier request wrote the same
    prefix, and counts only from ``min_tokens`` on. No expiry: tests are short."""

    def __init__(self, min_tokens: int = 0) -> None:
        self.min_tokens = min_tokens
        self._written: set[str] = set()

    @staticmethod
    def _keys(units: Sequence[Unit]) -> list[tuple[str, int]]:
        keys, digest, tokens = [], hashlib.sha256(), 0
        for text, count, _ in units:
            digest.update(text.encode())
            tokens += count
            keys.append((digest.copy().hexdigest(), tokens))
        return keys

    def read(self, units: Sequence[Unit], at: Iterable[int] | None = None) -> int:
        """Tokens of the longest cached prefix ending at one of the unit counts ``at`` (any)."""
        keys = self._keys(units)
        ends = sorted(set(at) if at is not None else range(1, len(keys) + 1), reverse=True)
        for end in ends:
            key, tokens = keys[end - 1]
            if key in self._written and tokens >= self.min_tokens:
                return tokens
        return 0

    def write(self, units: Sequence[Unit], at: Iterable[int]) -> int:
        """Cache the prefixes ending at unit counts ``at``; returns the longest one's tokens."""
        keys = self._keys(units)
        longest = 0
        for end in at:
            key, tokens = keys[end - 1]
            if tokens >= self.min_tokens:
                self._written.add(key)
                longest = max(longest, tokens)
        return longest


def _unit(value: Any) -> Unit:
    marked = isinstance(value, dict) and "cache_control" in value
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text, _rough_tokens(value), marked


def _openai_units(body: dict[str, Any]) -> list[Unit]:
    return [_unit({"tools": body.get("tools", [])}), *(_unit(m) for m in body.get("messages", []))]


def _anthropic_units(body: dict[str, Any]) -> list[Unit]:
    """Tools, system blocks, then each message's content blocks, in Anthropic's cache order."""
    units = [_unit(tool) for tool in body.get("tools", [])]
    system = body.get("system", [])
    units += [_unit(block) for block in ([{"type": "text", "text": system}] if isinstance(system, str) else system)]
    for message in body.get("messages", []):
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        units += [_unit({"role": message.get("role"), **block}) for block in blocks]
    return units

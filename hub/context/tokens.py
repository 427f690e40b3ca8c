"""Exact token counts, offline.

litellm ships tiktoken's BPE files; pointing ``TIKTOKEN_CACHE_DIR`` at them before the
first ``tiktoken.get_encoding`` means no download is ever attempted.
"""

from __future__ import annotations

import importlib.util
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

__all__ = ["TiktokenTokenizer", "Tokenizer", "count_message_tokens", "get_tokenizer"]

# Per-message framing overhead of the chat format (role, separators), as OpenAI documents it.
MESSAGE_OVERHEAD = 3


class Tokenizer(Protocol):
    """Counts and trims tokens."""

    name: str

    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str: ...


def _point_tiktoken_at_litellm() -> None:
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return
    tokenizers = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    if tokenizers.is_dir():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(tokenizers)
        # litellm would otherwise overwrite it on its first token_counter call.
        os.environ.setdefault("CUSTOM_TIKTOKEN_CACHE_DIR", str(tokenizers))


class TiktokenTokenizer:
    """tiktoken encoding (``o200k_base`` by default)."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        _point_tiktoken_at_litellm()
        import tiktoken

        self.name = encoding
        self._enc = tiktoken.get_encoding(encoding)

    def count(self, text: str) -> int:
        """Tokens in ``text`` (special-token markers are counted as plain text)."""
        if not text:
            return 0
        return len(self._enc.encode(text, disallowed_special=()))

    def truncate(self, text: str, max_tokens: int) -> str:
        """``text`` cut to at most ``max_tokens`` tokens (whole text if it fits)."""
        if max_tokens <= 0:
            return ""
        tokens = self._enc.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return text
        return self._enc.decode(tokens[:max_tokens])


@lru_cache(maxsize=4)
def get_tokenizer(encoding: str = "o200k_base") -> TiktokenTokenizer:
    """A shared tokenizer per encoding (loading the BPE file takes ~0.2 s)."""
    return TiktokenTokenizer(encoding)


def count_message_tokens(tokenizer: Tokenizer, messages: list[dict[str, Any]]) -> int:
    """Tokens of provider messages including framing and tool calls."""
    total = 0
    for message in messages:
        total += MESSAGE_OVERHEAD
        content = message.get("content")
        if isinstance(content, str):
            total += tokenizer.count(content)
        elif content:
            total += tokenizer.count(json.dumps(content, ensure_ascii=False))
        if message.get("tool_calls"):
            total += tokenizer.count(json.dumps(message["tool_calls"], ensure_ascii=False))
        if message.get("name"):
            total += tokenizer.count(message["name"])
    return total

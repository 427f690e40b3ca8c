"""Exact token counts, offline.

litellm ships tiktoken's BPE files; pointing ``TIKTOKEN_CACHE_DIR`` at them before the
first ``tiktoken.get_encoding`` means no download is ever attempted.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from collections import OrderedDict
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


def _encoding(tiktoken: Any, name: str) -> Any:
    """``tiktoken.get_encoding(name)``, its BPE table read from the disk cache when it is there.

    tiktoken parses the table from a base64 text file of 200,000 lines at every start
    (0.2 s of CPU); the parsed table is the same for a given tiktoken version and
    encoding, so it is kept (``scopehub.hub.diskcache``, marshal: read back in 0.05 s).
    """
    from scopehub.hub.diskcache import load_data, save_data

    key = [f"tiktoken {getattr(tiktoken, '__version__', '?')}", name]
    kept = load_data("tiktoken", key)
    if isinstance(kept, dict):
        try:
            return tiktoken.Encoding(**kept)
        except (TypeError, ValueError):
            pass  # another version's arguments: parse afresh
    from tiktoken import registry

    if registry.ENCODING_CONSTRUCTORS is None:
        registry._find_constructors()
    constructor = (registry.ENCODING_CONSTRUCTORS or {}).get(name)
    if constructor is None:
        return tiktoken.get_encoding(name)  # its own error for an unknown name
    arguments = constructor()
    save_data("tiktoken", key, arguments)
    return tiktoken.Encoding(**arguments)


class _CountCache:
    """Token counts of texts seen lately, least recently used out, bounded by characters.

    Every call re-counts the same texts: its history (the window slides by one message
    a turn), the persona, rules and tool schemas of its agent. Counting a text again is
    a dictionary lookup instead of a BPE encoding. Thread-safe (the hub counts in its
    database threads on PostgreSQL).
    """

    def __init__(self, max_chars: int = 4_000_000, max_text: int = 50_000) -> None:
        self.max_chars = max_chars
        self.max_text = max_text  # longer texts are counted every time (rare; never kept)
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> int | None:
        with self._lock:
            count = self._counts.get(text)
            if count is not None:
                self._counts.move_to_end(text)
            return count

    def put(self, text: str, count: int) -> None:
        if len(text) > self.max_text:
            return
        with self._lock:
            if text in self._counts:
                return
            self._counts[text] = count
            self._chars += len(text)
            while self._chars > self.max_chars and self._counts:
                old, _ = self._counts.popitem(last=False)
                self._chars -= len(old)


class TiktokenTokenizer:
    """tiktoken encoding (``o200k_base`` by default); counts are cached per text."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        _point_tiktoken_at_litellm()
        import tiktoken

        self.name = encoding
        self._enc = _encoding(tiktoken, encoding)
        self._cache = _CountCache()

    def count(self, text: str) -> int:
        """Tokens in ``text`` (special-token markers are counted as plain text)."""
        if not text:
            return 0
        count = self._cache.get(text)
        if count is None:
            count = len(self._enc.encode(text, disallowed_special=()))
            self._cache.put(text, count)
        return count

    def truncate(self, text: str, max_tokens: int) -> str:
        """``text`` cut to at most ``max_tokens`` tokens (whole text if it fits)."""
        if max_tokens <= 0:
            return ""
        if self.count(text) <= max_tokens:
            return text
        return self._enc.decode(self._enc.encode(text, disallowed_special=())[:max_tokens])


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

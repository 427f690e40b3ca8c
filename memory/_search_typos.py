"""Spelling tolerance: the index vocabulary cached per store, typo expansions of rare query words.

Tunable constants live in :mod:`._search_base`; ``eval/search_cv.py`` sets them in every search module.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from rapidfuzz import process
from rapidfuzz.distance import OSA

if TYPE_CHECKING:
    pass
from ._search_base import (
    _FUZZY_PER_TERM,
    _FUZZY_RARE,
    _RANK_BUDGET,
    _VAULT_OFFSET,
    STOPWORDS,
    _Term,
)
from ._search_scope import _count_capped, _Ranges
from ._search_text import _phrase, porter_stem

# -- vocabulary cache (typo expansion) -------------------------------------------------------------


@dataclass
class _Vocab:
    by_key: dict[tuple[str, int], list[str]]  # (first letter, length) -> stems
    df: dict[str, int]
    loaded: float
    cost: float
    changes: int


# Keyed by the Store (or Database) that owns the connection: sqlite3 connections cannot be
# weakly referenced. A bare connection gets no cache (it is the small-test path).
_VOCABS: WeakKeyDictionary[Any, _Vocab] = WeakKeyDictionary()
_VOCAB_LOCK = threading.Lock()
_VOCAB_TTL_FACTOR = 200.0  # an expensive vocabulary is reloaded at most every 200x its load time


def _vocabulary(conn: sqlite3.Connection, owner: Any) -> _Vocab:
    """Every indexed term (stemmed), bucketed by length; cached per connection.

    fts5vocab walks the whole index (about a second at a million rows), so the cache is
    reloaded when this connection has written since and the load was cheap, or when an
    expensive one has aged: a word added minutes ago may miss typo expansion until then
    (its exact spelling is always found).
    """
    now = time.monotonic()
    with _VOCAB_LOCK:
        try:
            cached = _VOCABS.get(owner)
        except TypeError:
            cached = None
    if cached is not None:
        age = now - cached.loaded
        changed = conn.total_changes != cached.changes
        stale = age > max(30.0, cached.cost * _VOCAB_TTL_FACTOR) or (changed and cached.cost < 0.05)
        if not stale:
            return cached
    started = time.monotonic()
    by_key: dict[tuple[str, int], list[str]] = {}
    df: dict[str, int] = {}
    # FTS5 may cut an over-long token inside a character; such terms cannot be decoded
    # and are no words anyway, so they are left out of the typo vocabulary.
    for term, docs in conn.execute("SELECT term, doc FROM search_vocab WHERE length(CAST(term AS BLOB)) <= 120"):
        if term.isalpha() and 3 <= len(term) <= 30:
            by_key.setdefault((term[0], len(term)), []).append(term)
            df[term] = docs
    vocab = _Vocab(by_key, df, time.monotonic(), time.monotonic() - started, conn.total_changes)
    with _VOCAB_LOCK, suppress(TypeError):
        _VOCABS[owner] = vocab
    return vocab


@lru_cache(maxsize=65_536)
def _surface(stem: str) -> str | None:
    """A word FTS5 will stem to ``stem`` (stems are not always fixed points of Porter)."""
    for candidate in (stem, stem + "e", stem + "s", stem + "ing", stem + "y"):
        if porter_stem(candidate) == stem:
            return candidate
    return None


def _symbol_matches(
    conn: sqlite3.Connection, scope: str, ranges: _Ranges, symbol: str, before_id: int | None, limit: int
) -> list[int]:
    """Document keys of the scope's messages and vault documents containing ``symbol``, newest first.

    A scan of the scope's rows (symbols are not in the full-text index); only queries
    that carry a symbol pay for it.
    """
    keys = [
        ranges.base + mid
        for (mid,) in conn.execute(
            "SELECT id FROM messages WHERE scope = ? AND id < ? AND instr(text, ?) > 0 ORDER BY id DESC LIMIT ?",
            (scope, before_id if before_id is not None else _VAULT_OFFSET, symbol, limit),
        )
    ]
    keys += [
        ranges.base + _VAULT_OFFSET + vid
        for (vid,) in conn.execute(
            "SELECT id FROM vault WHERE scope = ? AND (instr(body, ?) > 0 OR instr(title, ?) > 0) ORDER BY id DESC LIMIT ?",
            (scope, symbol, symbol, limit),
        )
    ]
    return keys


def _expand_typos(
    conn: sqlite3.Connection, owner: Any, terms: list[_Term], dfs: dict[str, int], ranges: _Ranges
) -> None:
    """Give rare or unknown alphabetic terms close vocabulary words found in this scope.

    A typo keeps its first letter and its stem sits one edit (two for words of eight
    letters or more) from the stem meant; an adjacent swap counts as one edit. A word used in other scopes is
    real, merely absent here, and is left alone: expanding "june" to "tune" only adds noise.
    """
    needy = [
        t
        for t in terms
        if dfs.get(t.word, 0) <= _FUZZY_RARE and t.stem.isalpha() and len(t.stem) >= 4
    ]
    if not needy:
        return
    vocab = _vocabulary(conn, owner)
    for term in needy:
        own = dfs.get(term.word, 0)
        if vocab.df.get(term.stem, 0) > own + _FUZZY_RARE:
            continue
        max_dist = 1 if len(term.word) < 8 else 2
        pool: list[str] = []
        for size in range(len(term.stem) - max_dist, len(term.stem) + max_dist + 1):
            pool.extend(vocab.by_key.get((term.stem[0], size), ()))
        if not pool:
            continue
        near = process.extract(
            term.stem, pool, scorer=OSA.distance, score_cutoff=max_dist, limit=4 * _FUZZY_PER_TERM
        )
        # Closest first, then the more common spelling (likelier to be what was meant).
        near.sort(key=lambda item: (item[1], -vocab.df.get(item[0], 0)))
        for stem, _dist, _index in near:
            if stem == term.stem:
                continue
            word = _surface(stem)
            if word is None or word in STOPWORDS:
                continue
            df = dfs.get(word)
            if df is None:
                df = dfs[word] = _count_capped(conn, _phrase(word), ranges, _RANK_BUDGET)
            if df > own:
                term.alts.append(word)
                if len(term.alts) >= _FUZZY_PER_TERM:
                    break

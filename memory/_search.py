"""Archive search: BM25 + spelling-tolerant candidates + rank fusion + coverage + recency.

One FTS5 table (``search_fts``) indexes every message and vault document of every
scope. Its rowid is a *document key* that places each scope in its own contiguous
rowid range::

    key = scope_num * 2**40 + id                 (a message)
    key = scope_num * 2**40 + 2**39 + id         (a vault document)

so "only this scope" (and "only messages older than ``before_id``") is a rowid range,
which FTS5 applies inside its doclist iteration: no other scope's row is matched,
scored or returned. ``scope_num`` comes from ``search_scopes``, filled by the insert
triggers, which also count each scope's documents (``docs``).

BM25's idf is the scope's own, as on PostgreSQL: FTS5's ``bm25()`` takes N and each
term's document count over the whole table, every scope's rows included, so each term is
ranked on its own and its score rescaled from FTS5's idf to the scope's (N from
``search_scopes.docs``, the term's count within the scope's range). Otherwise one
scope's ranking would move with what other scopes hold (LoCoMo hit@10 0.824 in a fresh
database, 0.807 in one already holding the ten conversations; with the scope's idf 0.821
and 0.822). Only the mean document length stays table-wide.

Each message is indexed with the text of the two messages before it in the same scope
(column ``ctx``, weighted 0.5 at query time): on LoCoMo that lifts BM25 hit@10 by about
10 points.
The FTS table stores its own copy of ``body`` and ``ctx``, so a delete never has to
reproduce the neighbouring text that was indexed (which may be gone by then).

Two signals beyond the words, found by the LoCoMo folds: a query word naming a message's
sender counts as met by that message (coverage), and a date in the query ("on 8 May, 2023",
"in July 2023") adds a ranked list of the BM25 matches written in that window.

Queries are built here from regex tokens, each quoted, OR-ed: user text is never FTS5
syntax. Terms are Porter-stemmed in Python exactly as FTS5's ``porter`` tokenizer does,
for vocabulary look-ups, typo expansion and coverage.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass
from ._search_base import (
    _BODY_WEIGHT,
    _CTX_WEIGHT,
    _DATE_DEPTH,
    _DATE_WEIGHT,
    _KNOWLEDGE,
    _NEIGHBOUR_WEIGHT,
    _RANK_BUDGET,
    _VAULT_OFFSET,
    SEARCH_METHODS,
    Embedder,
    SearchError,
    SearchHit,
    _Doc,
    vault_text,
)
from ._search_rank import fuse_ranked_lists, rank_documents
from ._search_schema import count_search_documents, create_search_schema
from ._search_scope import _count_capped, _Ranges, _resolve, _scope_ranges
from ._search_semantic import LiteLLMEmbedder, _semantic, index_embeddings
from ._search_text import (
    _match_expr,
    _phrase,
    _query_dates,
    _query_symbols,
    _query_terms,
    porter_stem,
)
from ._search_typos import _VOCAB_LOCK, _VOCABS, _expand_typos, _symbol_matches

# The search's public face; its parts live in _search_base (constants, types), _search_text,
# _search_scope, _search_typos, _search_rank, _search_schema and _search_semantic.
__all__ = [
    "SEARCH_METHODS",
    "Embedder",
    "LiteLLMEmbedder",
    "SearchError",
    "SearchHit",
    "check_method",
    "count_search_documents",
    "create_search_schema",
    "fuse_ranked_lists",
    "index_embeddings",
    "porter_stem",
    "rank_documents",
    "search_archive",
]


def _bm25_idf(docs: int, hits: int) -> float:
    """FTS5's idf of a term in ``hits`` of ``docs`` documents: log((N - n + 0.5) / (n + 0.5)),
    at least 1e-6 (a term in more than half the documents)."""
    idf = math.log((docs - hits + 0.5) / (hits + 0.5)) if docs > hits else 0.0
    return max(idf, 1e-6)


def _table_docs(conn: sqlite3.Connection) -> int:
    """The FTS5 table's row count: the first varint (SQLite's encoding) of its averages record."""
    row = conn.execute("SELECT block FROM search_fts_data WHERE id = 1").fetchone()
    value = 0
    for i, byte in enumerate(bytes(row[0][:9]) if row and row[0] else b""):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return value


def _table_idf(conn: sqlite3.Connection, owner: Any) -> Callable[[str], float | None]:
    """FTS5's own idf of a stem, over the whole index (None for a stem it does not hold).
    The index's row count is read once, when first needed; a stem's document count comes
    from the typo vocabulary when this store has it loaded, else from FTS5's vocabulary
    table (a walk of the term's doclist, as long as FTS5's own idf pass). The cached count
    may be a little stale; it only sets how far a term's score is rescaled."""
    with _VOCAB_LOCK:
        try:
            cached = _VOCABS.get(owner)
        except TypeError:
            cached = None
    table_docs: list[int] = []

    def idf(stem: str) -> float | None:
        hits = cached.df.get(stem) if cached is not None else None
        if hits is None:
            row = conn.execute("SELECT doc FROM search_vocab WHERE term = ?", (stem,)).fetchone()
            hits = None if row is None else int(row[0])
        if not table_docs:
            table_docs.append(_table_docs(conn))
        return None if hits is None or not table_docs[0] else _bm25_idf(table_docs[0], hits)

    return idf


def _ranked(
    conn: sqlite3.Connection,
    words: Sequence[str],
    dfs: dict[str, int],
    ranges: _Ranges,
    limit: int,
    table_idf: Callable[[str], float | None],
) -> list[int]:
    """Document keys ranked by BM25 over ``words``, within the rank budget.

    The rarest terms are ranked while their matches fit the budget; common ones are left
    to the coverage term. When even the rarest term is too common, BM25 is skipped
    altogether (its idf pass alone reads the term's whole doclist): the newest documents
    holding every term come first, then the newest holding any.
    """
    present = [w for w in dict.fromkeys(words) if dfs.get(w, 0) > 0]
    if not present:
        return []
    chosen: list[str] = []
    spent = 0
    for word in sorted(present, key=lambda w: dfs[w]):
        if spent + dfs[word] > _RANK_BUDGET:
            break
        chosen.append(word)
        spent += dfs[word]
    if chosen:
        # FTS5's bm25() of an OR query is the sum of each term's, so each term is scored
        # on its own, rescaled from the table's idf to the scope's, and summed (in SQLite:
        # only the top ``limit`` keys come back). One term needs no rescaling for its order.
        rescale = len(chosen) > 1 and ranges.docs > 0
        selects: list[str] = []
        params: list[Any] = []
        for word in chosen:
            factor = 1.0  # a word FTS5 splits into several tokens keeps the table's idf
            table = table_idf(porter_stem(word)) if rescale else None
            if table is not None:
                factor = _bm25_idf(ranges.docs, dfs[word]) / table
            for lo, hi in ranges.parts:
                selects.append(
                    f"SELECT rowid AS key, ? * bm25(search_fts, {_BODY_WEIGHT}, {_CTX_WEIGHT}) AS score"
                    " FROM search_fts WHERE search_fts MATCH ? AND rowid BETWEEN ? AND ?"
                )
                params += [factor, _phrase(word), lo, hi]
        if len(selects) == 1:
            sql = f"SELECT key FROM ({selects[0]}) ORDER BY score, key LIMIT ?"
        else:  # MATERIALIZED: flattened into the aggregate, bm25() would be out of its context
            sql = (
                f"WITH scored AS MATERIALIZED ({' UNION ALL '.join(selects)})"
                " SELECT key FROM scored GROUP BY key ORDER BY sum(score), key LIMIT ?"
            )
        return [key for (key,) in conn.execute(sql, (*params, limit))]  # bm25() is negative: best first
    newest: dict[int, None] = {}
    expressions = [" AND ".join(_phrase(w) for w in present)] if len(present) > 1 else []
    expressions.append(_match_expr(present))
    sql = (
        "SELECT rowid FROM search_fts WHERE search_fts MATCH ? AND rowid BETWEEN ? AND ?"
        " ORDER BY rowid DESC LIMIT ?"
    )
    for expr in expressions:
        for lo, hi in reversed(ranges.parts):  # vault documents, then messages, newest first
            for (key,) in conn.execute(sql, (expr, lo, hi, limit - len(newest))):
                newest.setdefault(key)
            if len(newest) >= limit:
                return list(newest)
    return list(newest)


def _predecessors(
    conn: sqlite3.Connection, scope: str, ranges: _Ranges, keys: Sequence[int]
) -> list[int]:
    """The document key of the message before each message key (vault keys are skipped)."""
    found: list[int] = []
    for key in keys:
        message_id = key - ranges.base
        if message_id >= _VAULT_OFFSET:
            continue
        row = conn.execute(
            "SELECT max(id) FROM messages WHERE scope = ? AND id < ?", (scope, message_id)
        ).fetchone()
        if row[0] is not None:
            found.append(ranges.base + int(row[0]))
    return found


def _first_id_from(conn: sqlite3.Connection, scope: str, lo: int, hi: int, ts: float) -> int | None:
    """The smallest message id in ``lo..hi`` of the scope whose ``ts`` is at least ``ts``.

    Bisection over ids, one indexed probe each: messages are stored in time order, so ids
    and timestamps rise together (a history imported out of order only blurs the window).
    """
    found = None
    while lo <= hi:
        mid = (lo + hi) // 2
        row = conn.execute(
            "SELECT id, ts FROM messages WHERE scope = ? AND id >= ? AND id <= ? ORDER BY id LIMIT 1",
            (scope, mid, hi),
        ).fetchone()
        if row is None:
            hi = mid - 1
        elif row[1] >= ts:
            found, hi = int(row[0]), mid - 1
        else:
            lo = int(row[0]) + 1
    return found


def _date_ranges(
    conn: sqlite3.Connection, scope: str, ranges: _Ranges, start: float, end: float
) -> _Ranges | None:
    """The scope's message keys written in ``[start, end)``, as ranges; None if there are none."""
    lo_key, hi_key = ranges.parts[0]
    if lo_key - ranges.base >= _VAULT_OFFSET:  # only vault documents qualify
        return None
    lo_id, hi_id = lo_key - ranges.base, hi_key - ranges.base
    # Two statements: SQLite answers min() or max() alone from the index, both at once by a scan.
    least = conn.execute(
        "SELECT min(id) FROM messages WHERE scope = ? AND id BETWEEN ? AND ?", (scope, lo_id, hi_id)
    ).fetchone()[0]
    if least is None:
        return None
    most = conn.execute(
        "SELECT max(id) FROM messages WHERE scope = ? AND id BETWEEN ? AND ?", (scope, lo_id, hi_id)
    ).fetchone()[0]
    first = _first_id_from(conn, scope, int(least), int(most), start)
    if first is None:
        return None
    after = _first_id_from(conn, scope, first, int(most), end)
    last = int(most) if after is None else after - 1
    if last < first:
        return None
    return _Ranges(ranges.base, ((ranges.base + first, ranges.base + last),), ranges.docs)


def _load_docs(
    conn: sqlite3.Connection, scope: str, keys: Sequence[int], base: int
) -> dict[int, _Doc]:
    docs: dict[int, _Doc] = {}
    message_ids = {key - base: key for key in keys if key - base < _VAULT_OFFSET}
    vault_ids = {key - base - _VAULT_OFFSET: key for key in keys if key - base >= _VAULT_OFFSET}
    ctx = {}
    if keys:
        marks = ",".join("?" * len(keys))
        ctx = dict(
            conn.execute(f"SELECT rowid, ctx FROM search_fts WHERE rowid IN ({marks})", list(keys))
        )
    if message_ids:
        marks = ",".join("?" * len(message_ids))
        # The scope test is redundant with the rowid range, and kept: isolation is the rule.
        # Chat commands (/search, /facts ...) are talk to the hub, never results.
        for mid, text, agent, ts, sender in conn.execute(
            f"SELECT id, text, agent, ts, sender FROM messages WHERE scope = ? AND id IN ({marks})"
            " AND (via IS NULL OR via != 'command')",
            [scope, *message_ids],
        ):
            key = message_ids[mid]
            docs[key] = _Doc(
                key, "message", mid, text, ctx.get(key) or "", agent, float(ts), sender=sender
            )
    if vault_ids:
        marks = ",".join("?" * len(vault_ids))
        for vid, title, body, agent, updated, importance in conn.execute(
            "SELECT id, title, body, agent, updated,"
            f" CASE WHEN kind = '{_KNOWLEDGE}' THEN json_extract(meta, '$.importance') END"
            f" FROM vault WHERE scope = ? AND id IN ({marks})",
            [scope, *vault_ids],
        ):
            key = vault_ids[vid]
            text = vault_text(title, body)
            weight = None if importance is None else min(1.0, max(0.0, float(importance)))
            docs[key] = _Doc(key, "vault", vid, text, "", agent, float(updated), weight)
    return docs


def search_archive(
    source: Any,
    scope: str,
    query: str,
    k: int = 10,
    method: str = "hybrid",
    *,
    before_id: int | None = None,
    half_life_days: float | None = 30.0,
    now: float | None = None,
    embedder: Embedder | None = None,
) -> list[SearchHit]:
    """Search one scope's messages and vault documents; best first, at most ``k``.

    ``source`` is a Store, a sqlite_utils.Database or a sqlite3.Connection.
    ``method``: ``bm25`` (stemmed BM25), ``fuzzy`` (BM25 over the query with typo
    expansions), ``semantic`` (cosine over stored embeddings), ``hybrid`` (reciprocal rank
    fusion of bm25 and fuzzy, plus semantic when an embedder is given, then query
    coverage and recency) or ``hybrid_semantic`` (hybrid that requires the embedder).
    ``before_id``: only messages with a smaller id (vault documents always qualify).
    Any text is a valid query; one without words returns ``[]``.
    """
    check_method(method, embedder)
    if not isinstance(query, str) or k <= 0:
        return []
    terms = _query_terms(query)
    symbols = _query_symbols(query)
    if not terms and not symbols and method not in ("semantic", "hybrid_semantic"):
        return []
    conn, lock = _resolve(source)
    now = time.time() if now is None else float(now)
    pool = max(50, 3 * k)
    with lock:
        ranges = _scope_ranges(conn, scope, before_id)
        if ranges is None:
            return []
        dfs = {t.word: _count_capped(conn, _phrase(t.word), ranges, _RANK_BUDGET) for t in terms}
        table_idf = _table_idf(conn, source)
        lists: list[list[int]] = []
        dated = method in ("hybrid", "hybrid_semantic") and _DATE_WEIGHT > 0
        windows = [
            window
            for start, end in (_query_dates(query) if dated else [])
            if (window := _date_ranges(conn, scope, ranges, start, end)) is not None
        ]
        deep: list[int] = []
        if method in ("bm25", "hybrid", "hybrid_semantic"):
            # With a date, deeper: the window's own ranking is this list's order within it
            # (the idf is the scope's, so a query over the window alone would rank them the same).
            deep = _ranked(conn, [t.word for t in terms], dfs, ranges, _DATE_DEPTH if windows else pool, table_idf)
            lists.append(deep[:pool])
        if method in ("fuzzy", "hybrid", "hybrid_semantic"):
            _expand_typos(conn, source, terms, dfs, ranges)
            if method == "fuzzy":  # on its own: the whole query, spelling-tolerant
                lists.append(
                    _ranked(conn, [w for t in terms for w in (t.word, *t.alts)], dfs, ranges, pool, table_idf)
                )
            elif any(t.alts for t in terms):  # beside bm25, which already ranks the words as typed
                lists.append(_ranked(conn, [a for t in terms for a in t.alts], dfs, ranges, pool, table_idf))
        if method != "semantic":
            lists.extend(_symbol_matches(conn, scope, ranges, symbol, before_id, pool) for symbol in symbols)
        weights = [1.0] * len(lists)
        for window in windows:
            lo, hi = window.parts[0]
            lists.append([key for key in deep if lo <= key <= hi][:pool])
            weights.append(_DATE_WEIGHT)
        if method in ("hybrid", "hybrid_semantic") and lists and lists[0]:
            lists.append(_predecessors(conn, scope, ranges, lists[0][:pool]))
            weights.append(_NEIGHBOUR_WEIGHT)
        if embedder is not None and method in ("semantic", "hybrid", "hybrid_semantic"):
            lists.append(_semantic(conn, ranges, query, embedder, pool))
            weights.append(1.0)
        blended = method in ("hybrid", "hybrid_semantic")
        fused, shortlist = fuse_ranked_lists(lists, weights, k, pool, blended)
        if not fused:
            return []
        docs = _load_docs(conn, scope, shortlist, ranges.base)
    return rank_documents(shortlist, fused, docs, terms, dfs, k, blended, now, half_life_days)


def check_method(method: str, embedder: Embedder | None) -> None:
    """Raise ``SearchError`` for an unknown method, or a semantic one without an embedder."""
    if method not in SEARCH_METHODS:
        raise SearchError(
            f"unknown search method {method!r}; expected one of {', '.join(SEARCH_METHODS)}"
        )
    if method in ("semantic", "hybrid_semantic") and embedder is None:
        raise SearchError(f"search method {method!r} needs an embedder")

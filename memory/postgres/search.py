"""Archive search on PostgreSQL: ranked full-text search + ``pg_trgm`` typos, SQLite's fusion.

The same pipeline as ``memory/_search.py`` (read its docstring first), with PostgreSQL
doing the matching and the same Python doing the rest (:func:`fuse_ranked_lists`,
:func:`rank_documents`: reciprocal rank fusion, query coverage with the sender credit,
recency, importance; the date list from SQLite's date parsing).

Its tables, functions and triggers are in search_schema.py (read its docstring for the
tables). Text is folded by the ``hub_stem`` configuration: ``unaccent`` then the English Snowball
stemmer without a stopword list (a stopword-only query still finds its words, as on
SQLite). Before parsing, everything that is not a letter or digit becomes a space, so
PostgreSQL's tokens are the ones the Python side sees (no e-mail or URL tokens).

Candidate cap (``ts_rank`` has no top-k shortcut and reads every matching row's
tsvector): SQLite's rank budget. The rarest query words are ranked while their document
frequencies add up to at most ``_RANK_BUDGET`` (5,000), so ``ts_rank`` scores at most
5,000 rows per ranked list; commoner words are left to the coverage term. When even the
rarest word is too common, nothing is ranked: the newest documents holding every word
come first (an ordered scan of the scope's newest rows), then the newest holding any.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rapidfuzz.distance import OSA

from .. import _search_base as shared
from .._search import check_method, fuse_ranked_lists, rank_documents
from .._search_base import (
    _CONTEXT_TURNS,
    _DATE_DEPTH,
    _FUZZY_PER_TERM,
    _FUZZY_RARE,
    _KNOWLEDGE,
    _NEIGHBOUR_WEIGHT,
    _RANK_BUDGET,
    _VAULT_OFFSET,
    STOPWORDS,
    SearchError,
    SearchHit,
    _Doc,
    _Term,
)
from .._search_text import _query_dates, _query_symbols, _query_terms
from .search_schema import CONFIG, SEARCH_TABLES, create_search_schema

if TYPE_CHECKING:
    import psycopg

__all__ = ["SEARCH_TABLES", "create_search_schema", "search_archive"]

_CONFIG = CONFIG  # documents and queries: unaccent + English Snowball, no stopwords
_LEXEME_CONFIG = "simple"  # a typo expansion is a lexeme already: queried as it is
# ts_rank's weight of label D (the neighbouring turns); A (the body) is 1. Measured at 0.3 on
# LoCoMo; SQLite's BM25 moved to 0.5 (memory._search._CTX_WEIGHT), which ts_rank does not follow: on
# PostgreSQL 0.3 and 0.5 rank the same on the tests' corpus. Kept apart until measured again.
_CTX_WEIGHT = 0.3
_RANK_WEIGHTS = f"{{{_CTX_WEIGHT},0,0,1}}"  # ts_rank's {D, C, B, A}
# ts_rank normalisation 1: divide by 1 + log(document length), a mild length penalty
# (BM25's b=0.75 sits between none and 2 = divide by length). Measured on LoCoMo.
_RANK_NORM = 1
_TRGM_THRESHOLD = 0.2  # pg_trgm similarity that makes a vocabulary word a typo candidate
_TRGM_CANDIDATES = 40  # closest words read per typo, before the edit-distance check

# -- plumbing ------------------------------------------------------------------------------------


@contextmanager
def _connection(source: Any) -> Iterator[psycopg.Connection]:
    """A psycopg connection inside one transaction, from a PostgresStore or a connection."""
    import psycopg

    if isinstance(source, psycopg.Connection):
        with source.transaction():
            yield source
        return
    transaction = getattr(source, "transaction", None)
    if transaction is None:
        raise TypeError(f"expected a PostgresStore or a psycopg connection, not {type(source).__name__}")
    with transaction() as conn:
        yield getattr(conn, "raw", conn)


class _Scope:
    """The WHERE clause (and its parameters) restricting search_docs to what may be found."""

    def __init__(self, scope: str, before_id: int | None) -> None:
        self.scope = scope
        self.before_id = before_id
        if before_id is None:
            self.sql = "d.scope = %s"
            self.params: tuple[Any, ...] = (scope,)
        else:  # older messages only; vault documents always qualify
            self.sql = "d.scope = %s AND (d.kind = 1 OR d.id < %s)"
            self.params = (scope, int(before_id))


def _key(kind: int, doc_id: int) -> int:
    return doc_id if kind == 0 else _VAULT_OFFSET + doc_id


# A word to match: (text search configuration, text). The query's own words are parsed
# and stemmed by ``hub_stem``; typo expansions are lexemes of the index, taken as they are.
_Word = tuple[str, str]


def _tsquery(words: Sequence[_Word], joiner: str = " || ") -> tuple[str, list[str]]:
    """SQL of the OR (``||``) or AND (``&&``) of ``words``, and its parameters."""
    sql = joiner.join(f"plainto_tsquery('{config}', %s)" for config, _ in words)
    return f"({sql})", [text for _, text in words]


# -- the query pipeline ----------------------------------------------------------------------------


def _frequencies(
    conn: psycopg.Connection, scope: str, words: Sequence[str]
) -> tuple[int, dict[str, int], dict[str, list[str]]]:
    """The scope's document count, each word's document frequency, and each word's lexemes.

    One round trip, read from ``search_stats`` and ``search_terms`` (nothing is counted).
    A word PostgreSQL splits into several lexemes matches when all are there: its
    frequency is the smallest of theirs.
    """
    rows = conn.execute(
        "SELECT (SELECT docs FROM search_stats WHERE scope = %s), t.w,"
        f" array(SELECT l FROM unnest(tsvector_to_array(to_tsvector('{_CONFIG}', t.w))) AS l ORDER BY l),"
        f" (SELECT min(coalesce(s.docs, 0)) FROM unnest(tsvector_to_array(to_tsvector('{_CONFIG}', t.w))) AS l"
        "   LEFT JOIN search_terms s ON s.lexeme = l AND s.scope = %s)"
        " FROM unnest(%s::text[]) AS t(w)",
        (scope, scope, list(words)),
    ).fetchall()
    docs = int(rows[0][0] or 0) if rows else 0
    dfs = {word: int(df or 0) for _, word, _, df in rows}
    lexemes = {word: list(found) for _, word, found, _ in rows}
    return docs, dfs, lexemes


def _idf(df: int, docs: int) -> float:
    """BM25's idf of a word in ``df`` of the scope's ``docs`` documents."""
    docs = max(docs, df)
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


def _ranked(
    conn: psycopg.Connection,
    where: _Scope,
    words: Sequence[_Word],
    dfs: dict[str, int],
    docs: int,
    limit: int,
) -> list[int]:
    """Document keys ranked by idf-weighted ``ts_rank`` over ``words``, within the rank budget.

    The same budget rule as SQLite's ``_ranked``: the rarest words whose document
    frequencies add up to at most ``_RANK_BUDGET`` are ranked; if none fits, the newest
    documents holding every word, then any, come first.
    """
    present = [w for w in dict.fromkeys(words) if dfs.get(w[1], 0) > 0]
    if not present:
        return []
    chosen: list[_Word] = []
    spent = 0
    for word in sorted(present, key=lambda w: dfs[w[1]]):
        if spent + dfs[word[1]] > _RANK_BUDGET:
            break
        chosen.append(word)
        spent += dfs[word[1]]
    if chosen:
        # ts_rank has no idf: each word is ranked on its own and weighted by BM25's idf
        # in the scope (a rare word outweighs a common one): +4 points hit@10 on LoCoMo
        # over an idf that ignores the scope's size.
        score = " + ".join(
            f"{_idf(dfs[text], docs)!r} * ts_rank('{_RANK_WEIGHTS}', d.tsv, plainto_tsquery('{config}', %s), {_RANK_NORM})"
            for config, text in chosen
        )
        match, params = _tsquery(chosen)
        rows = conn.execute(
            f"SELECT d.kind, d.id FROM search_docs d WHERE {where.sql} AND d.tsv @@ {match}"
            f" ORDER BY {score} DESC, d.kind, d.id LIMIT %s",
            (*where.params, *params, *(text for _, text in chosen), limit),
        ).fetchall()
        return [_key(kind, doc_id) for kind, doc_id in rows]
    newest: dict[int, None] = {}
    expressions = [_tsquery(present, " && ")] if len(present) > 1 else []
    expressions.append(_tsquery(present))
    for match, params in expressions:
        rows = conn.execute(
            f"SELECT d.kind, d.id FROM search_docs d WHERE {where.sql} AND d.tsv @@ {match}"
            " ORDER BY d.kind DESC, d.id DESC LIMIT %s",
            (*where.params, *params, limit - len(newest)),
        ).fetchall()
        for kind, doc_id in rows:
            newest.setdefault(_key(kind, doc_id))
        if len(newest) >= limit:
            break
    return list(newest)


def _expand_typos(
    conn: psycopg.Connection, scope: str, terms: list[_Term], dfs: dict[str, int], lexemes: dict[str, list[str]]
) -> None:
    """Give rare or unknown alphabetic terms close lexemes of this scope's vocabulary.

    ``pg_trgm`` finds the scope's lexemes with enough trigrams in common with the term's
    (GIN index on ``search_terms``); then SQLite's rule decides: same first letter, the
    stems one edit apart (two from eight letters on, an adjacent swap counting one),
    closest first, then the more common. A word used in other scopes is real, merely
    absent here, and is left alone. An expansion is a lexeme (``t.alts``), matched as is.
    """
    needy = [
        t
        for t in terms
        if dfs.get(t.word, 0) <= _FUZZY_RARE
        and t.stem.isalpha()
        and len(t.stem) >= 4
        and len(lexemes.get(t.word, ())) == 1
    ]
    if not needy:
        return
    conn.execute("SELECT set_config('pg_trgm.similarity_threshold', %s, true)", (str(_TRGM_THRESHOLD),))
    # For every needy term at once: its documents in all scopes, and this scope's
    # closest alphabetic lexemes by trigrams (same first letter).
    rows = conn.execute(
        "SELECT t.n, (SELECT coalesce(sum(s.docs), 0) FROM search_terms s WHERE s.lexeme = t.l), c.lexeme, c.docs"
        " FROM unnest(%s::text[]) WITH ORDINALITY AS t(l, n)"
        " LEFT JOIN LATERAL (SELECT lexeme, docs FROM search_terms WHERE scope = %s"
        "   AND lexeme ~ '^[[:alpha:]]+$' AND lexeme %% t.l AND left(lexeme, 1) = left(t.l, 1)"
        "   ORDER BY similarity(lexeme, t.l) DESC, docs DESC LIMIT %s) c ON true"
        " ORDER BY t.n",
        ([lexemes[t.word][0] for t in needy], scope, _TRGM_CANDIDATES),
    ).fetchall()
    everywhere: dict[int, int] = {}
    found: dict[int, list[tuple[str, int]]] = {}
    for number, total, lexeme, docs in rows:
        everywhere[int(number) - 1] = int(total)
        if lexeme is not None:
            found.setdefault(int(number) - 1, []).append((lexeme, int(docs)))
    for index, term in enumerate(needy):
        own = dfs.get(term.word, 0)
        if everywhere.get(index, 0) > own + _FUZZY_RARE:
            continue
        stem = lexemes[term.word][0]
        max_dist = 1 if len(term.word) < 8 else 2
        near: list[tuple[int, int, str]] = []
        for lexeme, docs in found.get(index, ()):
            if lexeme == stem or lexeme in STOPWORDS or docs <= own:
                continue
            dist = OSA.distance(stem, lexeme, score_cutoff=max_dist)
            if dist <= max_dist:
                near.append((dist, -docs, lexeme))
        # Closest first, then the more common spelling (likelier to be what was meant).
        for _dist, minus_docs, lexeme in sorted(near)[:_FUZZY_PER_TERM]:
            term.alts.append(lexeme)
            dfs[lexeme] = -minus_docs


def _symbol_matches(conn: psycopg.Connection, where: _Scope, symbol: str, limit: int) -> list[int]:
    """Keys of the scope's messages and vault documents containing ``symbol``, newest first.

    A scan of the scope's rows (symbols are not in the full-text index); only queries
    that carry a symbol pay for it.
    """
    before = where.before_id if where.before_id is not None else _VAULT_OFFSET
    keys = [
        int(mid)
        for (mid,) in conn.execute(
            "SELECT id FROM messages WHERE scope = %s AND id < %s AND strpos(text, %s) > 0 ORDER BY id DESC LIMIT %s",
            (where.scope, before, symbol, limit),
        ).fetchall()
    ]
    keys += [
        _VAULT_OFFSET + int(vid)
        for (vid,) in conn.execute(
            "SELECT id FROM vault WHERE scope = %s AND (strpos(body, %s) > 0 OR strpos(title, %s) > 0)"
            " ORDER BY id DESC LIMIT %s",
            (where.scope, symbol, symbol, limit),
        ).fetchall()
    ]
    return keys


def _date_windows(conn: psycopg.Connection, where: _Scope, query: str) -> list[tuple[int, int]]:
    """The first and last ids of the scope's messages written on each date the query names
    (SQLite's date list), each from one range scan of the (scope, ts) index."""
    bound = where.before_id if where.before_id is not None else _VAULT_OFFSET
    windows: list[tuple[int, int]] = []
    for start, end in _query_dates(query):
        first, last = conn.execute(
            "SELECT min(id), max(id) FROM messages WHERE scope = %s AND ts >= %s AND ts < %s AND id < %s",
            (where.scope, start, end, bound),
        ).fetchone()
        if first is not None:
            windows.append((int(first), int(last)))
    return windows


def _predecessors(conn: psycopg.Connection, scope: str, keys: Sequence[int]) -> list[int]:
    """The key of the message before each message key (vault keys are skipped)."""
    ids = [key for key in keys if key < _VAULT_OFFSET]
    if not ids:
        return []
    rows = conn.execute(
        "SELECT (SELECT max(m.id) FROM messages m WHERE m.scope = %s AND m.id < x.id)"
        " FROM unnest(%s::bigint[]) WITH ORDINALITY AS x(id, n) ORDER BY x.n",
        (scope, ids),
    ).fetchall()
    return [int(row[0]) for row in rows if row[0] is not None]


def _load_docs(conn: psycopg.Connection, scope: str, keys: Sequence[int]) -> dict[int, _Doc]:
    docs: dict[int, _Doc] = {}
    message_ids = [key for key in keys if key < _VAULT_OFFSET]
    vault_ids = [key - _VAULT_OFFSET for key in keys if key >= _VAULT_OFFSET]
    if message_ids:
        # The neighbouring turns as indexed (for coverage). Chat commands (/search ...)
        # are talk to the hub, never results.
        for mid, text, agent, ts, sender, ctx in conn.execute(
            "SELECT m.id, m.text, m.agent, m.ts, m.sender,"
            " (SELECT string_agg(p.text, ' ' ORDER BY p.id DESC) FROM (SELECT n.id, n.text FROM messages n"
            f"   WHERE n.scope = m.scope AND n.id < m.id ORDER BY n.id DESC LIMIT {_CONTEXT_TURNS}) p)"
            " FROM messages m WHERE m.scope = %s AND m.id = ANY(%s::bigint[])"
            " AND (m.via IS NULL OR m.via <> 'command')",
            (scope, message_ids),
        ).fetchall():
            docs[int(mid)] = _Doc(int(mid), "message", int(mid), text, ctx or "", agent, float(ts), sender=sender)
    if vault_ids:
        for vid, kind, title, body, meta, agent, updated in conn.execute(
            "SELECT id, kind, title, body, meta, agent, updated FROM vault WHERE scope = %s AND id = ANY(%s::bigint[])",
            (scope, vault_ids),
        ).fetchall():
            key = _VAULT_OFFSET + int(vid)
            text = shared.vault_text(title, body)
            docs[key] = _Doc(key, "vault", int(vid), text, "", agent, float(updated), _importance(kind, meta))
    return docs


def _importance(kind: str, meta: str | None) -> float | None:
    """A knowledge fragment's importance in 0..1 (None for other documents or no number)."""
    if kind != _KNOWLEDGE or not meta:
        return None
    try:
        value = json.loads(meta).get("importance")
    except (ValueError, AttributeError):
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    return min(1.0, max(0.0, float(value)))


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
    embedder: Any = None,
) -> list[SearchHit]:
    """Search one scope's messages and vault documents; best first, at most ``k``.

    The contract of SQLite's ``search_archive`` (methods ``bm25``, ``fuzzy``, ``hybrid``;
    ``before_id``; any text is a valid query, one without words returns ``[]``).
    ``source`` is a PostgresStore or a psycopg connection. Semantic methods need stored
    vectors, which the PostgreSQL backend does not keep: they raise ``SearchError``.
    """
    check_method(method, embedder)
    if embedder is not None or method in ("semantic", "hybrid_semantic"):
        raise SearchError("semantic search is not available on PostgreSQL: use hybrid, bm25 or fuzzy")
    if not isinstance(query, str) or k <= 0:
        return []
    terms = _query_terms(query)
    symbols = _query_symbols(query)
    if not terms and not symbols:
        return []
    now = time.time() if now is None else float(now)
    pool = max(50, 3 * k)
    where = _Scope(scope, before_id)
    with _connection(source) as conn:
        docs, dfs, lexemes = _frequencies(conn, scope, [t.word for t in terms]) if terms else (0, {}, {})
        typed: list[_Word] = [(_CONFIG, t.word) for t in terms]
        lists: list[list[int]] = []
        windows = _date_windows(conn, where, query) if method == "hybrid" and shared._DATE_WEIGHT > 0 else []
        deep: list[int] = []
        if method in ("bm25", "hybrid"):
            # With a date, deeper: the window's own ranking is this list's order within it.
            deep = _ranked(conn, where, typed, dfs, docs, _DATE_DEPTH if windows else pool)
            lists.append(deep[:pool])
        if method in ("fuzzy", "hybrid"):
            _expand_typos(conn, scope, terms, dfs, lexemes)
            alts: list[_Word] = [(_LEXEME_CONFIG, a) for t in terms for a in t.alts]
            if method == "fuzzy":  # on its own: the whole query, spelling-tolerant
                lists.append(_ranked(conn, where, typed + alts, dfs, docs, pool))
            elif alts:  # beside bm25, which already ranks the words as typed
                lists.append(_ranked(conn, where, alts, dfs, docs, pool))
        lists.extend(_symbol_matches(conn, where, symbol, pool) for symbol in symbols)
        weights = [1.0] * len(lists)
        for first, last in windows:  # message keys are their ids; vault keys lie above
            lists.append([key for key in deep if first <= key <= last][:pool])
            weights.append(shared._DATE_WEIGHT)
        if method == "hybrid" and lists and lists[0]:
            lists.append(_predecessors(conn, scope, lists[0][:pool]))
            weights.append(_NEIGHBOUR_WEIGHT)
        blended = method == "hybrid"
        fused, shortlist = fuse_ranked_lists(lists, weights, k, pool, blended)
        if not fused:
            return []
        loaded = _load_docs(conn, scope, shortlist)
    return rank_documents(shortlist, fused, loaded, terms, dfs, k, blended, now, half_life_days)

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

import array
import math
import re
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from weakref import WeakKeyDictionary

from rapidfuzz import process
from rapidfuzz.distance import OSA

from .errors import StoreError

if TYPE_CHECKING:
    import sqlite_utils

__all__ = [
    "SEARCH_METHODS",
    "Embedder",
    "LiteLLMEmbedder",
    "SearchError",
    "SearchHit",
    "create_search_schema",
    "index_embeddings",
    "search_archive",
]

SEARCH_METHODS = ("hybrid", "bm25", "fuzzy", "semantic", "hybrid_semantic")

_SCOPE_SPAN = 1 << 40  # rowids per scope
_VAULT_OFFSET = 1 << 39  # vault documents sit in the upper half of a scope's range

_BODY_WEIGHT = 1.0
# The neighbouring turns' weight, at query time: a BM25 column weight and the credit of a
# query term met only there in coverage. A reply ("Exhausting, but I finished!") is found
# through the question before it more often than a passing mention of one query word is
# the answer. LoCoMo dev, hybrid hit@10 over its 760 questions (per conversation, 5 folds):
# 0.3 → 0.786 (0.791 ± 0.033), 0.4 → 0.797, 0.5 → 0.801 (0.806 ± 0.033), 0.6 → 0.791,
# 0.7 → 0.786; choosing it on four conversations and scoring the fifth: 0.793. Also swept
# with it, and left as they were (no lead beyond a question or two): the predecessor vote
# 0.5 / 1.0, coverage 0.5 / 1 / 2, recency 0 / 0.1.
_CTX_WEIGHT = 0.5
_CONTEXT_TURNS = 2

_MAX_QUERY_CHARS = 4000  # a pasted page is still a valid query; its head is plenty
_MAX_TERMS = 16
_MAX_TOKEN_CHARS = 64
# A ranked FTS5 query scores every row matching any of its terms; beyond this many rows
# the common terms are left to the coverage term (or, if all are common, the newest
# matches come first): keeps a common-word query over a million rows in milliseconds.
_RANK_BUDGET = 5_000
_RRF_K = 60.0
# The message just before a match is often what the match answers ("How was the support
# group?" -> "It was great, ..."): each BM25 hit votes for its predecessor at this weight.
# The index-time ``ctx`` column covers the other direction. +1.5 points hit@10 on LoCoMo.
_NEIGHBOUR_WEIGHT = 0.5
_IDF_N = 10_000.0  # idf of coverage weights from capped counts: only ratios matter
_COVERAGE_WEIGHT = 0.5  # in units of one first-place RRF vote
_RECENCY_WEIGHT = 0.1  # a tie-breaker: about a few places in one list for a message from today
_MAX_BONUS = _COVERAGE_WEIGHT + _RECENCY_WEIGHT
_RERANK_DEPTH = 30
_FUZZY_RARE = 2  # a term found in at most this many documents of the scope gets expansions
_FUZZY_PER_TERM = 2
_SNIPPET_CHARS = 200
# A query word naming the person who sent a message ("What did Melanie paint?") is met by
# that message as if the name were in its text: the answer rarely names its own speaker,
# while greetings that do ("Hey Melanie!") say nothing. Coverage only, never BM25.
_SENDER_CREDIT = 1.0
# A date in the query ("on 8 May, 2023", "in July 2023") adds a ranked list: BM25 over the
# messages written in that window (a day, with a day's slack each side, or a month),
# weighted as two lists: chosen on the LoCoMo folds (1 or 2, nested: 2 in 4 of 5).
_DATE_WEIGHT = 2.0
_DATE_SLACK_S = 86_400.0
_MAX_DATES = 2
# How far down the BM25 list the window's messages are looked for: one ranked query, not
# one per window (a second BM25 pass cost +23 ms p50 at 100,000 messages).
_DATE_DEPTH = 1_000
# Knowledge fragments (reflection) carry an importance in 0..1: their score is multiplied
# by (1 - w) + w * importance, never raised, so the shortlist's floor stays an upper bound.
_KNOWLEDGE = "knowledge"
_IMPORTANCE_WEIGHT = 0.5

# Short and general: question words and function words only; content words stay.
# QUESTION_FRAMING frames questions ("What kind of ...", "Would she likely ...", "What is the name of
# ...") and is rarely the words of the answer: +0.5 points hit@10 on the LoCoMo folds.
_STOPWORD_TEXT = """a about above after again against ago all also am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each else ever few for
    from further get got had has have having he her here hers herself him himself his how i if in into is
    it its itself just let me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own please same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up us very was we were what
    when where which while who whom whose why will with would you your yours yourself yourselves
    s t d ll m re ve don didn doesn isn wasn weren won wouldn aren hasn haven couldn shouldn hadn mustn needn mightn shan"""
_FRAMING_TEXT = "kind type sort likely might think currently recently name names"
QUESTION_FRAMING = frozenset(_FRAMING_TEXT.split())
STOPWORDS = frozenset(_STOPWORD_TEXT.split()) | QUESTION_FRAMING


class SearchError(StoreError):
    """A search could not run as asked (unknown method, missing embedder or numpy)."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result: a message or a vault document of the caller's scope."""

    id: int  # message id, or vault id when kind == "vault"
    kind: str  # "message" or "vault"
    score: float
    text: str
    snippet: str  # at most about 200 characters, around the first match
    agent: str | None
    ts: float
    importance: float | None = None  # knowledge fragments (vault kind "knowledge") only


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors (same length for every text)."""

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class LiteLLMEmbedder:
    """Embeddings through ``litellm.embedding`` (any provider litellm knows)."""

    def __init__(self, model: str, api_base: str | None = None, **kwargs: Any) -> None:
        self.model = model
        self.api_base = api_base
        self.kwargs = kwargs

    @property
    def name(self) -> str:
        return self.model

    def embed(self, texts: list[str]) -> list[list[float]]:
        import litellm  # heavy and optional on this path: import when used

        response = litellm.embedding(
            model=self.model, input=texts, api_base=self.api_base, **self.kwargs
        )
        rows = sorted(response.data, key=lambda item: item["index"])
        return [list(map(float, row["embedding"])) for row in rows]


# -- schema ---------------------------------------------------------------------------------


def _key_expr(scope: str, id_expr: str, offset: int = 0) -> str:
    num = f"(SELECT num FROM search_scopes WHERE scope = {scope})"
    return (
        f"{num} * {_SCOPE_SPAN} + {offset} + {id_expr}"
        if offset
        else f"{num} * {_SCOPE_SPAN} + {id_expr}"
    )


def _ctx_expr(scope: str, id_expr: str) -> str:
    return (
        "coalesce((SELECT group_concat(text, ' ') FROM (SELECT text FROM messages"
        f" WHERE scope = {scope} AND id < {id_expr} ORDER BY id DESC LIMIT {_CONTEXT_TURNS})), '')"
    )


def create_search_schema(db: sqlite_utils.Database) -> None:
    """Migration step: the FTS5 index, its triggers, the vector table; indexes existing rows."""
    conn = db.conn
    conn.execute("CREATE TABLE search_scopes (num INTEGER PRIMARY KEY, scope TEXT NOT NULL UNIQUE)")
    conn.execute(
        "CREATE VIRTUAL TABLE search_fts USING fts5(body, ctx,"
        " tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    conn.execute("CREATE VIRTUAL TABLE search_vocab USING fts5vocab(search_fts, 'row')")
    conn.execute(
        "CREATE TABLE search_vectors (doc INTEGER PRIMARY KEY, model TEXT NOT NULL, vec BLOB NOT NULL)"
    )
    msg_new = _key_expr("new.scope", "new.id")
    msg_old = _key_expr("old.scope", "old.id")
    vault_new = _key_expr("new.scope", "new.id", _VAULT_OFFSET)
    vault_old = _key_expr("old.scope", "old.id", _VAULT_OFFSET)
    vault_text = "CASE WHEN new.title = '' THEN new.body ELSE new.title || char(10) || new.body END"
    add_message = (
        "INSERT OR IGNORE INTO search_scopes(scope) VALUES (new.scope);"
        f" INSERT INTO search_fts(rowid, body, ctx) VALUES ({msg_new}, new.text, {_ctx_expr('new.scope', 'new.id')});"
    )
    drop_message = (
        f"DELETE FROM search_fts WHERE rowid = {msg_old};"
        f" DELETE FROM search_vectors WHERE doc = {msg_old};"
    )
    add_vault = (
        "INSERT OR IGNORE INTO search_scopes(scope) VALUES (new.scope);"
        f" INSERT INTO search_fts(rowid, body, ctx) VALUES ({vault_new}, {vault_text}, '');"
    )
    drop_vault = (
        f"DELETE FROM search_fts WHERE rowid = {vault_old};"
        f" DELETE FROM search_vectors WHERE doc = {vault_old};"
    )
    conn.execute(
        f"CREATE TRIGGER search_messages_ai AFTER INSERT ON messages BEGIN {add_message} END"
    )
    conn.execute(
        f"CREATE TRIGGER search_messages_ad AFTER DELETE ON messages BEGIN {drop_message} END"
    )
    conn.execute(
        f"CREATE TRIGGER search_messages_au AFTER UPDATE OF text, scope ON messages BEGIN {drop_message} {add_message} END"
    )
    conn.execute(f"CREATE TRIGGER search_vault_ai AFTER INSERT ON vault BEGIN {add_vault} END")
    conn.execute(f"CREATE TRIGGER search_vault_ad AFTER DELETE ON vault BEGIN {drop_vault} END")
    conn.execute(
        f"CREATE TRIGGER search_vault_au AFTER UPDATE OF title, body, scope ON vault BEGIN {drop_vault} {add_vault} END"
    )
    # Erasing a scope drops its whole range, whether its messages go before or after the
    # scope row: a message deleted later finds no scope number and is already gone.
    lo = f"(SELECT num FROM search_scopes WHERE scope = old.scope) * {_SCOPE_SPAN}"
    conn.execute(
        "CREATE TRIGGER search_scopes_ad AFTER DELETE ON scopes BEGIN"
        f" DELETE FROM search_fts WHERE rowid BETWEEN {lo} AND {lo} + {_SCOPE_SPAN - 1};"
        f" DELETE FROM search_vectors WHERE doc BETWEEN {lo} AND {lo} + {_SCOPE_SPAN - 1};"
        " DELETE FROM search_scopes WHERE scope = old.scope;"
        " END"
    )
    # Rows written before this migration.
    conn.execute(
        "INSERT OR IGNORE INTO search_scopes(scope)"
        " SELECT scope FROM (SELECT DISTINCT scope FROM messages UNION SELECT DISTINCT scope FROM vault) ORDER BY scope"
    )
    conn.execute(
        "INSERT INTO search_fts(rowid, body, ctx)"
        f" SELECT {_key_expr('m.scope', 'm.id')}, m.text, {_ctx_expr('m.scope', 'm.id')} FROM messages m"
    )
    conn.execute(
        "INSERT INTO search_fts(rowid, body, ctx)"
        f" SELECT {_key_expr('v.scope', 'v.id', _VAULT_OFFSET)},"
        " CASE WHEN v.title = '' THEN v.body ELSE v.title || char(10) || v.body END, '' FROM vault v"
    )


def count_search_documents(db: sqlite_utils.Database) -> None:
    """Migration step: ``search_scopes.docs``, each scope's indexed documents (BM25's N,
    so that idf is the scope's own), counted now and kept by triggers from then on."""
    conn = db.conn
    conn.execute("ALTER TABLE search_scopes ADD COLUMN docs INTEGER NOT NULL DEFAULT 0")
    # Separate triggers beside the index's: an upsert, so that whichever fires first, a
    # new scope's row exists and its first document is counted.
    add = "INSERT INTO search_scopes(scope, docs) VALUES (new.scope, 1) ON CONFLICT(scope) DO UPDATE SET docs = docs + 1;"
    drop = "UPDATE search_scopes SET docs = docs - 1 WHERE scope = old.scope;"
    for table in ("messages", "vault"):
        conn.execute(f"CREATE TRIGGER search_count_{table}_ai AFTER INSERT ON {table} BEGIN {add} END")
        conn.execute(f"CREATE TRIGGER search_count_{table}_ad AFTER DELETE ON {table} BEGIN {drop} END")
        conn.execute(
            f"CREATE TRIGGER search_count_{table}_au AFTER UPDATE OF scope ON {table}"
            f" WHEN old.scope IS NOT new.scope BEGIN {drop} {add} END"
        )
    conn.execute(
        "UPDATE search_scopes SET docs = (SELECT count(*) FROM messages m WHERE m.scope = search_scopes.scope)"
        " + (SELECT count(*) FROM vault v WHERE v.scope = search_scopes.scope)"
    )


# -- text -------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(r"[^\W_]+")


# Emoji and other non-ASCII symbols are separators to FTS5's unicode61 tokenizer, so they
# are never indexed: a query's symbol runs ("🎉", "€") are matched as exact substrings.
_SYMBOL_RUN_RE = re.compile(r"[^\w\s\x00-\x7f]+")
_MAX_SYMBOLS = 4


def _query_symbols(query: str) -> list[str]:
    """The runs of non-ASCII symbols in a query (emoji with their joiners), distinct, in order."""
    found: dict[str, None] = {}
    for run in _SYMBOL_RUN_RE.findall(query[:_MAX_QUERY_CHARS]):
        run = run.strip("".join(ch for ch in run if unicodedata.category(ch).startswith("P")))[:_MAX_TOKEN_CHARS]
        if run and any(unicodedata.category(ch).startswith("S") for ch in run):
            found.setdefault(run)
            if len(found) >= _MAX_SYMBOLS:
                break
    return list(found)


def _fold(text: str) -> str:
    """Lower case without diacritics, like FTS5's ``unicode61 remove_diacritics 2``."""
    text = text.lower()
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _cons(word: str, i: int) -> bool:
    ch = word[i]
    if ch in "aeiou":
        return False
    if ch == "y":
        return i == 0 or not _cons(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant sequences."""
    n, i, size = 0, 0, len(stem)
    while i < size and _cons(stem, i):
        i += 1
    while i < size:
        while i < size and not _cons(stem, i):
            i += 1
        if i >= size:
            break
        while i < size and _cons(stem, i):
            i += 1
        n += 1
    return n


def _has_vowel(stem: str) -> bool:
    return any(not _cons(stem, i) for i in range(len(stem)))


def _double_cons(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _cons(word, len(word) - 1)


def _cvc(word: str) -> bool:
    size = len(word)
    return (
        size >= 3
        and _cons(word, size - 3)
        and not _cons(word, size - 2)
        and _cons(word, size - 1)
        and word[-1] not in "wxy"
    )


_STEP2 = (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"),
    ("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"),
    ("ization", "ize"), ("ation", "ate"), ("ator", "ate"), ("alism", "al"), ("iveness", "ive"),
    ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"),
    ("logi", "log"),
)  # fmt: skip
_STEP3 = (
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
)
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou",
    "ism", "ate", "iti", "ous", "ive", "ize",
)  # fmt: skip


@lru_cache(maxsize=262_144)
def porter_stem(word: str) -> str:
    """The Porter (1980) stem of a folded token, identical to FTS5's ``porter`` tokenizer."""
    if len(word) < 3 or len(word) > 64 or not word.isascii():
        return word
    w = word
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif not w.endswith("ss") and w.endswith("s"):
        w = w[:-1]
    extra = False
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    elif w.endswith("ed") and _has_vowel(w[:-2]):
        w, extra = w[:-2], True
    elif w.endswith("ing") and _has_vowel(w[:-3]):
        w, extra = w[:-3], True
    if extra:
        if w.endswith(("at", "bl", "iz")):
            w += "e"
        elif _double_cons(w) and w[-1] not in "lsz":
            w = w[:-1]
        elif _measure(w) == 1 and _cvc(w):
            w += "e"
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    for suffix, repl in _STEP2:
        if w.endswith(suffix):
            if _measure(w[: -len(suffix)]) > 0:
                w = w[: -len(suffix)] + repl
            break
    for suffix, repl in _STEP3:
        if w.endswith(suffix):
            if _measure(w[: -len(suffix)]) > 0:
                w = w[: -len(suffix)] + repl
            break
    for suffix in _STEP4:
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            if _measure(stem) > 1 and (suffix != "ion" or stem[-1:] in ("s", "t")):
                w = stem
            break
    if w.endswith("e"):
        stem = w[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _cvc(stem)):
            w = stem
    if w.endswith("ll") and _measure(w) > 1:
        w = w[:-1]
    return w


def _text_stems(text: str) -> set[str]:
    return {porter_stem(tok) for tok in set(_TOKEN_RE.findall(_fold(text)))}


@dataclass
class _Term:
    word: str  # folded token, what goes (quoted) into MATCH
    stem: str
    # Typo expansions: words from the vocabulary, spelled so FTS5 stems them as indexed.
    alts: list[str] = field(default_factory=list)


def _query_terms(query: str) -> list[_Term]:
    """Distinct content terms of a query, in order; its plain words if it has only stopwords."""
    words = [_fold(tok)[:_MAX_TOKEN_CHARS] for tok in _TOKEN_RE.findall(query[:_MAX_QUERY_CHARS])]
    content = [w for w in words if w not in STOPWORDS] or words
    terms: dict[str, _Term] = {}
    for word in content:
        stem = porter_stem(word)
        if stem and stem not in terms:
            terms[stem] = _Term(word, stem)
            if len(terms) >= _MAX_TERMS:
                break
    return list(terms.values())


def _phrase(word: str) -> str:
    # Tokens hold letters and digits only, so they can never close the quotes.
    return '"' + word.replace('"', "") + '"'


def _match_expr(words: Sequence[str]) -> str:
    return " OR ".join(_phrase(w) for w in dict.fromkeys(words))


def _snippet(text: str, stems: set[str], width: int = _SNIPPET_CHARS) -> str:
    """About ``width`` characters of ``text`` around its first word with one of ``stems``."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    start = 0
    for match in _TOKEN_RE.finditer(flat):
        if porter_stem(_fold(match.group())) in stems:
            start = match.start()
            break
    begin = max(0, min(start - width // 4, len(flat) - width))
    if begin > 0:  # do not cut a word in half
        space = flat.find(" ", begin)
        begin = space + 1 if 0 <= space < start else begin
    end = min(len(flat), begin + width - 2)
    if end < len(flat):
        space = flat.rfind(" ", begin, end)
        end = space if space > begin + width // 2 else end
    return ("…" if begin > 0 else "") + flat[begin:end] + ("…" if end < len(flat) else "")


# -- connection plumbing ------------------------------------------------------------------------


def _resolve(source: Any) -> tuple[sqlite3.Connection, Any]:
    """The connection and lock of a Store, a sqlite_utils.Database or a bare connection."""
    if isinstance(source, sqlite3.Connection):
        return source, nullcontext()
    lock = getattr(source, "_lock", None)
    conn = getattr(source, "conn", None)
    if not isinstance(conn, sqlite3.Connection):
        raise TypeError(
            f"expected a Store, a sqlite_utils.Database or a sqlite3.Connection, not {type(source).__name__}"
        )
    return conn, lock if lock is not None else nullcontext()


@dataclass(frozen=True, slots=True)
class _Ranges:
    """FTS rowid ranges (inclusive) of one scope's searchable documents."""

    base: int
    parts: tuple[tuple[int, int], ...]
    docs: int = 0  # the whole scope's documents (BM25's N)


def _scope_ranges(conn: sqlite3.Connection, scope: str, before_id: int | None) -> _Ranges | None:
    row = conn.execute("SELECT num, docs FROM search_scopes WHERE scope = ?", (scope,)).fetchone()
    if row is None:
        return None
    base, docs = int(row[0]) * _SCOPE_SPAN, int(row[1])
    vault = (base + _VAULT_OFFSET, base + _SCOPE_SPAN - 1)
    if before_id is None:
        return _Ranges(base, ((base, base + _SCOPE_SPAN - 1),), docs)
    cap = min(max(int(before_id), 0), _VAULT_OFFSET)
    if cap <= 1:  # no message qualifies; vault documents still do
        return _Ranges(base, (vault,), docs)
    return _Ranges(base, ((base, base + cap - 1), vault), docs)


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


# -- the query pipeline ----------------------------------------------------------------------------


def _count_capped(conn: sqlite3.Connection, expr: str, ranges: _Ranges, cap: int) -> int:
    total = 0
    for lo, hi in ranges.parts:
        total += conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM search_fts WHERE search_fts MATCH ? AND rowid BETWEEN ? AND ? LIMIT ?)",
            (expr, lo, hi, cap + 1 - total),
        ).fetchone()[0]
        if total > cap:
            break
    return total


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


_MONTHS = {
    name: number
    for number, names in enumerate(
        ("jan january", "feb february", "mar march", "apr april", "may", "jun june", "jul july",
         "aug august", "sep sept september", "oct october", "nov november", "dec december"),
        start=1,
    )
    for name in names.split()
}  # fmt: skip
_MONTH_RE = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b\.?"
_DAY_RE = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR_RE = r"((?:19|20)\d\d)\b"
_DATE_PATTERNS = (
    re.compile(rf"\b{_DAY_RE}\s+(?:of\s+)?{_MONTH_RE},?\s*{_YEAR_RE}"),  # 8 May, 2023
    re.compile(rf"\b{_MONTH_RE}\s*{_DAY_RE},?\s*{_YEAR_RE}"),  # May 8, 2023
    re.compile(rf"\b{_MONTH_RE},?\s*{_YEAR_RE}"),  # May 2023
)


def _query_dates(query: str) -> list[tuple[float, float]]:
    """Time windows (UTC seconds, start inclusive, end exclusive) named by dates in a query.

    A full date ("8 May, 2023", "May 8th 2023") is its day with a day's slack each side; a
    month with its year ("July 2023") is that month. A month alone or a weekday is left
    to the words: which year or week is meant is a guess.
    """
    text = _fold(query[:_MAX_QUERY_CHARS])
    windows: list[tuple[float, float]] = []
    taken: list[tuple[int, int]] = []
    for number, pattern in enumerate(_DATE_PATTERNS):
        for match in pattern.finditer(text):
            if any(a < match.end() and match.start() < b for a, b in taken):
                continue
            groups = match.groups()
            try:
                if number == 0:
                    day, month, year = int(groups[0]), _MONTHS[groups[1]], int(groups[2])
                elif number == 1:
                    month, day, year = _MONTHS[groups[0]], int(groups[1]), int(groups[2])
                else:
                    month, day, year = _MONTHS[groups[0]], 0, int(groups[1])
                if day:  # the day, and a day either side (time zones, "yesterday")
                    start = datetime(year, month, day, tzinfo=UTC).timestamp() - _DATE_SLACK_S
                    end = start + 86_400.0 + 2 * _DATE_SLACK_S
                else:
                    start = datetime(year, month, 1, tzinfo=UTC).timestamp()
                    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC).timestamp()
            except ValueError:
                continue
            taken.append(match.span())
            windows.append((start, end))
            if len(windows) >= _MAX_DATES:
                return windows
    return windows[:_MAX_DATES]


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


def _recency(ts: float, now: float, half_life_days: float | None) -> float:
    if not half_life_days or half_life_days <= 0:
        return 0.0
    age_days = max(0.0, now - ts) / 86400.0
    return math.pow(0.5, age_days / half_life_days)


@dataclass
class _Doc:
    key: int
    kind: str
    id: int
    text: str
    ctx: str
    agent: str | None
    ts: float
    importance: float | None = None
    sender: str | None = None


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
            text = f"{title}\n{body}" if title else body
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


def fuse_ranked_lists(
    lists: Sequence[Sequence[int]], weights: Sequence[float], k: int, pool: int, blended: bool
) -> tuple[dict[int, float], list[int]]:
    """Reciprocal rank fusion of ranked document keys, and the shortlist worth re-ranking.

    Backend-independent (SQLite and PostgreSQL search share it): a key is any int that
    names one document of the scope.
    """
    fused: dict[int, float] = {}
    for ranked, weight in zip(lists, weights, strict=True):
        for rank, key in enumerate(ranked[:pool]):
            fused[key] = fused.get(key, 0.0) + weight / (_RRF_K + rank + 1)
    if not fused:
        return fused, []
    if blended:
        ordered = sorted(fused, key=fused.__getitem__, reverse=True)
        # Coverage and recency add at most max_bonus: whatever trails the k-th fused score
        # by more can never reach the top k, so it is neither loaded nor tokenized.
        floor = fused[ordered[min(k, len(ordered)) - 1]] - _MAX_BONUS / (_RRF_K + 1)
        # The head is re-ranked; past it, tokenizing texts costs more than it moves.
        shortlist = [key for key in ordered[: max(_RERANK_DEPTH, 3 * k)] if fused[key] >= floor]
    else:  # a single list: its own order (a symbol's matches when the words found nothing)
        shortlist = list(next((ranked for ranked in lists if ranked), [])[:k])
    return fused, shortlist


def rank_documents(
    shortlist: Sequence[int],
    fused: dict[int, float],
    docs: dict[int, _Doc],
    terms: Sequence[_Term],
    dfs: dict[str, int],
    k: int,
    blended: bool,
    now: float,
    half_life_days: float | None,
) -> list[SearchHit]:
    """The shortlist scored (fused rank + query coverage + recency, importance) as hits, best first.

    Backend-independent: ``docs`` maps each shortlisted key to its loaded document,
    ``dfs`` gives each query word and typo expansion its (capped) document frequency.
    """
    wanted = [{t.stem, *(porter_stem(a) for a in t.alts)} for t in terms]
    # Rarer terms say more about a document: weight each by an idf over the capped counts.
    term_weights = [
        math.log(1.0 + _IDF_N / (1.0 + max([dfs.get(t.word, 0), *(dfs.get(a, 0) for a in t.alts)])))
        for t in terms
    ]
    weight_sum = sum(term_weights) or 1.0
    unit = 1.0 / (_RRF_K + 1)
    scored: list[tuple[float, _Doc]] = []
    for key in shortlist:
        doc = docs.get(key)
        if doc is None:
            continue
        score = fused[key]
        if blended:
            coverage = 0.0
            if wanted:
                body, ctx = _text_stems(doc.text), _text_stems(doc.ctx)
                # A term met only in the neighbouring turns counts as much as their BM25 weight.
                sender = _text_stems(doc.sender) if doc.sender and _SENDER_CREDIT else set()
                coverage = (
                    sum(
                        w
                        * (
                            1.0
                            if group & body
                            else _SENDER_CREDIT
                            if group & sender
                            else _CTX_WEIGHT
                            if group & ctx
                            else 0.0
                        )
                        for group, w in zip(wanted, term_weights, strict=True)
                    )
                    / weight_sum
                )
            score += unit * (
                _COVERAGE_WEIGHT * coverage
                + _RECENCY_WEIGHT * _recency(doc.ts, now, half_life_days)
            )
            if doc.importance is not None:
                score *= (1.0 - _IMPORTANCE_WEIGHT) + _IMPORTANCE_WEIGHT * doc.importance
        scored.append((score, doc))
    if blended:
        scored.sort(key=lambda item: item[0], reverse=True)
    all_stems = set().union(*wanted) if wanted else set()
    hits = [
        SearchHit(
            id=doc.id,
            kind=doc.kind,
            score=score,
            text=doc.text,
            snippet=_snippet(doc.text, all_stems),
            agent=doc.agent,
            ts=doc.ts,
            importance=doc.importance,
        )
        for score, doc in scored[:k]
    ]
    return hits


# -- embeddings -----------------------------------------------------------------------------------


def _embedder_name(embedder: Embedder) -> str:
    return str(
        getattr(embedder, "name", None)
        or getattr(embedder, "model", None)
        or type(embedder).__name__
    )


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as exc:  # not a declared dependency
        raise SearchError("semantic search needs numpy: pip install numpy") from exc
    return numpy


def index_embeddings(source: Any, scope: str, embedder: Embedder, *, batch_size: int = 64) -> int:
    """Embed the scope's messages and vault documents that have no vector from this embedder yet.

    Returns how many were embedded. Vectors are float32 blobs keyed by document key.
    """
    conn, lock = _resolve(source)
    model = _embedder_name(embedder)
    with lock:
        ranges = _scope_ranges(conn, scope, None)
        if ranges is None:
            return 0
        lo, hi = ranges.parts[0]
        missing = conn.execute(
            "SELECT f.rowid, f.body FROM search_fts f WHERE f.rowid BETWEEN ? AND ?"
            " AND NOT EXISTS (SELECT 1 FROM search_vectors v WHERE v.doc = f.rowid AND v.model = ?)",
            (lo, hi, model),
        ).fetchall()
    done = 0
    for start in range(0, len(missing), batch_size):
        chunk = missing[start : start + batch_size]
        vectors = embedder.embed([body for _, body in chunk])
        if len(vectors) != len(chunk):
            raise SearchError(f"embedder returned {len(vectors)} vectors for {len(chunk)} texts")
        rows = [
            (key, model, array.array("f", vec).tobytes())
            for (key, _), vec in zip(chunk, vectors, strict=True)
        ]
        with lock, _write(conn):
            # A document erased while we were embedding must not come back as a vector.
            conn.executemany(
                "INSERT OR REPLACE INTO search_vectors(doc, model, vec)"
                " SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM search_fts WHERE rowid = ?)",
                [(*row, row[0]) for row in rows],
            )
        done += len(rows)
    return done


@contextmanager
def _write(conn: sqlite3.Connection) -> Iterator[None]:
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _semantic(
    conn: sqlite3.Connection, ranges: _Ranges, query: str, embedder: Embedder, limit: int
) -> list[int]:
    """Document keys by cosine similarity to the query (brute force over the scope)."""
    np = _numpy()
    model = _embedder_name(embedder)
    keys: list[int] = []
    blobs: list[bytes] = []
    for lo, hi in ranges.parts:
        for key, blob in conn.execute(
            "SELECT doc, vec FROM search_vectors WHERE doc BETWEEN ? AND ? AND model = ?",
            (lo, hi, model),
        ):
            keys.append(key)
            blobs.append(blob)
    if not keys or not query.strip():
        return []
    qvec = np.asarray(embedder.embed([query])[0], dtype=np.float32)
    dim = qvec.shape[0]
    usable = [i for i, blob in enumerate(blobs) if len(blob) == 4 * dim]
    if not usable:
        return []
    matrix = np.frombuffer(b"".join(blobs[i] for i in usable), dtype=np.float32).reshape(
        len(usable), dim
    )
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(qvec) or 1.0)
    sims = matrix @ qvec / np.where(norms == 0, 1.0, norms)
    top = np.argsort(-sims)[:limit]
    return [keys[usable[int(i)]] for i in top]

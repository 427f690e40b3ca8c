"""The archive search's constants (each measured; see memory/_search.py) and the types its modules share.

Tunable constants live in :mod:`._search_base`; ``eval/search_cv.py`` sets them in every search module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .errors import StoreError

if TYPE_CHECKING:
    pass


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
    sender: str | None = None  # who wrote a person's message; None for the bot's replies and vault documents


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors (same length for every text)."""

    def embed(self, texts: list[str]) -> list[list[float]]: ...


@dataclass
class _Term:
    word: str  # folded token, what goes (quoted) into MATCH
    stem: str
    # Typo expansions: words from the vocabulary, spelled so FTS5 stems them as indexed.
    alts: list[str] = field(default_factory=list)


def vault_text(title: str, body: str) -> str:
    """A kept item as a search hit shows it: its title, then its body; the body alone when
    the title is only the body's own beginning (a note titled by its first line), so a
    short note is not said twice."""
    if not title or body.startswith(title.rstrip("…").rstrip()):
        return body
    return f"{title}\n{body}"


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

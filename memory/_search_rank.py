"""Rank fusion: reciprocal-rank fusion of the ranked lists, then coverage, recency and importance.

Tunable constants live in :mod:`._search_base`; ``eval/search_cv.py`` sets them in every search module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass
from ._search_base import (
    _COVERAGE_WEIGHT,
    _CTX_WEIGHT,
    _IDF_N,
    _IMPORTANCE_WEIGHT,
    _MAX_BONUS,
    _RECENCY_WEIGHT,
    _RERANK_DEPTH,
    _RRF_K,
    _SENDER_CREDIT,
    SearchHit,
    _Doc,
    _Term,
)
from ._search_text import _snippet, _text_stems, porter_stem


def _recency(ts: float, now: float, half_life_days: float | None) -> float:
    if not half_life_days or half_life_days <= 0:
        return 0.0
    age_days = max(0.0, now - ts) / 86400.0
    return math.pow(0.5, age_days / half_life_days)


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
            sender=doc.sender,
        )
        for score, doc in scored[:k]
    ]
    return hits

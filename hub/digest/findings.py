"""Knowledge extraction after a request that found something worth keeping (seed 003).

Reflection distills old episodes once a day; this keeps, right after a reply, what the
request itself found: when the agent searched the archive (``search_memory``) and its
reply states something the results say, that statement becomes a knowledge fragment
(archive search finds it, ranked with its importance) and the agent's research entry
(its lessons section lists it with the sources).

Extractive, no model call: a fragment is one or two sentences of the reply, kept only if
every name, number and date in them is in the search results it drew on
(:func:`~.text.untraceable`) and it shares content words with one of them. A reply's
invention, or a reply that found nothing, keeps nothing. One fragment per reply at most
(:func:`scopehub.memory.add_knowledge` with ``reply``), so the work after a reply may run
again after a pause without keeping it twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from scopehub.hub.digest.text import Salience, SourceText, content_words, sentences, untraceable
from scopehub.memory import Knowledge, Message, SearchHit, Store, add_knowledge

__all__ = ["Finding", "find_in_reply", "keep_finding", "searched_for"]

log = logging.getLogger(__name__)

SEARCH_TOOL = "search_memory"
SEARCH_RESULTS = 5  # as the tool asks (agents/_memory_tool.py)
MIN_SHARED = 2  # content words a sentence shares with a result: it is about what was found
MAX_SENTENCES = 2
IMPORTANCE_HALF = 4.0  # the salience that maps to importance 0.5


@dataclass(frozen=True, slots=True)
class Finding:
    """A fragment about to be kept: the reply's sentences and the results they came from."""

    text: str
    importance: float
    messages: tuple[int, ...]
    vault: tuple[int, ...]


def searched_for(tool_calls: Sequence[dict]) -> list[str]:
    """The queries of the call's archive searches that returned something."""
    queries: list[str] = []
    for call in tool_calls:
        if not isinstance(call, dict) or call.get("name") != SEARCH_TOOL or not call.get("ok"):
            continue
        if str(call.get("result", "")).startswith("no results"):
            continue
        try:
            query = json.loads(call.get("arguments") or "{}").get("query")
        except (ValueError, AttributeError):
            continue
        if isinstance(query, str) and query.strip() and query not in queries:
            queries.append(query)
    return queries


def find_in_reply(reply: Message, question: Message, hits: Sequence[SearchHit], *, zone: ZoneInfo, names: Sequence[str] = ()) -> Finding | None:
    """The reply's sentences that state what ``hits`` say (see the module docstring); None: nothing worth keeping."""
    found = [hit for hit in hits if hit.importance is None]  # a fragment is never made of fragments
    if not found:
        return None
    sources = [SourceText(hit.text, hit.agent, hit.ts) for hit in found] + [SourceText(question.text, question.sender, question.ts)]
    salience = Salience().add(hit.text for hit in found)
    chosen: list[tuple[float, str, list[SearchHit]]] = []
    for sentence in sentences(reply.text):
        words = content_words(sentence)
        drawn = [hit for hit in found if len(words & content_words(hit.text)) >= MIN_SHARED]
        if not drawn or untraceable(sentence, sources, zone=zone, names=names):
            continue
        score = salience.score(sentence)
        if score > 0:
            chosen.append((score, sentence, drawn))
    if not chosen:
        return None
    best = sorted(chosen, key=lambda item: -item[0])[:MAX_SENTENCES]
    in_order = [item for item in chosen if item in best]  # the reply's own order
    drawn = {hit.id: hit for _, _, hits_of in in_order for hit in hits_of}
    score = max(item[0] for item in best)
    return Finding(
        text=" ".join(sentence for _, sentence, _ in in_order),
        importance=round(score / (score + IMPORTANCE_HALF), 3),
        messages=tuple(sorted(i for i, hit in drawn.items() if hit.kind == "message")),
        vault=tuple(sorted(i for i, hit in drawn.items() if hit.kind == "vault")),
    )


def call_extra_query(scope: str, message_id: int, agent: str) -> tuple[str, tuple[Any, ...]]:
    """The read of the newest good call record of ``agent`` for message ``message_id`` (its
    ``extra``: the searches), for a batch of reads."""
    return (
        "SELECT extra FROM calls WHERE scope = ? AND message_id = ? AND agent = ? AND ok = 1 ORDER BY id DESC LIMIT 1",
        (scope, message_id, agent),
    )


def keep_finding(
    store: Store,
    reply: Message,
    *,
    zone: ZoneInfo,
    names: Sequence[str] = (),
    half_life_days: float | None = 30.0,
    question: Message | None = None,
    call_rows: list[tuple] | None = None,
) -> Knowledge | None:
    """After ``reply``: keep what its request found in the archive, as the replying agent's research.

    Reads the reply's call record for its searches and runs them again as they ran (only
    messages before the question), so nothing but the store is needed. None when the
    request searched nothing, found nothing, or the reply says nothing the results hold.
    ``question`` (the message replied to) and ``call_rows`` (:func:`call_extra_query`'s rows
    for ``reply.reply_to`` and ``reply.agent``): read already, not read again.
    """
    if reply.role != "agent" or reply.reply_to is None or not reply.agent:
        return None
    if question is None or question.id != reply.reply_to or question.scope != reply.scope:
        question = store.get(reply.scope, reply.reply_to)
    if question is None:
        return None
    rows = call_rows if call_rows is not None else store.query(*call_extra_query(reply.scope, question.id, reply.agent))
    try:
        extra = json.loads(rows[0][0]) if rows and rows[0][0] else {}
    except ValueError:
        return None
    queries = searched_for(extra.get("tool_calls") or [] if isinstance(extra, dict) else [])
    if not queries:
        return None
    hits: dict[tuple[str, int], SearchHit] = {}
    for query in queries:
        for hit in store.search(reply.scope, query, k=SEARCH_RESULTS, before_id=question.id, half_life_days=half_life_days):
            hits.setdefault((hit.kind, hit.id), hit)
    finding = find_in_reply(reply, question, list(hits.values()), zone=zone, names=names)
    if finding is None:
        return None
    kept = add_knowledge(
        store,
        reply.scope,
        finding.text,
        importance=finding.importance,
        messages=finding.messages,
        vault=finding.vault,
        ts=reply.ts,
        mode="extractive",
        agent=reply.agent,
        reply=reply.id,
    )
    if kept is not None:
        log.info("kept what %s's search found in %s as knowledge #%d", reply.agent, reply.scope, kept.id)
    return kept

"""Reconciliation: each candidate against the scope's current facts, decided as ADD, UPDATE,
INVALIDATE or NOOP.

It is deliberately narrow, because a contradiction must never empty the store (a known
failure of other memory libraries):

- a candidate only touches facts with the same key or near-identical text, never more;
- a batch that would invalidate every current fact, several without replacement, is
  refused whole;
- a derived fact never overrides an explicit one (``/remember``) with the same key
  unless the person's message is itself explicit ("actually my email is ...").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from rapidfuzz import fuzz

from scopehub.hub.facts.extraction import Candidate
from scopehub.hub.facts.keys import infer_key, kind_of_key
from scopehub.hub.facts.text import MAX_TARGETS, SIMILAR, core, denegate, norm
from scopehub.memory import (
    Fact,
    FactChange,
    NewFact,
    Store,
    apply_fact_changes,
    current_facts,
)

log = logging.getLogger(__name__)



# --------------------------------------------------------------------------- reconciliation


class Op(StrEnum):
    """What reconciliation decided for one candidate."""

    ADD = "add"
    UPDATE = "update"
    INVALIDATE = "invalidate"
    NOOP = "noop"


@dataclass(frozen=True, slots=True)
class Decision:
    """One reconciliation step: the fact to add (ADD, UPDATE) and the facts it invalidates or matched."""

    op: Op
    fact: NewFact | None = None
    targets: tuple[int, ...] = ()
    reason: str = ""


def _similar(a: str, b: str) -> bool:
    return fuzz.token_sort_ratio(core(a), core(b)) >= SIMILAR


def reconcile(
    current: Sequence[Fact],
    candidates: Iterable[Candidate],
    *,
    confidence: str = "derived",
    explicit_message: bool = False,
    source_message: int | None = None,
    subject: str = "user",
) -> list[Decision]:
    """Decide ADD/UPDATE/INVALIDATE/NOOP for each candidate against the current facts. Pure.

    Matches are the facts with the candidate's key, plus, where a key is missing on either
    side, facts with very similar text. Within one batch the last candidate per key wins.
    """
    keyed: dict[str, Candidate] = {}
    for candidate in candidates:
        inferred, inferred_kind = infer_key(candidate.text, subject=subject)
        key = candidate.key or inferred
        kind = candidate.kind if candidate.kind != "other" else (kind_of_key(key) if candidate.key else inferred_kind)
        candidate = candidate.model_copy(update={"key": key, "kind": kind})
        slot = key or f"text:{norm(candidate.text)}"
        earlier = keyed.get(slot)
        # "not vegetarian anymore, vegan now": the new value carries the state, whatever the order.
        if earlier is not None and candidate.op == "invalidate" and earlier.op in ("add", "update"):
            continue
        keyed[slot] = candidate
    live = {fact.id: fact for fact in current}
    decisions: list[Decision] = []
    for candidate in keyed.values():
        decision = _decide(candidate, list(live.values()), confidence, explicit_message, source_message)
        for fact_id in decision.targets if decision.op in (Op.UPDATE, Op.INVALIDATE) else ():
            live.pop(fact_id, None)
        decisions.append(decision)
    dropped = {i for d in decisions if d.op is Op.INVALIDATE for i in d.targets}
    if len(current) >= 2 and len(dropped) >= 2 and not live:
        # Every fact would go, several without replacement: a misread message, not a wish.
        log.warning("refused a fact batch that would invalidate all %d facts of the scope", len(current))
        return [Decision(Op.NOOP, reason="refused: the batch would invalidate every fact")]
    return decisions


def _decide(candidate: Candidate, live: list[Fact], confidence: str, explicit_message: bool, source: int | None) -> Decision:
    key = candidate.key
    same_key = [fact for fact in live if key and fact.key == key]
    if candidate.op == "invalidate":
        probe = denegate(candidate.text)
        similar = [
            fact
            for fact in live
            if fact not in same_key and (not key or not fact.key) and fuzz.token_sort_ratio(denegate(fact.text), probe) >= SIMILAR
        ]
    else:
        similar = [fact for fact in live if fact not in same_key and (not key or not fact.key) and _similar(fact.text, candidate.text)]
    matches = same_key + similar
    new = NewFact(text=candidate.text, kind=candidate.kind, key=key, confidence=confidence, source_message=source)
    if candidate.op == "noop":
        return Decision(Op.NOOP, targets=tuple(f.id for f in matches), reason="the extractor saw nothing new")
    if len(matches) > MAX_TARGETS:
        return Decision(Op.NOOP, targets=tuple(f.id for f in matches), reason="ambiguous: matches too many facts")
    protected = [fact for fact in matches if fact.confidence == "explicit"]
    if confidence != "explicit" and protected and not explicit_message:
        return Decision(Op.NOOP, targets=tuple(f.id for f in protected), reason="an explicit fact is kept")
    if candidate.op == "invalidate":
        if not matches:
            return Decision(Op.NOOP, reason="nothing to invalidate")
        return Decision(Op.INVALIDATE, targets=tuple(f.id for f in matches), reason="no longer true")
    same = [fact for fact in matches if core(fact.text) == core(candidate.text)]
    if same and (confidence == "derived" or any(f.confidence == "explicit" for f in same)) and len(matches) == len(same):
        return Decision(Op.NOOP, targets=tuple(f.id for f in same), reason="already known")
    if not matches:
        return Decision(Op.ADD, fact=new, reason="new fact")
    return Decision(Op.UPDATE, fact=new, targets=tuple(f.id for f in matches), reason="replaces an older fact")


def learn(
    store: Store,
    scope: str,
    candidates: Sequence[Candidate],
    *,
    confidence: str = "derived",
    explicit_message: bool = False,
    source_message: int | None = None,
    subject: str = "user",
    now: float | None = None,
    require_message: bool = False,
) -> tuple[list[Decision], list[Fact]]:
    """Reconcile candidates with the scope's current facts and apply the result atomically.

    Returns the decisions and the facts added. With ``require_message``, nothing is written
    if ``source_message`` was erased meanwhile.
    """
    decisions = reconcile(
        current_facts(store, scope),
        candidates,
        confidence=confidence,
        explicit_message=explicit_message,
        source_message=source_message,
        subject=subject,
    )
    changes = [
        FactChange(add=d.fact, invalidate=d.targets if d.op in (Op.UPDATE, Op.INVALIDATE) else ())
        for d in decisions
        if d.op is not Op.NOOP
    ]
    added: list[Fact] = []
    if changes:
        added = apply_fact_changes(
            store, scope, changes, now=now, require_message=source_message if require_message else None
        )
    for decision in decisions:
        log.info("facts %s: %s %s (%s)", scope, decision.op.value, decision.fact.key if decision.fact else decision.targets, decision.reason)
    return decisions, added

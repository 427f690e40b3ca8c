"""What people do with facts directly: ``/remember``, ``/facts``, ``/forget``.
"""

from __future__ import annotations

import re

from rapidfuzz import fuzz

from scopehub.hub.facts.extraction import Candidate
from scopehub.hub.facts.keys import infer_key, kind_of_key, normalise_key
from scopehub.hub.facts.reconcile import learn
from scopehub.hub.facts.text import APOSTROPHES, MAX_FACT_CHARS, SIMILAR, clean, norm, slug
from scopehub.memory import (
    FACT_KINDS,
    Fact,
    Store,
    current_facts,
    delete_facts,
    get_fact,
    validate_scope,
)

# --------------------------------------------------------------------------- commands


def subject_of(store: Store, scope: str, source_message: int | None) -> tuple[str, str | None]:
    """Whose facts first-person text is about: the sender in a group, else the customer."""
    if scope.startswith("group:") and source_message is not None:
        message = store.get(scope, source_message)
        if message is not None and message.sender:
            return (slug(message.sender) or "user"), message.sender
    return "user", None


_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|my|me|mine)\b", re.I)


def remember(
    store: Store,
    scope: str,
    text: str,
    *,
    source_message: int | None = None,
    now: float | None = None,
    kind: str | None = None,
    key: str | None = None,
) -> Fact:
    """Keep an explicit fact (``/remember``); it replaces a fact with the same key.

    Key and kind are inferred locally unless given. In a group, first-person text is
    attributed to its sender ("Ram: my email is ...").
    """
    validate_scope(scope)
    cleaned = clean(text)
    if not cleaned:
        raise ValueError("a fact needs some text")
    if len(cleaned) > MAX_FACT_CHARS:
        cleaned = cleaned[: MAX_FACT_CHARS - 1].rstrip() + "…"
    subject, sender = subject_of(store, scope, source_message)
    if sender and _FIRST_PERSON.search(cleaned.translate(APOSTROPHES)):
        cleaned = f"{clean(sender)}: {cleaned}"
    inferred_key, inferred_kind = infer_key(text, subject=subject)
    final_key = normalise_key(key, subject=subject) if key else inferred_key
    final_kind = kind if kind in FACT_KINDS else (kind_of_key(final_key) if key else inferred_kind)
    candidate = Candidate(text=cleaned, kind=final_kind, key=final_key, op="add")
    decisions, added = learn(
        store, scope, [candidate], confidence="explicit", explicit_message=True, source_message=source_message, now=now
    )
    if added:
        return added[0]
    existing = get_fact(store, scope, decisions[0].targets[0]) if decisions and decisions[0].targets else None
    if existing is None:  # cannot happen for an explicit add; be loud if it does
        raise RuntimeError("remember: the fact was neither added nor found")
    return existing


def current(store: Store, scope: str) -> list[Fact]:
    """The scope's current facts, oldest first (``/facts``)."""
    return current_facts(store, scope)


def forget(store: Store, scope: str, target: str, *, now: float | None = None) -> list[Fact]:
    """Delete facts for good (``/forget``): by id ("12", "#12"), key, or text; returns what was deleted.

    A forgotten fact goes with its older versions: the person asked for it to be gone, so
    unlike a superseded fact it keeps no history. ``now`` is accepted for symmetry.
    """
    validate_scope(scope)
    wanted = clean(target)
    if not wanted:
        return []
    by_id = re.fullmatch(r"#?(\d{1,18})", wanted)  # longer numbers are no fact id (and overflow SQLite)
    if by_id:
        fact = get_fact(store, scope, int(by_id[1]))
        ids = [fact.id] if fact is not None else []
    else:
        probe = norm(wanted)
        ids = [
            fact.id
            for fact in current_facts(store, scope)
            if (fact.key and fact.key == probe)
            or probe in norm(fact.text)
            or (len(probe) >= 3 and fuzz.token_set_ratio(probe, norm(fact.text)) >= SIMILAR)
        ]
    if not ids:
        return []
    deleted = delete_facts(store, scope, ids, with_history=True)
    # secure_delete zeroed the rows in the database; clear the write-ahead log copies too.
    store.flush_deleted()
    return deleted

"""The reads of one awareness block in one batch (one round trip on PostgreSQL, not seven).

An awareness block (:mod:`scopehub.hub.context.awareness`) reads the agent's event and
channel cursors, the newest events of its interests and of its collaborators, the scope's
live claims, the pinned and the unseen channel messages and the events it has not
consumed. Each read here is the one its own function makes (``cursor_of``,
``latest_events``, ``active_claims``, ``unseen_channel_messages``,
``pinned_channel_messages``), with the same rows, the unseen messages' channel cursor read
inside their query. The unconsumed events are read after, with the cursor read here
(``unconsumed_events(..., cursor=)``: their parts are several index scans, and a subquery
would run once per part).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ._channels import (
    ChannelMessage,
    channel_messages_of_rows,
    pinned_channel_query,
    unseen_channel_query,
)
from ._claims import Claim, active_claims_query, live_claims_of_rows
from ._cursors import cursor_query
from ._events import Event, event_of_row, latest_events_query
from ._store import Store

__all__ = ["AwarenessReads", "awareness_reads"]


@dataclass(frozen=True)
class AwarenessReads:
    """What an awareness block is made from; every list oldest first, but ``pinned`` (newest first)."""

    cursor: int  # the newest event the agent consumed (0: none)
    interesting: list[Event]  # the newest events of its interests, consumed or not ([] when not asked for)
    collaborators: list[Event]  # the newest events of its collaborators
    claims: list[Claim]  # the scope's live claims
    unseen: list[ChannelMessage]  # the newest messages of its channels past its channel cursor, by others
    pinned: list[ChannelMessage]  # its channels' pinned messages, not its own


def awareness_reads(
    store: Store,
    scope: str,
    agent: str,
    *,
    interests: Iterable[str],
    interesting: int,
    collaborators: Sequence[str],
    collaborator_events: int,
    channels: Sequence[str],
    unseen: int,
    pins: int,
    now: float,
) -> AwarenessReads:
    """Read what :class:`AwarenessReads` holds in one batch of reads (``Store.query_batch``).

    ``interesting``, ``collaborator_events``, ``unseen`` and ``pins``: how many of each (0:
    not read); ``interests``, ``collaborators`` or ``channels`` empty: not read either.
    """
    interests = list(interests)
    names = sorted(set(channels))
    batch: list[tuple[str, Sequence[Any]]] = [cursor_query(scope, agent)]
    slots: dict[str, int] = {}

    def add(name: str, query: tuple[str, Sequence[Any]] | None) -> None:
        if query is not None:
            slots[name] = len(batch)
            batch.append(query)

    if interesting > 0 and interests:
        add("interesting", latest_events_query(store, scope, types=interests, limit=interesting, for_agent=agent))
    if collaborators:
        add("collaborators", latest_events_query(store, scope, agents=collaborators, limit=collaborator_events, for_agent=agent))
    add("claims", active_claims_query(scope, now=now))
    if names and unseen > 0:
        add("unseen", unseen_channel_query(scope, agent, names, limit=unseen, newest=True))
    if names and pins > 0:
        add("pinned", pinned_channel_query(scope, names, not_by=agent, limit=pins))
    rows = store.query_batch(batch)

    def got(name: str) -> list[tuple]:
        return rows[slots[name]] if name in slots else []

    return AwarenessReads(
        cursor=int(rows[0][0][0]) if rows[0] else 0,
        interesting=[event_of_row(row) for row in reversed(got("interesting"))],
        collaborators=[event_of_row(row) for row in reversed(got("collaborators"))],
        claims=live_claims_of_rows(got("claims")),
        unseen=channel_messages_of_rows(store, scope, got("unseen")) if got("unseen") else [],
        pinned=channel_messages_of_rows(store, scope, got("pinned"), in_id_order=False) if got("pinned") else [],
    )

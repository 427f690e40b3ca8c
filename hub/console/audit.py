"""The audit trail of the console's writes: an event per change, by ``operator``, in the
scope's own event log (``agents-hub events``, the memory page). No agent subscribes to
these types, so they never reach a prompt. The events name facts by id and key, never by
text: a fact the person later forgets must not survive in the log.
"""

from __future__ import annotations

from pydantic import Field

from scopehub.memory import EventPayload, register_event_type

__all__ = ["FACT_ADDED", "FACT_EDITED", "FACT_FORGOTTEN"]

FACT_ADDED, FACT_EDITED, FACT_FORGOTTEN = "operator.fact_added", "operator.fact_edited", "operator.fact_forgotten"


def _key(key: str | None) -> str:
    return f" ({key})" if key else ""


class FactAdded(EventPayload):
    fact_id: int
    key: str | None = None
    replaced: list[int] = Field(default_factory=list)  # current facts of the same key it superseded


class FactEdited(EventPayload):
    fact_id: int  # the fact corrected (kept in the history, superseded)
    new_fact_id: int
    key: str | None = None


class FactForgotten(EventPayload):
    fact_ids: list[int]  # the fact and its older versions, deleted
    key: str | None = None


register_event_type(
    FACT_ADDED, FactAdded, description="the operator added a fact in the console",
    summary=lambda p: f"operator added fact #{p.fact_id}{_key(p.key)}" + (f", replacing #{', #'.join(map(str, p.replaced))}" if p.replaced else ""),
)  # fmt: skip
register_event_type(
    FACT_EDITED, FactEdited, description="the operator corrected a fact in the console",
    summary=lambda p: f"operator corrected fact #{p.fact_id}{_key(p.key)}: now #{p.new_fact_id}",
)  # fmt: skip
register_event_type(
    FACT_FORGOTTEN, FactForgotten, description="the operator forgot a fact in the console",
    summary=lambda p: f"operator forgot fact #{', #'.join(map(str, p.fact_ids))}{_key(p.key)}",
)  # fmt: skip

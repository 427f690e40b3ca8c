"""``search_memory``: offered to every agent, over the scope's archive."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from pydantic import BaseModel

from scopehub.memory import get_vault_item

from ._spec import ToolContext, tool

__all__ = ["search_memory"]

log = logging.getLogger(__name__)


SEARCH_RESULTS = 5  # a fixed k: one parameter less in a schema paid on every call it is offered
# Hits looked at to fill those five: the bot's own replies ("Saved note #1: ...", a listing)
# say again what a note or the person said, and would otherwise crowd out the note itself.
SEARCH_POOL = 4 * SEARCH_RESULTS


class SearchMemoryArgs(BaseModel):
    query: str


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M")


@tool(
    examples=(
        ("what did I write about the wifi", {"query": "wifi"}),
        ("what did we say about the venue last week", {"query": "venue"}),
        ("find the message about the dentist", {"query": "dentist"}),
        "search for passport",
        "when did I mention the plumber",
        "what was the gate code again?",
        "what's my locker number?",
        "what was the name of that restaurant?",
        "where did I park?",
        "when is Sam's birthday?",
        "what is the password for the router?",
        "what did we talk about last week",
        'where did I put the passport?',
        'what was the boiler pressure I noted?',
        'did I write down the meeting room?',
        "what did Anna's email say about the venue?",
        'Wo ist der Ersatzschlüssel?',
        'Quel était le code du portail ?',
    )
)
def search_memory(ctx: ToolContext, args: SearchMemoryArgs) -> str:
    """Search older messages, notes and emails of this chat."""
    pool = ctx.store.search(ctx.scope, args.query, k=SEARCH_POOL)
    if not pool:
        return "no results"
    # What was kept (notes, emails) and what the person said come before the bot's replies,
    # each group in the search's order.
    hits = sorted(pool, key=lambda hit: 0 if hit.kind == "vault" else 1 if hit.sender or not hit.agent else 2)[:SEARCH_RESULTS]
    lines = []
    for hit in hits:
        # A person's message is tagged with the agent it was routed to: it is still theirs.
        who = "user" if hit.sender or not hit.agent else hit.agent
        if hit.kind == "vault":
            # What was kept says what it is (a note, an email, a draft): its agent's name
            # would read like one of the agent's own replies.
            item = get_vault_item(ctx.store, ctx.scope, hit.id)
            who = f"{item.kind} #{item.number}" if item is not None else "kept"
        if hit.importance is not None:  # a knowledge fragment distilled from older messages
            who = f"knowledge, importance {hit.importance:.2f}"
        lines.append(f"#{hit.id} {_when(hit.ts)} [{who}] {hit.snippet}")
    return "\n".join(lines)

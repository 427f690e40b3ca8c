"""Running ``eval local``'s sessions through the real hub, and what each message did.

Every message is sent as a person would send it; what it stored is read back from the
store (task rows, notes, emails, drafts, reminders, dispatches, facts) before and after,
and each change is kept on its :class:`Observation` for the checks of
:mod:`.local_checks`. Learning (fact extraction) runs in the background as the chat
transports run it; expectations about facts are judged once it has finished.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from scopehub import memory
from scopehub.agents._dates import local_now
from scopehub.eval.local_checks import Check, reply_problems
from scopehub.hub.facts.grounding import grounded, own_words
from scopehub.hub.models.turns import is_copy, same_words

__all__ = ["SCOPE", "Observation", "RecordingModel", "Session", "Step", "run_session", "summarise"]

SCOPE = "user:newcomer"


@dataclass
class Observation:
    """What one message did: reply, agent, tool calls, what it stored, how long it took."""

    text: str
    reply: str = ""
    kind: str = ""
    agent: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    stored: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seconds: float = 0.0
    message_id: int | None = None
    now: float = 0.0
    timezone: str = "UTC"
    copy: bool = False  # the whole reply said again: an earlier reply, word for word
    repeats: bool = False  # three or more words in a row of an earlier reply (an answer restating a fact does)
    checked: bool | None = None  # what was stored and replied met the expectation
    problems: list[str] = field(default_factory=list)  # why the reply is no answer (see reply_problems)
    known_at_reply: bool | None = None  # a stated fact: already kept when the reply came (before the next message)
    right: bool | None = None

    def tool_names(self) -> list[str]:
        return [call["name"] for call in self.tools]

    def today(self) -> date:
        return local_now(self.now, self.timezone).date()


@dataclass(frozen=True)
class Step:
    """One message of the session and what must come of it."""

    text: str
    expect: str  # the stated expectation, as the report shows it
    check: Check
    core: bool = False  # one of the 12 messages of the first session
    held_out: bool = False  # written after the examples were tuned, and not tuned on since
    after_learning: bool = False  # judged once background fact extraction has finished
    intent: str = ""  # what the message asks for, for the per-intent report


@dataclass
class Session:
    """The store the session wrote, for checks that read the end state."""

    store: memory.Store
    scope: str
    observations: list[Observation] = field(default_factory=list)

    def facts(self) -> list[memory.Fact]:
        return memory.current_facts(self.store, self.scope)


# --------------------------------------------------------------------------- running


class RecordingModel:
    """Passes calls through to ``inner`` and keeps the tool calls it answered with."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "model")
        self.calls: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(self, messages: Sequence[dict[str, Any]], **kwargs: Any) -> Any:
        response = await self.inner.complete(messages, **kwargs)
        if kwargs.get("tools"):
            for call in response.tool_calls:
                self.calls.append({"name": call.name, "arguments": call.arguments})
        return response


def _rows(store: memory.Store, scope: str) -> dict[str, dict[int, dict[str, Any]]]:
    tasks = {t.id: {"id": t.id, "title": t.title, "due": t.due, "done": t.done} for t in memory.list_tasks(store, scope, include_done=True, limit=500)}
    vault = {kind: {} for kind in ("notes", "emails", "drafts")}
    for item in memory.list_vault_items(store, scope, limit=500):
        section = {"note": "notes", "email": "emails", "draft": "drafts"}.get(item.kind)
        if section:
            number = getattr(item, "number", item.id)  # what the person sees (#1 of each kind)
            vault[section][item.id] = {"id": number, "title": item.title, "body": item.body[:300], "from": item.meta.get("from", ""), "to": item.meta.get("to", "")}
    reminders = {
        r.id: {"id": r.id, "text": r.text, "due": r.due, "active": r.active}
        for r in memory.list_reminders(store, scope, include_inactive=True, limit=500)
    }
    facts = {f.id: {"id": f.id, "text": f.text, "key": f.key} for f in memory.current_facts(store, scope)}
    dispatches = {
        event.id: {"id": event.id, "team": event.payload.get("team", ""), "subject": event.payload.get("subject", "")}
        for event in memory.events_after(store, scope, 0, limit=500, types=["dispatch.sent"])
    }
    return {"tasks": tasks, **vault, "reminders": reminders, "facts": facts, "dispatches": dispatches}


def _changes(before: dict[str, dict[int, dict[str, Any]]], after: dict[str, dict[int, dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Rows this message added, plus tasks it completed and things it cancelled or deleted."""
    changes: dict[str, list[dict[str, Any]]] = {}
    for kind, rows in after.items():
        added = [row for row_id, row in rows.items() if row_id not in before[kind]]
        if added:
            changes[kind] = added
    done = [row for row_id, row in after["tasks"].items() if row["done"] and not before["tasks"].get(row_id, {}).get("done", True)]
    if done:
        changes["tasks done"] = done
    edited = [
        row for row_id, row in after["tasks"].items()
        if row_id in before["tasks"] and (row["title"], row["due"]) != (before["tasks"][row_id]["title"], before["tasks"][row_id]["due"])
    ]
    if edited:
        changes["tasks edited"] = edited
    cancelled = [row for row_id, row in after["reminders"].items() if not row["active"] and before["reminders"].get(row_id, {}).get("active")]
    if cancelled:
        changes["reminders cancelled"] = cancelled
    for kind in ("notes", "emails", "drafts"):
        deleted = [row for row_id, row in before[kind].items() if row_id not in after[kind]]
        if deleted:
            changes[f"{kind} deleted"] = deleted
    return changes


async def run_session(
    hub: Any,
    steps: Sequence[Step],
    *,
    scope: str = SCOPE,
    recorder: RecordingModel | None = None,
    pause: float = 0.0,
    progress: Callable[[int, Observation], None] | None = None,
) -> tuple[list[Observation], Session]:
    """Send each step's message as a person would, then judge every expectation."""
    from scopehub.hub.orchestrator import Inbound

    store = hub.store
    timezone = hub.settings.timezone
    session = Session(store=store, scope=scope)
    tool_names = {tool.name for spec in hub.registry for tool in spec.tools} | {"search_memory"}
    earlier_replies: list[str] = []
    for index, step in enumerate(steps):
        before = _rows(store, scope)
        calls_before = len(recorder.calls) if recorder else 0
        now = hub.deps.clock()
        started = time.perf_counter()
        reply = await hub.handle(Inbound(scope=scope, text=step.text, chat="eval", sender="newcomer"))
        seconds = time.perf_counter() - started
        hub.schedule_after_send(reply)  # learning in the background, as the Telegram bot does
        obs = Observation(text=step.text, seconds=seconds, now=now, timezone=timezone)
        if reply is not None:
            obs.reply, obs.kind, obs.agent, obs.message_id = reply.text, reply.kind, reply.agent, reply.message_id
        if recorder is not None:
            obs.tools = recorder.calls[calls_before:]
        stored = _changes(before, _rows(store, scope))
        for rows in stored.values():
            for row in rows:  # what the checks need to judge dates
                row.update({"_now": now, "_timezone": timezone, "_today": local_now(now, timezone).date().isoformat()})
        stored.pop("facts", None)  # facts are learnt after the reply; judged at the end
        obs.stored = stored
        obs.copy = same_words(obs.reply, earlier_replies)
        obs.repeats = is_copy(obs.reply, earlier_replies)
        obs.problems = reply_problems(obs.reply, tool_names) if obs.kind == "agent" else []
        earlier_replies.append(obs.reply)
        if not step.after_learning:
            obs.checked = step.check(obs, session)
            obs.right = obs.checked and not obs.copy and not obs.problems
        else:
            obs.known_at_reply = step.check(obs, session)
        session.observations.append(obs)
        if progress is not None:
            progress(index, obs)
        if pause:
            await asyncio.sleep(pause)
    await hub.drain()
    for step, obs in zip(steps, session.observations, strict=True):
        learnt = [{"id": f.id, "text": f.text, "key": f.key} for f in session.facts() if f.source_message == obs.message_id]
        if learnt:
            obs.stored["facts"] = learnt
        if step.after_learning:
            obs.checked = step.check(obs, session)
            obs.right = obs.checked and not obs.copy and not obs.problems
    return session.observations, session


def invented_facts(session: Session) -> list[str]:
    """Current facts whose values are not in their source message's own words."""
    invented = []
    for item in session.facts():
        source = session.store.get(session.scope, item.source_message) if item.source_message else None
        if source is None or not grounded(item.text, item.key, own_words(source.text)):
            invented.append(item.text)
    return invented


def summarise(steps: Sequence[Step], observations: Sequence[Observation], session: Session | None = None) -> dict[str, Any]:
    """Right counts, copies, invented facts and latencies."""
    core = [obs for step, obs in zip(steps, observations, strict=True) if step.core]
    later = [obs.seconds for obs in observations[1:]]
    return {
        "right": sum(bool(obs.right) for obs in observations),
        "messages": len(observations),
        "core_right": sum(bool(obs.right) for obs in core),
        "core_messages": len(core),
        "held_out_right": sum(bool(obs.right) for step, obs in zip(steps, observations, strict=True) if step.held_out),
        "held_out_messages": sum(step.held_out for step in steps),
        "copies": sum(obs.copy for obs in observations),
        "repeats": sum(obs.repeats for obs in observations),
        "right_counting_repeats_wrong": sum(bool(obs.right) and not obs.repeats for obs in observations),
        "facts_stated": sum(step.after_learning for step in steps),
        "facts_known_at_reply": sum(bool(obs.known_at_reply) for obs in observations),
        "invented_facts": invented_facts(session) if session is not None else [],
        "first_reply_seconds": round(observations[0].seconds, 2) if observations else None,
        "median_later_seconds": round(statistics.median(later), 2) if later else None,
        "p90_later_seconds": round(statistics.quantiles(later, n=10)[-1], 2) if len(later) >= 2 else None,
        "max_seconds": round(max(obs.seconds for obs in observations), 2) if observations else None,
    }


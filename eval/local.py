"""``agents-hub eval local``: a newcomer's first session with the embedded model.

The README's first command installs the embedded model and opens a chat; this replays
what a new user then types, through the real hub (router, agents, store, facts) and the
real SmolLM2-135M, on a fresh database. For every message it reports the agent, the
tool calls and their arguments, what was stored (task rows, notes, emails, drafts,
reminders, facts, read back from the store), whether the stated expectation holds, and
how long the reply took. The summary gives the right count (of the 12 messages of the
first session, of 12 held-out messages written after the tools' examples were settled,
and of all), replies that copy an earlier reply word for word, facts that are not in the
person's words, the cold start, the first reply and the median later reply.

Learning (fact extraction) runs in the background as the Telegram bot runs it, and
gives way to the next message; fact expectations are judged once it has finished.
Without the ``local`` extra the command says so and exits with code 2.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from scopehub import memory
from scopehub.agents._dates import local_now, parse_date
from scopehub.hub.facts.grounding import grounded, own_words
from scopehub.hub.models.planner import is_copy

__all__ = ["NEWCOMER", "Observation", "Step", "local_command", "run_session", "summarise"]

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
    copy: bool = False
    right: bool | None = None

    def tool_names(self) -> list[str]:
        return [call["name"] for call in self.tools]

    def today(self) -> date:
        return local_now(self.now, self.timezone).date()


Check = Callable[[Observation, "Session"], bool]


@dataclass(frozen=True)
class Step:
    """One message of the session and what must come of it."""

    text: str
    expect: str  # the stated expectation, as the report shows it
    check: Check
    core: bool = False  # one of the 12 messages of the first session
    held_out: bool = False  # written after the examples were tuned, and not tuned on since
    after_learning: bool = False  # judged once background fact extraction has finished


@dataclass
class Session:
    """The store the session wrote, for checks that read the end state."""

    store: memory.Store
    scope: str
    observations: list[Observation] = field(default_factory=list)

    def facts(self) -> list[memory.Fact]:
        return memory.current_facts(self.store, self.scope)


# --------------------------------------------------------------------------- checks


def _contains(text: str, *words: str) -> bool:
    lowered = text.casefold()
    return all(word.casefold() in lowered for word in words)


def new(kind: str, *words: str, where: Callable[[dict[str, Any]], bool] | None = None) -> Check:
    """A row of ``kind`` was stored by this message and holds all ``words``."""

    def check(obs: Observation, _: Session) -> bool:
        return any(_contains(json.dumps(row, ensure_ascii=False), *words) and (where is None or where(row)) for row in obs.stored.get(kind, []))

    return check


def replies(*words: str) -> Check:
    def check(obs: Observation, _: Session) -> bool:
        return obs.kind == "agent" and _contains(obs.reply, *words)

    return check


def in_words(obs: Observation, _: Session) -> bool:
    """A reply in words: no tool, nothing stored, not an error."""
    return obs.kind == "agent" and bool(obs.reply.strip()) and not obs.tools and not any(obs.stored.values())


def task_done(task_id: int) -> Check:
    def check(obs: Observation, session: Session) -> bool:
        task = memory.get_task(session.store, session.scope, task_id)
        return task is not None and task.done and any(row.get("id") == task_id for row in obs.stored.get("tasks done", []))

    return check


def gone(kind: str, item_id: int) -> Check:
    def check(obs: Observation, _: Session) -> bool:
        return any(row.get("id") == item_id for row in obs.stored.get(kind, []))

    return check


def fact(*words: str) -> Check:
    """A current fact learnt from this message holds all ``words``."""

    def check(obs: Observation, session: Session) -> bool:
        return any(f.source_message == obs.message_id and _contains(f.text, *words) for f in session.facts())

    return check


def nothing(kind: str) -> Check:
    """This message stored no row of ``kind``."""

    def check(obs: Observation, _: Session) -> bool:
        return not obs.stored.get(kind)

    return check


def no_fact_from(obs: Observation, session: Session) -> bool:
    return not any(f.source_message == obs.message_id for f in session.facts())


def both(*checks: Check) -> Check:
    def check(obs: Observation, session: Session) -> bool:
        return all(c(obs, session) for c in checks)

    return check


def due_on_next(weekday: str) -> Callable[[dict[str, Any]], bool]:
    """A task row due on the next ``weekday`` after the message's day."""

    def where(row: dict[str, Any]) -> bool:
        return row.get("due") is not None and row.get("_today") is not None and row["due"] == str(parse_date(weekday, date.fromisoformat(row["_today"])))

    return where


def reminder_in(minutes_low: float, minutes_high: float) -> Callable[[dict[str, Any]], bool]:
    def where(row: dict[str, Any]) -> bool:
        delta = (row["due"] - row["_now"]) / 60
        return minutes_low <= delta <= minutes_high

    return where


def reminder_tomorrow_at(hour: int) -> Callable[[dict[str, Any]], bool]:
    def where(row: dict[str, Any]) -> bool:
        moment = local_now(row["due"], row["_timezone"])
        return moment.date() == local_now(row["_now"], row["_timezone"]).date() + timedelta(days=1) and moment.hour == hour

    return where


RAM_EMAIL = (
    "From: Ram Kumar <ram@example.com>\n"
    "Subject: Contract renewal\n"
    "\n"
    "Hi,\n"
    "please send me the signed contract by Friday.\n"
    "Thanks,\n"
    "Ram"
)
DANA_EMAIL = (
    "here is another mail\n"
    "From: Dana Lee <dana@example.org>\n"
    "Subject: Team lunch\n"
    "\n"
    "Hi! Can you book a table for 6 people on Thursday? My new number is 555 0199.\n"
    "Cheers, Dana"
)

NEWCOMER: tuple[Step, ...] = (
    # The first session: the messages, then what a newcomer goes on to try.
    Step("add buy milk to my tasks", "a new open task 'buy milk'", new("tasks", "milk", where=lambda r: not r["done"]), core=True),
    Step("what is on my todo list?", "the reply lists buy milk", both(replies("buy milk"), lambda o, s: o.tool_names() == ["list_tasks"]), core=True),
    Step("mark task 1 as done", "task #1 is done", task_done(1), core=True),
    Step("note: the spare key is under the blue flowerpot", "a new note with the words", new("notes", "spare key", "blue flowerpot"), core=True),
    Step(RAM_EMAIL, "the email is kept, from Ram, and the reply shows its action item", both(new("emails", "Ram"), replies("contract")), core=True),
    Step("put the deadline from that email on my tasks", "a new task due on the email's Friday", new("tasks", where=due_on_next("friday")), core=True),
    Step("remind me in 2 minutes to call mom", "a reminder 'call mom' due in 2 minutes", new("reminders", "mom", where=reminder_in(1.5, 2.5)), core=True),
    Step("my email is sam@example.com", "a fact holding sam@example.com; no email kept", both(fact("sam@example.com"), nothing("emails")), core=True, after_learning=True),
    Step("where is the spare key?", "the reply finds the flowerpot note", replies("flowerpot"), core=True),
    Step("what reminders do I have?", "the reply lists the call mom reminder", replies("call mom"), core=True),
    Step("draft a reply to Ram saying the contract is on its way", "a draft saying the contract is on its way", new("drafts", "on its way"), core=True),
    Step("thanks, that's all for now", "a reply in words; nothing stored", in_words, core=True),
    # More of the same kinds, and facts.
    Step("hi! what can you do?", "a reply in words; nothing stored", in_words),
    Step("new task: book a table for friday dinner", "a new task about the table", new("tasks", "table")),
    Step("what's on my list now?", "the reply lists the table task", replies("table")),
    Step("I'm vegetarian", "a fact: vegetarian", fact("vegetarian"), after_learning=True),
    Step("remind me tomorrow at 9am to water the plants", "a reminder tomorrow 09:00 about the plants", new("reminders", "plants", where=reminder_tomorrow_at(9))),
    Step("take a note that the plumber comes on thursday at 10", "a new note about the plumber", new("notes", "plumber", "thursday")),
    Step("show my notes", "the reply lists both notes", replies("plumber", "flowerpot")),
    Step("what emails do I have?", "the reply lists the contract email", replies("Contract renewal")),
    Step("my sister Priya lives in Pune", "a fact about Priya in Pune", fact("Priya", "Pune"), after_learning=True),
    Step("cancel reminder 1", "reminder #1 is cancelled", gone("reminders cancelled", 1)),
    Step(DANA_EMAIL, "Dana's email is kept; no fact taken from her words", both(new("emails", "Dana"), no_fact_from), after_learning=True),
    Step("delete note 1", "note #1 is deleted", gone("notes deleted", 1)),
    # Held out: written once the tools' examples were settled, run as they came.
    Step("please add renew car insurance to my to-do list", "a new task about the insurance", new("tasks", "insurance"), held_out=True),
    Step("I need to call the dentist tomorrow", "a new task about the dentist", new("tasks", "dentist"), held_out=True),
    Step("done with task 2", "task #2 is done", task_done(2), held_out=True),
    Step("remind me at 6pm to take out the trash", "a reminder about the trash at 18:00", new("reminders", "trash", where=lambda r: local_now(r["due"], r["_timezone"]).hour == 18), held_out=True),
    Step("jot down: the gym locker code is 2468", "a new note with the code", new("notes", "2468"), held_out=True),
    Step("what's the gym locker code?", "the reply finds 2468", replies("2468"), held_out=True),
    Step("list my reminders", "the reply lists the trash reminder", replies("trash"), held_out=True),
    Step("I live in Lisbon", "a fact: Lisbon", fact("Lisbon"), held_out=True, after_learning=True),
    Step("write a reply to Dana saying Thursday works for me", "a draft saying Thursday works", new("drafts", "Thursday works"), held_out=True),
    Step("good morning!", "a reply in words; nothing stored", in_words, held_out=True),
    Step("show me my tasks", "the reply lists the insurance task", replies("insurance"), held_out=True),
    Step("cancel the trash reminder", "the trash reminder is cancelled", new("reminders cancelled", "trash"), held_out=True),
)


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
            vault[section][item.id] = {"id": item.id, "title": item.title, "body": item.body[:300], "from": item.meta.get("from", "")}
    reminders = {
        r.id: {"id": r.id, "text": r.text, "due": r.due, "active": r.active}
        for r in memory.list_reminders(store, scope, include_inactive=True, limit=500)
    }
    facts = {f.id: {"id": f.id, "text": f.text, "key": f.key} for f in memory.current_facts(store, scope)}
    return {"tasks": tasks, **vault, "reminders": reminders, "facts": facts}


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
        obs.copy = is_copy(obs.reply, earlier_replies)
        earlier_replies.append(obs.reply)
        if not step.after_learning:
            obs.right = step.check(obs, session) and not obs.copy
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
            obs.right = step.check(obs, session) and not obs.copy
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
        "invented_facts": invented_facts(session) if session is not None else [],
        "first_reply_seconds": round(observations[0].seconds, 2) if observations else None,
        "median_later_seconds": round(statistics.median(later), 2) if later else None,
        "p90_later_seconds": round(statistics.quantiles(later, n=10)[-1], 2) if len(later) >= 2 else None,
        "max_seconds": round(max(obs.seconds for obs in observations), 2) if observations else None,
    }


def _machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (None, None, None)
    return {
        "cores": os.cpu_count(),
        "load_average_1m": round(load[0], 2) if load[0] is not None else None,
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
        "date": datetime.now().isoformat(timespec="seconds"),
    }


def local_extra_missing(choice: str = "auto") -> str | None:
    """Why the embedded model cannot run here, or None when it can."""
    from scopehub.hub.errors import ModelNotConfigured
    from scopehub.hub.models.engine import XLlamaEngine
    from scopehub.hub.models.weights import find_weights

    problem = XLlamaEngine.available()
    if problem:
        return f"the `local` extra is not installed ({problem})"
    try:
        find_weights(choice)
    except ModelNotConfigured as exc:
        return f"the `local` extra is not installed ({exc})"
    return None


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _stored_line(stored: dict[str, list[dict[str, Any]]]) -> str:
    parts = []
    for kind, rows in stored.items():
        for row in rows:
            label = row.get("title") or row.get("text") or row.get("body") or ""
            extra = f" due {row['due']}" if kind == "tasks" and row.get("due") else ""
            parts.append(f"{kind}: #{row.get('id')} {_short(str(label), 40)}{extra}")
    return "; ".join(parts) or "-"


@click.command("local")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, allow_dash=True), default=None, help="write the report as JSON here ('-' for standard output)")
@click.option("--pause", type=click.FloatRange(0, 60), default=0.0, show_default=True, help="seconds between a reply and the next message (a person reading)")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None, help="keep the session's database here (default: a temporary file)")
@click.option("--only-core", is_flag=True, help="only the 12 messages of the first session")
@click.pass_context
def local_command(ctx: click.Context, json_out: str | None, pause: float, db_path: str | None, only_core: bool) -> None:
    """A newcomer's first session with the embedded model: right or wrong per message, copies, latency.

    Runs the real SmolLM2-135M (the `local` extra) through the whole hub on a fresh database.
    """
    reason = local_extra_missing()
    if reason:
        click.echo(f"error: eval local needs the embedded model: {reason}", err=True)
        ctx.exit(2)
    import logging

    from scopehub.hub.app import build_hub
    from scopehub.hub.models.local import LocalModel
    from scopehub.hub.settings import load_settings

    logging.getLogger().setLevel(logging.ERROR)  # a report, not a log
    steps = [step for step in NEWCOMER if step.core or not only_core]
    machine_before = _machine()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(db_path) if db_path else Path(tmp) / "newcomer.db"
        if path.exists():
            raise click.BadParameter(f"{path} exists; the session needs a fresh database", param_hint="--db")
        settings = load_settings(db=str(path), model="")
        model = LocalModel.from_package(settings.local_model, n_threads=settings.local_threads, timeout=settings.model_timeout)
        started = time.perf_counter()
        model.load()  # at startup, as `agents-hub chat` does
        load_seconds = time.perf_counter() - started
        recorder = RecordingModel(model)
        hub = build_hub(settings, model=recorder)

        def show(index: int, obs: Observation) -> None:
            click.echo(f"[{index + 1}/{len(steps)}] {obs.seconds:5.1f} s  {_short(obs.text, 50)}", err=True)

        observations, session = asyncio.run(run_session(hub, steps, recorder=recorder, pause=pause, progress=show))
        summary = summarise(steps, observations, session)
        summary["load_seconds"] = round(load_seconds, 2)
        summary["cold_first_reply_seconds"] = round(load_seconds + observations[0].seconds, 2)
        hub.store.close()
    report = {
        "model": model.name,
        "threads": model.n_threads,
        "machine": {**machine_before, "load_average_1m_after": _machine()["load_average_1m"]},
        "summary": summary,
        "messages": [
            {
                "message": obs.text,
                "expect": step.expect,
                "core": step.core,
                "held_out": step.held_out,
                "right": obs.right,
                "agent": obs.agent,
                "tools": obs.tools,
                "stored": {kind: [{k: v for k, v in row.items() if not k.startswith("_")} for row in rows] for kind, rows in obs.stored.items()},
                "reply": obs.reply,
                "copy": obs.copy,
                "seconds": round(obs.seconds, 2),
            }
            for step, obs in zip(steps, observations, strict=True)
        ],
    }
    err = json_out == "-"  # the JSON owns standard output; the table goes to standard error
    for number, (step, item) in enumerate(zip(steps, report["messages"], strict=True), start=1):
        mark = "right" if item["right"] else "WRONG"
        calls = ", ".join(f"{c['name']}{c['arguments']}" for c in item["tools"]) or "-"
        click.echo(f"{number:>2}. {mark:<5} {item['seconds']:5.1f} s  [{item['agent']}] {_short(step.text, 56)}", err=err)
        click.echo(f"    expect: {step.expect}", err=err)
        click.echo(f"    tools:  {_short(calls, 100)}", err=err)
        click.echo(f"    stored: {_short(_stored_line(item['stored']), 100)}", err=err)
        click.echo(f"    reply:  {_short(item['reply'], 100)}{'  (COPY of an earlier reply)' if item['copy'] else ''}", err=err)
    s = summary
    m = report["machine"]
    click.echo("", err=err)
    click.echo(
        f"first session: {s['core_right']} of {s['core_messages']} right; held out: {s['held_out_right']} of "
        f"{s['held_out_messages']} right; all: {s['right']} of {s['messages']} right",
        err=err,
    )
    click.echo(f"copies of an earlier reply: {s['copies']}; facts not in the person's words: {len(s['invented_facts'])}", err=err)
    click.echo(
        f"cold start {s['load_seconds']:.1f} s (model load); first reply {s['first_reply_seconds']:.1f} s; "
        f"later replies median {s['median_later_seconds']:.1f} s, p90 {s['p90_later_seconds']:.1f} s, max {s['max_seconds']:.1f} s",
        err=err,
    )
    click.echo(f"machine: {m['cores']} cores, load average {m['load_average_1m']} before, {m['load_average_1m_after']} after; {report['threads']} llama.cpp thread(s)", err=err)
    if json_out:
        text = json.dumps(report, ensure_ascii=False, indent=2)
        if json_out == "-":
            sys.stdout.write(text + "\n")
        else:
            Path(json_out).write_text(text + "\n", encoding="utf-8")

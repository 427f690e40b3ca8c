"""Reflection: older episodes become knowledge fragments that search finds, ranked with their
importance; one worker reflects a scope at a time; a failure changes nothing else."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from scopehub.agents import ToolContext, search_memory
from scopehub.hub import Deps, Hub, Inbound, load_settings
from scopehub.hub.cli import cli
from scopehub.hub.digest import Reflector
from scopehub.hub.errors import ModelUnavailable
from scopehub.hub.models.testing import FunctionModel, ScriptedModel
from scopehub.memory import NewMessage, Store, add_knowledge, get_reflection, list_knowledge
from tests.helpers import StoreThreads, registry_of

SCOPE = "user:1"
DAY = 86400.0
NOW = 1_700_000_000.0
OLD = NOW - 20 * DAY  # beyond HUB_REFLECT_AFTER_DAYS (7)
RECENT = NOW - 2 * DAY

OLD_EPISODE = [
    "Priya said the budget for the Lisbon offsite is 4500 euros.",
    "Ram booked the Alfama guesthouse for six people from 12 May.",
    "ok",
    "Priya asked Ram to send the invoice to accounting@example.com.",
]
RECENT_EPISODE = ["Ram found a cheaper ferry to Madeira for 85 euros."]


def fill(store: Store, scope: str = SCOPE) -> dict[str, list[int]]:
    ids: dict[str, list[int]] = {"old": [], "recent": []}
    for name, start, texts in (("old", OLD, OLD_EPISODE), ("recent", RECENT, RECENT_EPISODE)):
        for n, text in enumerate(texts):
            message = store.append(NewMessage(scope=scope, role="user", text=text, ts=start + 60 * n, agent="general"))
            ids[name].append(message.id)
    return ids


def reflector(store: Store, model: Any = None, **overrides: Any) -> Reflector:
    config = load_settings(db=store.path, **overrides)
    return Reflector(store, config, model=model, mode="model" if model is not None else "extractive", clock=lambda: NOW)


def make_hub(db: Path, model: Any = None, **overrides: Any) -> Hub:
    store = Store(db)
    config = load_settings(db=db, **overrides)
    return Hub(Deps(store=store, settings=config, model=ScriptedModel(default="ok"), reflector=reflector(store, model, **overrides), clock=lambda: NOW), registry_of())


def test_reflection_distills_older_messages_into_fragments_that_search_finds(tmp_path):
    store = Store(tmp_path / "hub.db")
    ids = fill(store)
    report = asyncio.run(reflector(store).reflect(SCOPE, "test"))
    assert report.outcome == "reflected" and report.messages == len(OLD_EPISODE)
    fragments = list_knowledge(store, SCOPE)
    assert fragments
    for fragment in fragments:
        assert set(fragment.messages) <= set(ids["old"])  # only what is older than 7 days
        assert 0.0 <= fragment.importance <= 1.0
        assert fragment.text.count(".") + fragment.text.count("!") <= 2  # 1-2 sentences
    assert get_reflection(store, SCOPE).message_upto == ids["old"][-1]
    # search_memory surfaces a fragment, labelled as knowledge.
    context = ToolContext(store=store, scope=SCOPE, clock=lambda: NOW)
    found = asyncio.run(search_memory.run(context, {"query": "Alfama guesthouse", "k": 10}))
    assert "[knowledge, importance" in found
    # A second run finds nothing new: an episode is never reflected twice.
    again = asyncio.run(reflector(store).reflect(SCOPE, "test"))
    assert again.outcome == "nothing" and len(list_knowledge(store, SCOPE)) == len(fragments)


def test_older_events_are_distilled_too(tmp_path):
    from scopehub.memory import emit_event

    store = Store(tmp_path / "hub.db")
    event = emit_event(store, SCOPE, "tasks", "task.created", {"task_id": 3, "title": "Renew the Lisbon apartment lease"}, now=OLD)
    emit_event(store, SCOPE, "tasks", "task.created", {"task_id": 4, "title": "Book the Madeira ferry tickets"}, now=RECENT)
    report = asyncio.run(reflector(store).reflect(SCOPE, "test"))
    assert report.events == 1
    (fragment,) = list_knowledge(store, SCOPE)
    assert fragment.events == (event.id,) and fragment.messages == () and "Lisbon apartment lease" in fragment.text
    assert get_reflection(store, SCOPE).event_upto == event.id


def test_importance_counts_in_ranking(tmp_path):
    store = Store(tmp_path / "hub.db")
    fill(store)
    # The unimportant fragment matches a little better on words alone (shorter).
    low = add_knowledge(store, SCOPE, "Offsite budget: 4500 euros.", importance=0.1, messages=[1], ts=OLD)
    high = add_knowledge(store, SCOPE, "The offsite budget Priya set is 4500 euros in all.", importance=0.9, messages=[1], ts=OLD)
    knowledge = [hit.id for hit in store.search(SCOPE, "offsite budget 4500", k=10) if hit.importance is not None]
    assert knowledge == [high.id, low.id]


def test_model_fragments_are_checked_against_their_sources(tmp_path):
    store = Store(tmp_path / "hub.db")
    ids = fill(store)

    def distill(messages: list[dict[str, Any]], tools: Any) -> str:
        first, second = ids["old"][:2]
        return json.dumps(
            {
                "fragments": [
                    {"text": "The Lisbon offsite budget is 4500 euros.", "importance": 0.8, "sources": [f"m{first}"]},
                    {"text": "Ram booked the guesthouse for 8 people.", "importance": 0.6, "sources": [f"m{second}"]},
                ]
            }
        )

    report = asyncio.run(reflector(store, FunctionModel(distill)).reflect(SCOPE, "test"))
    assert report.outcome == "reflected"
    (fragment,) = list_knowledge(store, SCOPE)  # "8 people" is not in its source: dropped
    assert fragment.text == "The Lisbon offsite budget is 4500 euros." and fragment.importance == 0.8
    assert fragment.messages == (ids["old"][0],) and fragment.mode == "model"


def test_a_failing_model_reflects_nothing_and_the_next_run_resumes(tmp_path):
    store = Store(tmp_path / "hub.db")
    fill(store)
    report = asyncio.run(reflector(store, ScriptedModel(default=ModelUnavailable("down"))).reflect(SCOPE, "test"))
    assert report.outcome == "failed" and report.fragments == 0
    assert list_knowledge(store, SCOPE) == [] and get_reflection(store, SCOPE).message_upto == 0
    assert asyncio.run(reflector(store).reflect(SCOPE, "test")).fragments > 0  # resumes where it stopped


def test_two_workers_reflect_a_scope_once(tmp_path):
    db = tmp_path / "hub.db"

    async def main() -> tuple[str, str, str]:
        started, release = asyncio.Event(), asyncio.Event()

        async def slow(messages: list[dict[str, Any]], tools: Any) -> str:
            started.set()
            await release.wait()
            first = int(messages[-1]["content"].split("\n")[1].split(" ", 1)[0][1:])
            return json.dumps({"fragments": [{"text": "Priya set the Lisbon offsite budget.", "importance": 0.5, "sources": [first]}]})

        one = make_hub(db, FunctionModel(slow))
        two = make_hub(db, FunctionModel(slow))
        fill(one.store)
        running = asyncio.create_task(one.deps.reflector.reflect(SCOPE, one.holder))
        await started.wait()
        other = await two.deps.reflector.reflect(SCOPE, two.holder)
        release.set()
        first = await running
        later = await two.deps.reflector.reflect(SCOPE, two.holder)
        return first.outcome, other.outcome, later.outcome

    assert asyncio.run(main()) == ("reflected", "busy", "nothing")
    with Store(db) as store:
        assert len(list_knowledge(store, SCOPE)) == 1


def test_reflect_due_runs_each_scope_once_per_period(tmp_path):
    hub = make_hub(tmp_path / "hub.db", reflect_every_hours=24)
    fill(hub.store)
    fill(hub.store, "group:2")
    first = asyncio.run(hub.reflect_due())
    assert sorted(r.scope for r in first) == ["group:2", SCOPE]
    assert asyncio.run(hub.reflect_due()) == []  # both ran less than 24 hours ago
    off = make_hub(tmp_path / "other.db", reflect_every_hours=0)
    fill(off.store)
    assert asyncio.run(off.reflect_due()) == []  # 0: only on demand


def test_reflection_reads_and_writes_the_store_off_the_event_loop(tmp_path, monkeypatch):
    """On a store that waits on the network (PostgreSQL), the due checks of every scope, the
    episodes, the word statistics and the fragments kept run in the database threads: on the
    event loop, 10,000 scopes' due checks alone held every other chat of the worker."""
    hub = make_hub(tmp_path / "hub.db", reflect_every_hours=24)
    fill(hub.store)
    threads = StoreThreads(hub.store, monkeypatch, names=("query", "transaction", "window", "messages", "scopes"))
    reports = asyncio.run(threads.watch(hub.reflect_due()))
    assert [(r.scope, r.outcome) for r in reports] == [(SCOPE, "reflected")] and reports[0].fragments > 0
    assert {"scopes", "query", "transaction", "window", "messages"} <= set(threads.seen)
    assert threads.on_the_loop() == set()


def test_a_failing_reflection_never_reaches_a_reply(tmp_path, monkeypatch):
    hub = make_hub(tmp_path / "hub.db")
    fill(hub.store)

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(hub.deps.reflector, "reflect_due", broken)
    assert asyncio.run(hub.reflect_due()) == []
    reply = asyncio.run(hub.handle(Inbound(scope=SCOPE, text="hello")))
    assert reply.kind == "agent"


def test_reflect_and_knowledge_commands(tmp_path):
    db = tmp_path / "hub.db"
    with Store(db) as store:
        ids = fill(store)
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", str(db), "reflect", "--scope", SCOPE, "--now", str(NOW), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["outcome"] == "reflected" and report["fragments"] > 0
    listed = runner.invoke(cli, ["--db", str(db), "knowledge", "list", "--scope", SCOPE, "--json"])
    assert listed.exit_code == 0, listed.output
    fragments = json.loads(listed.output)
    assert len(fragments) == report["fragments"]
    assert all(set(f["messages"]) <= set(ids["old"]) and 0 <= f["importance"] <= 1 for f in fragments)


def test_the_running_bot_has_a_reflection_job(tmp_path):
    from tests.hub.telegram_helpers import TOKEN, bot_run

    seen: list[str] = []

    async def scenario(hub: Hub, tg: Any, bot: Any) -> None:
        seen.extend(job.name for job in bot.reminders._job_queue.jobs())

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", telegram_bot_token=TOKEN))
    assert "reflection:due" in seen


class _JobQueue:
    def __init__(self) -> None:
        self.jobs: list[tuple[str, float, float]] = []

    def run_repeating(self, callback: Any, *, interval: float, first: float, name: str) -> None:
        self.jobs.append((name, interval, first))


def test_telegram_schedules_reflection_in_its_job_queue(tmp_path):
    from scopehub.hub.transports.telegram.bot import TelegramBot

    for hours, expected in ((24, [("reflection:due", 3600.0, 60.0)]), (0, [])):
        hub = make_hub(tmp_path / f"{hours}.db", reflect_every_hours=hours)
        queue = _JobQueue()
        TelegramBot(hub, hub.settings).start_reflection(queue)
        assert queue.jobs == expected

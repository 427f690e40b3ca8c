"""The digest of older history: shared by every agent of a scope, compacted off the request
path under a claim, traceable, fail-open, labelled by path, erased with the scope."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from scopehub.hub import Deps, Hub, Inbound, load_settings
from scopehub.hub.cli import cli
from scopehub.hub.context.tokens import get_tokenizer
from scopehub.hub.digest import DIGEST_HEADER, DigestKeeper, SourceText, untraceable
from scopehub.hub.digest import service as digest_service
from scopehub.hub.errors import ModelUnavailable
from scopehub.hub.models.testing import FunctionModel, ScriptedModel
from scopehub.memory import (
    NewMessage,
    Store,
    acquire_claim,
    digest_usage,
    get_digest,
    list_knowledge,
)
from tests.helpers import StoreThreads, registry_of

SCOPE = "group:1"
ZONE_NAME = "UTC"
DAY = 86400.0
START = 1_700_000_000.0  # 14 November 2023
DEADLOCK = 30.0  # seconds: only a broken hub ever waits this long (a guard, not a measure)

# Older history with names, numbers and dates a digest may keep.
HISTORY = [
    "Ram booked the flight to Lisbon for 12 May, seat 14C.",
    "Priya said the budget for the offsite is 4500 euros.",
    "Ram will pick up the rental van from Sixt at 9:30.",
    "Priya reserved the Alfama guesthouse for six people.",
    "The team dinner is at Cervejaria Ramiro on Friday.",
    "Ram asked Priya to send the invoice to accounting@example.com.",
    "Priya confirmed the museum tickets cost 18 euros each.",
    "Ram prefers the window seat on long flights.",
]


def settings(tmp_path: Path, **overrides: Any):
    base = {"db": tmp_path / "hub.db", "window": 4, "tail": 2, "digest_every": 2, "digest_tokens": 200}
    return load_settings(**{**base, **overrides})


def make_hub(tmp_path: Path, *, store: Store | None = None, compactor: Any = None, agent_model: Any = None, **overrides: Any) -> Hub:
    config = settings(tmp_path, **overrides)
    store = store or Store(config.db)
    mode = "model" if compactor is not None else "extractive"
    keeper = DigestKeeper(store, config, model=compactor, mode=mode, clock=lambda: START + 30 * DAY)
    deps = Deps(store=store, settings=config, model=agent_model or ScriptedModel(default="ok"), digest=keeper)
    return Hub(deps, registry_of())


def fill(store: Store, texts: list[str] = HISTORY, scope: str = SCOPE) -> list[int]:
    """Older messages, tagged for the general agent, a minute apart."""
    ids = []
    for n, text in enumerate(texts):
        sender = "Ram" if text.startswith("Ram") else "Priya"
        message = store.append(NewMessage(scope=scope, role="user", text=text, ts=START + 60 * n, sender=sender, agent="general", via="local"))
        ids.append(message.id)
    return ids


def last_call(hub: Hub, scope: str = SCOPE) -> dict[str, Any]:
    call = hub.store.calls(scope)[-1]
    return json.loads(call["extra"])


def system_of(model: ScriptedModel) -> str:
    return "\n\n".join(m["content"] for m in model.calls[-1].messages if m["role"] == "system")


def lines_from(messages: list[dict[str, Any]], *picks: tuple[str, list[int]]) -> str:
    return json.dumps({"lines": [{"text": text, "sources": sources} for text, sources in picks]})


def ids_shown(messages: list[dict[str, Any]]) -> list[int]:
    """The message ids a compaction prompt showed (lines start with '#<id> [')."""
    return [int(line[1:].split(" ", 1)[0]) for line in messages[-1]["content"].splitlines() if line.startswith("#")]


# -- off the request path ---------------------------------------------------------------------------


def test_background_compaction_never_blocks_a_reply(tmp_path):
    """A slow compaction model: the next reply comes back while it is still compacting."""
    order: list[str] = []

    async def main() -> None:
        started, release = asyncio.Event(), asyncio.Event()

        async def compact(messages, tools):
            order.append("compaction started")
            started.set()
            await release.wait()
            order.append("compaction finished")
            first = ids_shown(messages)[0]
            return lines_from(messages, ("Ram booked the flight to Lisbon for 12 May.", [first]))

        agent = ScriptedModel(default="ok")
        hub = make_hub(tmp_path, compactor=FunctionModel(compact), agent_model=agent)
        fill(hub.store)
        first = await hub.handle(Inbound(scope=SCOPE, text="hello", sender="Ram"))
        hub.schedule_after_send(first)  # what a transport does once the reply is sent
        await asyncio.wait_for(started.wait(), DEADLOCK)
        # A reply that waited for the compaction would never come: the guard turns that into a failure.
        second = await asyncio.wait_for(hub.handle(Inbound(scope=SCOPE, text="what is the plan?", sender="Ram")), DEADLOCK)
        order.append("second reply")
        assert second.kind == "agent" and second.text == "ok"
        assert last_call(hub)["digest"]["path"] == "none"  # no digest yet: the section is left out
        assert DIGEST_HEADER not in system_of(agent)
        release.set()
        await hub.drain()
        third = await hub.handle(Inbound(scope=SCOPE, text="and the flight?", sender="Ram"))
        assert third.kind == "agent"
        assert "Ram booked the flight to Lisbon for 12 May." in system_of(agent)
        assert last_call(hub)["digest"]["path"] == "full"

    asyncio.run(main())
    # The reply came while the compaction was running; background work gives way to a new
    # message of the scope (it is cancelled and done again after the reply), never the reverse.
    assert order[:2] == ["compaction started", "second reply"] and order[-1] == "compaction finished"


def test_the_digest_is_one_per_scope_shared_by_every_agent(tmp_path):
    hub = make_hub(tmp_path)
    fill(hub.store)
    calls: list[str] = []

    async def main() -> None:
        reply = await hub.handle(Inbound(scope=SCOPE, text="hello", sender="Ram"))
        await hub.after_send(reply)
        agent = hub.deps.model
        await hub.handle(Inbound(scope=SCOPE, text="/general how was the trip planned?", sender="Ram"))
        calls.append(system_of(agent))
        await hub.handle(Inbound(scope=SCOPE, text="/tasks add call Sixt", sender="Ram"))
        calls.append(system_of(agent))

    asyncio.run(main())
    digest = get_digest(hub.store, SCOPE)
    assert digest is not None and digest.stats["full"] == 1  # paid once for the scope
    sections = [text[text.index(DIGEST_HEADER) :] for text in calls]
    assert sections[0] == sections[1]  # the same bytes for both agents
    assert [c["agent"] for c in hub.store.calls(SCOPE)][-2:] == ["general", "tasks"]


# -- paths ------------------------------------------------------------------------------------------


def test_each_state_takes_its_path(tmp_path, monkeypatch):
    """none → full → cached → incremental → cached → full_recompact, recorded per call."""
    monkeypatch.setattr(digest_service, "RECOMPACT_EVERY", 2)  # a rebuild after every second fold
    hub = make_hub(tmp_path)

    async def ask(text: str, *, compact_after: bool = False) -> str:
        reply = await hub.handle(Inbound(scope=SCOPE, text=text, sender="Ram"))
        if compact_after:
            await hub.after_send(reply)
        return last_call(hub)["digest"]["path"]

    async def main() -> list[str]:
        paths = [await ask("hi there", compact_after=True)]  # 2 messages: nothing has left the window
        fill(hub.store, HISTORY[:4])
        paths.append(await ask("Priya booked Lisbon", compact_after=True))  # then the first compaction
        paths.append(await ask("Ram has the van keys"))  # the digest made since the last call
        paths.append(await ask("Priya has the museum tickets", compact_after=True))  # the same; then a fold
        paths.append(await ask("Ram will drive"))
        paths.append(await ask("Priya will navigate", compact_after=True))  # then the second fold: a rebuild
        paths.append(await ask("where are we?"))
        return paths

    paths = asyncio.run(main())
    assert paths == ["none", "none", "full", "cached", "incremental", "cached", "full_recompact"]
    calls = hub.store.calls(SCOPE)
    usage = digest_usage(hub.store, SCOPE)
    assert usage["paths"] == {"none": 2, "full": 1, "cached": 2, "incremental": 1, "full_recompact": 1}
    assert usage["compactions"] == {"full": 1, "incremental": 1, "full_recompact": 1}
    assert usage["calls"] == len(calls)
    assert usage["tokens"] == sum(json.loads(c["extra"])["digest"]["tokens"] for c in calls) > 0
    # The digest's age: messages that left the window since it was made.
    assert all(json.loads(c["extra"])["digest"]["age"] >= 0 for c in calls)


def test_age_counts_the_messages_that_left_the_window_since_the_digest(tmp_path):
    hub = make_hub(tmp_path)
    fill(hub.store)
    asyncio.run(hub.deps.digest.compact(SCOPE, "test"))
    upto = get_digest(hub.store, SCOPE).upto_id
    for _ in range(3):
        asyncio.run(hub.handle(Inbound(scope=SCOPE, text="another message", sender="Ram")))
    calls = hub.store.calls(SCOPE)
    # Each exchange adds two messages; the call sees those before its own message.
    ages = [json.loads(c["extra"])["digest"]["age"] for c in calls]
    assert ages == [0, 2, 4]
    assert get_digest(hub.store, SCOPE).upto_id == upto  # read on the request path, never compacted there


def test_usage_shows_the_digest_cost_and_paths(tmp_path):
    hub = make_hub(tmp_path)
    fill(hub.store)

    async def main() -> str:
        reply = await hub.handle(Inbound(scope=SCOPE, text="hello", sender="Ram"))
        await hub.after_send(reply)
        await hub.handle(Inbound(scope=SCOPE, text="and now?", sender="Ram"))
        usage = await hub.handle(Inbound(scope=SCOPE, text="/usage", sender="Ram"))
        return usage.text

    text = asyncio.run(main())
    usage = digest_usage(hub.store, SCOPE)
    assert f"Digest: {usage['tokens']:,} tokens over 2 calls" in text and "full 1" in text and "none 1" in text
    hub.store.close()
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "hub.db"), "usage", "--scope", SCOPE, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["digest"]
    assert data["paths"]["full"] == 1 and data["paths"]["none"] == 1 and data["tokens"] == usage["tokens"] > 0
    assert data["compactions"]["full"] == 1 and data["model_calls"] == 0  # extractive: no model tokens


# -- fail-open --------------------------------------------------------------------------------------


def good_fold(messages, tools):
    first = ids_shown(messages)[0]
    return lines_from(messages, ("Ram booked the flight to Lisbon for 12 May.", [first]))


@pytest.mark.parametrize("failure", ["timeout", "error"])
def test_a_failed_compaction_keeps_the_cached_digest(tmp_path, failure):
    async def never(messages, tools):
        await asyncio.Event().wait()

    broken = never if failure == "timeout" else ModelUnavailable("provider down")
    compactor = ScriptedModel([good_fold, broken])
    hub = make_hub(tmp_path, compactor=compactor, digest_timeout=0.05)
    fill(hub.store)
    keeper = hub.deps.digest
    assert asyncio.run(keeper.compact(SCOPE, "test")).outcome == "compacted"
    before = get_digest(hub.store, SCOPE)
    fill(hub.store, ["Priya moved the dinner to Saturday at 20:00.", "Ram paid the deposit of 300 euros."])
    report = asyncio.run(keeper.compact(SCOPE, "test"))
    assert report.outcome == "failed"
    assert ("longer than" if failure == "timeout" else "ModelUnavailable") in report.reason
    after = get_digest(hub.store, SCOPE)
    assert (after.version, after.lines) == (before.version, before.lines)
    assert after.stats["failed"] == 1
    assert len(compactor.calls) == 2  # a timeout or an error is not retried as a rebuild
    # Not retried after every reply: only once as many messages have left the window again.
    assert not keeper.due(SCOPE)
    agent = hub.deps.model
    reply = asyncio.run(hub.handle(Inbound(scope=SCOPE, text="where do we fly?", sender="Ram")))
    assert reply.kind == "agent"
    assert "Ram booked the flight to Lisbon for 12 May." in system_of(agent)
    record = last_call(hub)["digest"]
    assert record["path"] == "full" and record["age"] == 2  # the cached digest, older by two messages


@pytest.mark.parametrize("failure", ["timeout", "error", "not json"])
def test_no_digest_and_a_failing_model_mean_the_extractive_digest_stands_in(tmp_path, failure):
    """Seed 003: the cached digest, else the raw history: with no digest to keep, the
    messages' own sentences are the digest until the model answers again."""

    async def never(messages, tools):
        await asyncio.Event().wait()

    compactor = {
        "timeout": FunctionModel(never),
        "error": ScriptedModel(default=ModelUnavailable("down")),
        "not json": ScriptedModel(default="Sure! Here is a summary of the chat."),
    }[failure]
    agent = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, compactor=compactor, agent_model=agent, digest_timeout=0.05)
    fill(hub.store)

    async def main() -> None:
        reply = await hub.handle(Inbound(scope=SCOPE, text="hello", sender="Ram"))
        await hub.after_send(reply)  # the compaction fails in the background
        reply = await hub.handle(Inbound(scope=SCOPE, text="hello again", sender="Ram"))
        assert reply.kind == "agent" and reply.text == "ok"

    asyncio.run(main())
    digest = get_digest(hub.store, SCOPE)
    assert (digest.mode, digest.kind, digest.stats["failed"]) == ("extractive", "full", 1)
    assert digest.stats["last_failure"]
    # Verbatim sentences of the older messages, with their day: what the agent was sent.
    sent = system_of(agent).split(DIGEST_HEADER + "\n", 1)[1].split("\n\n", 1)[0].splitlines()
    shown = [line.split(": ", 1)[1] for line in sent if line.startswith("- ")]
    assert sent[0] == "14 November 2023:" and shown and all(text in HISTORY for text in shown)
    assert last_call(hub)["digest"]["path"] == "full"


def test_the_model_rebuilds_an_extractive_stand_in_once_it_answers_again(tmp_path):
    compactor = ScriptedModel([ModelUnavailable("down"), good_fold])
    hub = make_hub(tmp_path, compactor=compactor, digest_timeout=0.05)
    fill(hub.store)
    keeper = hub.deps.digest
    first = asyncio.run(keeper.compact(SCOPE, "test"))
    assert (first.outcome, first.kind) == ("compacted", "full") and "extractive digest stands in" in first.reason
    assert get_digest(hub.store, SCOPE).mode == "extractive"
    fill(hub.store, ["Priya moved the dinner to Saturday at 20:00.", "Ram paid the deposit of 300 euros."])
    assert keeper.due(SCOPE)
    again = asyncio.run(keeper.compact(SCOPE, "test"))  # due: a rebuild by the model, not a fold into the stand-in
    assert (again.outcome, again.kind) == ("compacted", "full_recompact")
    assert get_digest(hub.store, SCOPE).mode == "model"


def test_a_digest_that_cannot_be_read_means_no_section_and_a_reply(tmp_path, monkeypatch, caplog):
    hub = make_hub(tmp_path)
    fill(hub.store)
    asyncio.run(hub.deps.digest.compact(SCOPE, "test"))

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(hub.deps.digest, "section", broken)
    reply = asyncio.run(hub.handle(Inbound(scope=SCOPE, text="hello", sender="Ram")))
    assert reply.kind == "agent"
    assert DIGEST_HEADER not in system_of(hub.deps.model)
    assert "digest unavailable" in caplog.text


# -- traceability -----------------------------------------------------------------------------------


def test_a_line_with_an_invented_number_is_rejected():
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(ZONE_NAME)
    source = [SourceText("Ram booked the flight to Lisbon for 12 May, seat 14C.", "Ram", START)]
    assert untraceable("Ram booked the Lisbon flight for 12 May.", source, zone=zone) == []
    assert untraceable("Ram booked the Lisbon flight for 13 May.", source, zone=zone) == ["13"]
    assert untraceable("Ram booked the Lisbon flight for Anna.", source, zone=zone) == ["Anna"]
    assert untraceable("Ram booked three flights to Lisbon.", source, zone=zone) == ["three"]
    # The source's own date and time may be stated (14 November 2023).
    assert untraceable("On 14 November 2023 Ram booked a flight.", source, zone=zone) == []


def test_the_compaction_drops_untraceable_lines_and_keeps_the_rest(tmp_path):
    def fold(messages, tools):
        first, second = ids_shown(messages)[:2]
        return lines_from(
            messages,
            ("Ram booked the flight to Lisbon for 12 May.", [first]),
            ("Priya set the offsite budget at 4500 euros.", [second]),
            ("Priya set the offsite budget at 9000 euros.", [second]),  # invented
        )

    hub = make_hub(tmp_path, compactor=FunctionModel(fold))
    fill(hub.store)
    report = asyncio.run(hub.deps.digest.compact(SCOPE, "test"))
    assert report.outcome == "compacted" and report.rejected == 1
    texts = [line.text for line in get_digest(hub.store, SCOPE).lines]
    assert texts == ["Ram booked the flight to Lisbon for 12 May.", "Priya set the offsite budget at 4500 euros."]
    assert all(line.sources for line in get_digest(hub.store, SCOPE).lines)


def test_mostly_untraceable_output_keeps_the_cached_digest(tmp_path):
    def invent(messages, tools):
        first = ids_shown(messages)[0]
        return lines_from(
            messages,
            ("Ram booked the flight to Porto for 3 June.", [first]),
            ("Anna will bring 7 bikes.", [first]),
            ("Ram booked the flight to Lisbon for 12 May.", [first]),
        )

    compactor = ScriptedModel([good_fold, invent, invent])  # a fold, then its rebuild, both invent
    hub = make_hub(tmp_path, compactor=compactor)
    fill(hub.store)
    keeper = hub.deps.digest
    asyncio.run(keeper.compact(SCOPE, "test"))
    before = get_digest(hub.store, SCOPE)
    fill(hub.store, ["Priya moved the dinner to Saturday.", "Ram paid the deposit."])
    report = asyncio.run(keeper.compact(SCOPE, "test"))
    assert report.outcome == "failed" and "untraceable" in report.reason
    assert get_digest(hub.store, SCOPE).lines == before.lines
    assert len(compactor.calls) == 3  # the fold, then a rebuild from the sources, then kept the cache


# -- extractive --------------------------------------------------------------------------------------


def test_without_a_model_the_digest_is_extractive_within_budget_and_traceable(tmp_path):
    config = settings(tmp_path, digest_tokens=60)
    store = Store(config.db)
    keeper = DigestKeeper(store, config)  # no model: extractive, no model call
    assert keeper.mode == "extractive"
    fill(store, ["hi", "ok thanks", HISTORY[0]])
    fill(store)
    asyncio.run(keeper.compact(SCOPE, "test"))
    digest = get_digest(store, SCOPE)
    section = keeper.section(SCOPE)
    assert 0 < get_tokenizer().count(section.text) <= 60
    texts = {line.text: line for line in digest.lines}
    for line in digest.lines:
        (source,) = line.sources
        assert line.text in store.get(SCOPE, source).text  # verbatim from its source
    assert "hi" not in texts and "ok thanks" not in texts  # filler is not news
    assert len([t for t in texts if "Lisbon" in t]) <= 1  # said twice, kept once


def test_the_extractive_digest_says_a_thing_once_and_leaves_reactions_out():
    from zoneinfo import ZoneInfo

    from scopehub.hub.digest.extractive import extractive_digest
    from scopehub.hub.digest.text import Salience
    from scopehub.memory import Message

    texts = [HISTORY[0], "Love that purple color!", HISTORY[0], "Haha, sure thing."]
    messages = [Message(id=n + 1, scope=SCOPE, role="user", text=t, ts=START + n, sender="Ram") for n, t in enumerate(texts)]
    lines = extractive_digest(
        messages, (), Salience().add(HISTORY + texts), tokenizer=get_tokenizer(), budget=200, zone=ZoneInfo(ZONE_NAME)
    )
    assert [line.text for line in lines] == [HISTORY[0]]  # room for all four; one says something, once


def test_auto_mode_asks_the_model_only_when_hub_model_names_one(tmp_path):
    model = ScriptedModel()
    assert DigestKeeper(Store(), settings(tmp_path), model=model).mode == "extractive"  # embedded model: too slow
    assert DigestKeeper(Store(), settings(tmp_path, model="openai/gpt-4o-mini"), model=model).mode == "model"
    assert DigestKeeper(Store(), settings(tmp_path, model="openai/x", digest_mode="extractive"), model=model).mode == "extractive"
    assert DigestKeeper(Store(), settings(tmp_path, digest_mode="model"), model=None).mode == "extractive"


# -- the claim -------------------------------------------------------------------------------------


def test_two_workers_compact_a_scope_once(tmp_path):
    db = tmp_path / "hub.db"

    async def main() -> list[str]:
        started, release = asyncio.Event(), asyncio.Event()

        async def slow(messages, tools):
            started.set()
            await release.wait()
            return good_fold(messages, tools)

        first = make_hub(tmp_path, store=Store(db), compactor=FunctionModel(slow))
        second = make_hub(tmp_path, store=Store(db), compactor=FunctionModel(good_fold))
        fill(first.store)
        running = asyncio.create_task(first.deps.digest.compact(SCOPE, first.holder))
        await started.wait()
        other = await second.deps.digest.compact(SCOPE, second.holder)
        release.set()
        return [(await running).outcome, other.outcome]

    assert asyncio.run(main()) == ["compacted", "busy"]
    with Store(db) as store:
        assert get_digest(store, SCOPE).version == 1


@pytest.mark.parametrize("kind", ["full", "incremental"])
def test_a_compaction_reads_and_writes_the_store_off_the_event_loop(tmp_path, monkeypatch, kind):
    """On a store that waits on the network (PostgreSQL), the compaction's reads (the digest,
    up to HUB_WINDOW + 2,000 messages, the sources of its lines), its claim and its save run
    in the database threads: done on the event loop, they held every other chat of the worker."""
    hub = make_hub(tmp_path, compactor=FunctionModel(good_fold))
    store, keeper = hub.store, hub.deps.digest
    fill(store)
    if kind == "incremental":
        assert asyncio.run(keeper.compact(SCOPE, hub.holder)).outcome == "compacted"
        fill(store, HISTORY[:4])
    threads = StoreThreads(store, monkeypatch)
    assert asyncio.run(threads.watch(keeper.compact(SCOPE, hub.holder))).outcome == "compacted"
    assert get_digest(store, SCOPE).version == (2 if kind == "incremental" else 1)
    # The claim it works under is a transaction; an increment reads its lines' sources.
    assert {"window", "query", "transaction"} <= set(threads.seen) and (kind == "full" or "get" in threads.seen)
    assert threads.on_the_loop() == set()


def test_a_model_fold_reads_only_the_messages_after_the_digest_and_keeps_the_same_digest(tmp_path):
    """An incremental fold by the model needs the messages after the digest, not the 2,000
    before it that the extractive digest reads for its word statistics: it reads those only,
    and the model is shown, and the store keeps, exactly what a read of them all gave."""

    def run(db_name: str, read_all: bool) -> tuple[list[Any], Any, list[int]]:
        prompts: list[Any] = []

        def fold(messages, tools):
            prompts.append(messages)
            return good_fold(messages, tools)

        hub = make_hub(tmp_path / db_name, compactor=FunctionModel(fold))
        keeper, read = hub.deps.digest, []
        left = keeper._left

        def spied_left(scope: str, after: int = 0) -> list[Any]:
            got = left(scope, 0 if read_all else after)
            read.append(len(got))
            return got

        keeper._left = spied_left  # type: ignore[method-assign]
        fill(hub.store, HISTORY * 3)
        assert asyncio.run(keeper.compact(SCOPE, hub.holder)).outcome == "compacted"  # the first: full
        fill(hub.store, HISTORY[:4])
        # Planned as a fold; this fold comes back unusable, so it is rebuilt from the
        # digest's sources and the pending messages: neither reads the older ones either.
        assert asyncio.run(keeper.compact(SCOPE, hub.holder)).outcome == "compacted"
        digest = get_digest(hub.store, SCOPE)
        return prompts, (digest.lines, digest.upto_id, digest.stats.get("covered"), digest.version), read

    (tmp_path / "all").mkdir()
    (tmp_path / "after").mkdir()
    prompts_all, digest_all, read_all = run("all", read_all=True)
    prompts_after, digest_after, read_after = run("after", read_all=False)
    assert prompts_after == prompts_all and digest_after == digest_all
    assert read_after[0] == read_all[0] and read_after[1] < read_all[1]  # the fold read only what it folds


def test_housekeeping_claims_are_not_shown_as_team_work(tmp_path):
    hub = make_hub(tmp_path)
    acquire_claim(hub.store, SCOPE, "digest", "someone", note="hub: compacting the digest", ttl=60, now=START + 30 * DAY)
    hub.deps.clock = lambda: START + 30 * DAY
    assert "compacting" not in hub.awareness_for("general", SCOPE).text


# -- CLI and erasure ----------------------------------------------------------------------------------


def test_digest_show_lists_lines_with_their_sources(tmp_path):
    hub = make_hub(tmp_path)
    ids = fill(hub.store)
    asyncio.run(hub.deps.digest.compact(SCOPE, "test"))
    hub.store.close()
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", str(tmp_path / "hub.db"), "digest", "show", "--scope", SCOPE, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["version"] == 1 and data["kind"] == "full" and data["mode"] == "extractive"
    assert data["lines"] and all(set(line["sources"]) <= set(ids) for line in data["lines"])
    assert data["age"] == 0 and data["section"].startswith(DIGEST_HEADER)
    text = runner.invoke(cli, ["--db", str(tmp_path / "hub.db"), "digest", "show", "--scope", SCOPE])
    assert text.exit_code == 0 and f"[#{data['lines'][0]['sources'][0]}]" in text.output


def file_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists())


def test_forget_erases_the_digest_and_fragments_down_to_the_file(tmp_path):
    from scopehub.hub.digest import Reflector

    secret, kept = "QUETZAL4417", "PANGOLIN5150"
    db = tmp_path / "hub.db"
    hub = make_hub(tmp_path)
    for scope, word in (("user:9", secret), (SCOPE, kept)):
        # Every message carries the scope's word, so every line and fragment made from them does.
        fill(hub.store, [f"{text[:-1]} with {word}." for text in HISTORY], scope=scope)
        asyncio.run(hub.deps.digest.compact(scope, "test"))
        lines = get_digest(hub.store, scope).lines
        assert lines and all(word in line.text for line in lines)
        reflector = Reflector(hub.store, hub.settings)
        assert asyncio.run(reflector.reflect(scope, "test", now=START + 30 * DAY)).fragments > 0
        assert all(word in fragment.text for fragment in list_knowledge(hub.store, scope))
    hub.store.close()
    result = CliRunner().invoke(cli, ["--db", str(db), "forget", "--scope", "user:9", "--yes"])
    assert result.exit_code == 0, result.output
    raw = file_bytes(db)
    assert secret.encode() not in raw and secret.lower().encode() not in raw
    assert kept.encode() in raw  # the other scope keeps its digest and fragments
    with Store(db) as store:
        assert get_digest(store, "user:9") is None
        assert store.query("SELECT count(*) FROM reflections WHERE scope = 'user:9'")[0][0] == 0
        assert get_digest(store, SCOPE) is not None
        assert list_knowledge(store, "user:9") == [] and list_knowledge(store, SCOPE)

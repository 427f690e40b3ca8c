"""The work after a reply (lessons, facts, the finding, the digest) as a person's next
message finds it, and what it costs the store: two steps, each one thread hop on
PostgreSQL, however many of those parts have something to do."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from scopehub.hub import Deps, Hub, Inbound, load_settings
from scopehub.hub.digest import DigestKeeper
from scopehub.hub.facts import FactKeeper
from scopehub.hub.models.testing import ScriptedModel
from scopehub.memory import NewMessage, Store, current_facts, get_digest
from tests.helpers import StoreThreads, registry_of

SCOPE = "user:7"
START = 1_700_000_000.0


def extraction(text: str, key: str) -> str:
    return json.dumps({"facts": [{"op": "add", "text": text, "key": key}]})


def make_hub(tmp_path: Path, *, digest_every: int, extractor: ScriptedModel) -> Hub:
    config = load_settings(db=tmp_path / "hub.db", window=4, tail=2, digest_every=digest_every, digest_tokens=200)
    store = Store(config.db)
    clock = iter(range(int(START), int(START) + 10_000))

    def now() -> float:
        return float(next(clock))

    deps = Deps(
        store=store, settings=config, model=ScriptedModel(default="ok"), clock=now,
        facts=FactKeeper(store, extractor, clock=now),
        digest=DigestKeeper(store, config, mode="extractive", clock=now),
    )  # fmt: skip
    return Hub(deps, registry_of())


def fill(store: Store, count: int) -> None:
    for n in range(count):
        store.append(NewMessage(scope=SCOPE, role="user", text=f"Ram packed box {n} for the move", ts=START + n, agent="general", via="local"))


def answer_and_learn(hub: Hub, threads: StoreThreads, text: str) -> Any:
    async def run() -> Any:
        reply = await hub.handle(Inbound(scope=SCOPE, text=text))
        await threads.watch(hub.after_send(reply))
        return reply

    return asyncio.run(run())


def test_learning_after_a_reply_takes_two_store_steps_and_keeps_the_fact(tmp_path, monkeypatch):
    """A stated fact and a digest that is not due: the fact is learnt in two store steps
    (the reads, then the writes with the digest's due check), none on the event loop. Each
    part took steps of its own before: six for the same work."""
    hub = make_hub(tmp_path, digest_every=1000, extractor=ScriptedModel([extraction("User's email is ram@example.com", "user.email")]))
    fill(hub.store, 6)
    threads = StoreThreads(hub.store, monkeypatch)
    reply = answer_and_learn(hub, threads, "my email is ram@example.com")
    assert reply.kind == "agent"
    assert any("ram@example.com" in fact.text for fact in current_facts(hub.store, SCOPE))
    # The extractor was asked, and its call recorded, in the second step.
    assert [call["via"] for call in hub.store.calls(SCOPE) if call["agent"] == "hub"] == ["extractor"]
    assert get_digest(hub.store, SCOPE) is None  # not due
    assert threads.steps == ["_read_after", "_keep_after"]
    assert threads.on_the_loop() == set()


def test_a_digest_due_after_a_reply_is_compacted_from_the_due_check_of_the_second_step(tmp_path, monkeypatch):
    """The due check read with the writes is what starts the compaction: it is not read again."""
    hub = make_hub(tmp_path, digest_every=2, extractor=ScriptedModel(default=json.dumps({"facts": []})))
    fill(hub.store, 12)
    threads = StoreThreads(hub.store, monkeypatch)
    answer_and_learn(hub, threads, "what did Ram pack?")
    digest = get_digest(hub.store, SCOPE)
    assert digest is not None and digest.lines  # compacted
    assert threads.steps[:2] == ["_read_after", "_keep_after"] and "due" not in threads.steps, threads.steps
    assert threads.on_the_loop() == set()



def test_the_reads_after_a_reply_are_one_batch_and_the_fact_is_still_learnt(tmp_path, monkeypatch):
    """The pending feedback, the message answered, the reply and its call record are read in
    one batch (one round trip on PostgreSQL, three before), and the fact is still learnt."""
    from scopehub.hub.orchestrator._after_reply import AfterReply

    hub = make_hub(tmp_path, digest_every=1000, extractor=ScriptedModel([extraction("User's email is ram@example.com", "user.email")]))
    fill(hub.store, 6)
    reads: list[str] = []
    first_step = AfterReply._read_after

    def recorded(self, reply, answered):
        for name in ("query", "query_batch", "get"):
            method = getattr(hub.store, name)
            monkeypatch.setattr(hub.store, name, lambda *a, _m=method, _n=name, **kw: reads.append(_n) or _m(*a, **kw))
        try:
            return first_step(self, reply, answered)
        finally:
            for name in ("query", "query_batch", "get"):
                monkeypatch.delattr(hub.store, name)

    monkeypatch.setattr(AfterReply, "_read_after", recorded)
    threads = StoreThreads(hub.store, monkeypatch, names=())
    reply = answer_and_learn(hub, threads, "my email is ram@example.com, and what did Ram pack?")
    assert reply.kind == "agent"
    # One batch, no lone reads of the message or the reply; the known facts are read after
    # it for the extractor (only when the message holds something to learn).
    assert reads[0] == "query_batch" and reads.count("query_batch") == 1 and "get" not in reads, reads
    assert any("ram@example.com" in fact.text for fact in current_facts(hub.store, SCOPE))


def test_a_failing_batch_after_a_reply_falls_back_to_the_reads_one_by_one(tmp_path, monkeypatch):
    hub = make_hub(tmp_path, digest_every=1000, extractor=ScriptedModel([extraction("User's email is ram@example.com", "user.email")]))
    fill(hub.store, 6)
    real = hub.store.query_batch
    failing = {"on": False}

    def query_batch(statements):
        if failing["on"] and any("FROM feedback" in sql for sql, _ in statements):
            raise RuntimeError("the batch failed")
        return real(statements)

    monkeypatch.setattr(hub.store, "query_batch", query_batch)

    async def run():
        reply = await hub.handle(Inbound(scope=SCOPE, text="my email is ram@example.com"))
        failing["on"] = True
        await hub.after_send(reply)
        return reply

    assert asyncio.run(run()).kind == "agent"
    assert any("ram@example.com" in fact.text for fact in current_facts(hub.store, SCOPE))

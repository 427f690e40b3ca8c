"""Chat settings, the deployment's secrets, invites, unreadable updates and daily spending, on every backend."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from scopehub.memory import (
    CallRecord,
    InvalidRecord,
    MemoryStore,
    chat_settings,
    create_invite,
    deployment_secret,
    invites,
    is_paired,
    open_store,
    record_rejected_update,
    redeem_invite,
    rejected_updates,
    revoke_invite,
    set_agent_topic,
    spending_since,
    update_chat_settings,
)
from tests.memory.backends import BACKENDS

NOW = 1_700_000_000.0


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    opened = BACKENDS[request.param](request, tmp_path)
    try:
        yield opened
    finally:
        opened.close()


def test_a_chat_without_settings_has_the_defaults_and_changes_are_kept_one_by_one(store):
    assert chat_settings(store, "group:-5").agents is None and chat_settings(store, "group:-5").timezone is None
    update_chat_settings(store, "group:-5", timezone="Europe/Berlin", now=NOW)
    update_chat_settings(store, "group:-5", agents=["tasks", "notes", "tasks"], now=NOW + 1)
    got = chat_settings(store, "group:-5")
    assert (got.timezone, got.language, got.agents, got.updated) == ("Europe/Berlin", None, ("tasks", "notes"), NOW + 1)
    update_chat_settings(store, "group:-5", agents=None, language="de", now=NOW + 2)  # None: back to every agent
    got = chat_settings(store, "group:-5")
    assert (got.timezone, got.language, got.agents) == ("Europe/Berlin", "de", None)
    assert chat_settings(store, "group:-6").timezone is None  # another chat keeps its own
    with pytest.raises(InvalidRecord):
        update_chat_settings(store, "group:-5", agents=[], now=NOW)


def test_topics_per_agent_are_kept_and_erasing_the_chat_drops_its_settings_and_unreadable_updates(store):
    set_agent_topic(store, "user:7", "tasks", 11, now=NOW)
    assert set_agent_topic(store, "user:7", "notes", 12, now=NOW) == {"tasks": 11, "notes": 12}
    update_chat_settings(store, "user:7", language="fr", now=NOW)
    assert chat_settings(store, "user:7").topics == {"tasks": 11, "notes": 12}  # a settings change keeps the topics
    record_rejected_update(store, update_id=5, scope="user:7", reason="TypeError: x", body="{}", now=NOW)
    record_rejected_update(store, update_id=6, scope=None, reason="not JSON", body="garbage", now=NOW)
    store.erase("user:7")
    assert chat_settings(store, "user:7").topics == {} and chat_settings(store, "user:7").language is None
    assert [(r.update_id, r.scope) for r in rejected_updates(store)] == [(6, None)]


def test_every_worker_reads_the_secret_the_first_one_stored(store, request, tmp_path):
    first = deployment_secret(store, "telegram-webhook", lambda: "made-by-the-first", now=NOW)
    assert first == "made-by-the-first"
    assert deployment_secret(store, "telegram-webhook", lambda: "made-by-another", now=NOW) == "made-by-the-first"


def test_racing_workers_agree_on_one_secret(tmp_path):
    path = tmp_path / "hub.db"
    open_store(path).close()
    results: list[str] = []
    barrier = threading.Barrier(4)

    def worker(n: int) -> None:
        store = open_store(path)
        try:
            barrier.wait()
            results.append(deployment_secret(store, "telegram-webhook", lambda: f"secret-{n}", now=NOW))
        finally:
            store.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4 and len(set(results)) == 1


def test_an_invite_lets_in_as_many_people_as_it_says_until_it_expires(store):
    create_invite(store, "team-2024", uses=2, expires=NOW + 3600, note="the team", now=NOW)
    assert redeem_invite(store, "team-2024", 101, now=NOW + 1)
    assert redeem_invite(store, "team-2024", 101, now=NOW + 2)  # pairing again costs no use
    assert redeem_invite(store, "team-2024", 102, now=NOW + 3)
    assert not redeem_invite(store, "team-2024", 103, now=NOW + 4)  # used up
    assert is_paired(store, 101) and is_paired(store, 102) and not is_paired(store, 103)
    create_invite(store, "late", uses=5, expires=NOW + 10, now=NOW)
    assert not redeem_invite(store, "late", 104, now=NOW + 11)  # expired
    assert not redeem_invite(store, "nope", 104, now=NOW)
    create_invite(store, "revoked", uses=5, now=NOW + 1)
    assert [i.code for i in invites(store, now=NOW + 5)] == ["revoked", "late"]
    assert revoke_invite(store, "revoked") and not redeem_invite(store, "revoked", 105, now=NOW)
    with pytest.raises(InvalidRecord):
        create_invite(store, "bad code!", now=NOW)


def test_spending_since_counts_every_model_call_of_the_scope_from_that_moment(store):
    def call(scope: str, ts: float, prompt: int | None, completion: int | None, cost: float | None, total: int = 0, via: str = "local") -> None:
        store.record_call(
            CallRecord(
                scope=scope, agent="tasks", message_id=None, via=via, also_sees=(), model="m", tokens={"total": total},
                full_history_tokens=0, prompt_tokens=prompt, completion_tokens=completion, cost=cost, ts=ts,
            )
        )

    call("user:1", NOW - 10, 1000, 100, 0.5)  # yesterday
    call("user:1", NOW + 1, 300, 50, 0.01)
    call("user:1", NOW + 2, None, None, None, total=120)  # no usage reported: the tokens sent count
    call("user:1", NOW + 3, 40, 2, None, via="router")  # the LLM router costs tokens too
    call("user:2", NOW + 1, 999, 999, 9.0)
    spent = spending_since(store, "user:1", NOW)
    assert (spent.calls, spent.tokens) == (3, 350 + 120 + 42)
    assert spent.cost == pytest.approx(0.01)
    assert spending_since(store, "user:3", NOW).cost is None

"""The reads a queued turn starts with: one batch, one round trip on PostgreSQL.

A transport that holds the scope's turn (Telegram, the terminal chat) answers a stored
message with ``Hub.answer_queued``. Before routing it reads the message as stored now,
whether it is answered, the chat's settings and the recent messages before it: five
reads, one batch (``Store.query_batch``). These tests show what the agent is then sent is
what the reads one by one give, and that a failing batch falls back to them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess

import pytest

from scopehub.hub.models.testing import ScriptedModel
from scopehub.hub.orchestrator import Deps, Hub
from scopehub.hub.settings import load_settings
from scopehub.memory import NewMessage, Store, update_chat_settings
from tests.helpers import ROOT, checkout_env, checkout_python, registry_of

SCOPE = "user:7"


def hub_on(store: Store, model: ScriptedModel) -> Hub:
    return Hub(Deps(store=store, settings=load_settings(db=store.path, digest_every=0), model=model), registry_of())


def late_reply_scope(store: Store) -> tuple[int, int]:
    """A, then B while A was answered, then A's reply (stored after B): ``(A's id, B's id)``."""
    first = store.append(NewMessage(scope=SCOPE, role="user", text="what's the capital of Peru?", ts=1_000.0)).id
    second = store.append(NewMessage(scope=SCOPE, role="user", text="and of Chile?", ts=1_001.0)).id
    store.append(NewMessage(scope=SCOPE, role="agent", text="Lima is the capital of Peru.", ts=1_002.0, agent="general", reply_to=first))
    return first, second


def sent_texts(model: ScriptedModel) -> list[str]:
    return [str(m.get("content")) for m in model.calls[-1].messages]


def reads_before_routing(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The store's reads, by method name, until the message's route is written."""
    reads: list[str] = []
    routed = False
    for name in ("query", "query_batch", "get", "is_answered", "window", "messages", "find_ext"):
        method = getattr(store, name)
        monkeypatch.setattr(store, name, lambda *a, _m=method, _n=name, **kw: (None if routed else reads.append(_n)) or _m(*a, **kw))
    set_route = store.set_route

    def routing(*args, **kwargs):
        nonlocal routed
        routed = True
        return set_route(*args, **kwargs)

    monkeypatch.setattr(store, "set_route", routing)
    return reads


def test_a_queued_turn_reads_its_message_settings_and_window_in_one_batch_and_sends_the_late_reply(tmp_path, monkeypatch) -> None:
    with Store(tmp_path / "hub.db") as store:
        _, second = late_reply_scope(store)
        update_chat_settings(store, SCOPE, language="Spanish", now=1_000.0)
        model = ScriptedModel(default="Santiago.")
        hub, queued = hub_on(store, model), store.get(SCOPE, second)
        reads = reads_before_routing(store, monkeypatch)
        reply = asyncio.run(hub.answer_queued(queued))
        assert reads == ["query_batch"], reads
        assert reply is not None and reply.text == "Santiago."
        sent = "\n".join(sent_texts(model))
        # The window read ahead is the one recent() reads: A, A's reply stored after B, then B.
        assert sent.index("capital of Peru?") < sent.index("Lima is the capital of Peru.") < sent.index("and of Chile?")
        # The chat's settings read in the batch reach the call: its language.
        assert "always answer in Spanish" in sent
        assert [m.text for m in store.window(SCOPE, 10)][-1] == "Santiago."


def test_an_answered_message_is_not_answered_again_from_the_batch(tmp_path) -> None:
    with Store(tmp_path / "hub.db") as store:
        first, _ = late_reply_scope(store)
        model = ScriptedModel(default="again?")
        assert asyncio.run(hub_on(store, model).answer_queued(store.get(SCOPE, first))) is None
        assert model.calls == []


def test_a_failing_batch_falls_back_to_the_reads_one_by_one_and_the_settings_to_the_defaults(tmp_path, caplog) -> None:
    with Store(tmp_path / "hub.db") as store:
        _, second = late_reply_scope(store)
        store.conn.execute("DROP TABLE chat_settings")  # a failing table: the batch fails with it
        model = ScriptedModel(default="Santiago.")
        with caplog.at_level(logging.ERROR):
            reply = asyncio.run(hub_on(store, model).answer_queued(store.get(SCOPE, second)))
        assert reply is not None and reply.text == "Santiago."
        sent = "\n".join(sent_texts(model))
        assert sent.index("Lima is the capital of Peru.") < sent.index("and of Chile?")
        assert "answering with the defaults" in caplog.text


def test_start_up_heap_is_frozen_once_per_process_by_the_warm_up(tmp_path) -> None:
    """What start-up built is out of the collector's reach after the warm-up, once."""
    code = (
        "import gc\n"
        "from scopehub.hub.models.testing import ScriptedModel\n"
        "from scopehub.hub.orchestrator import Deps, Hub\n"
        "from scopehub.hub.settings import load_settings\n"
        "from scopehub.memory import Store\n"
        "from tests.helpers import registry_of\n"
        "from scopehub.hub.orchestrator._hub import freeze_start_up_heap\n"
        "store = Store(':memory:')\n"
        "hub = Hub(Deps(store=store, settings=load_settings(db=':memory:'), model=ScriptedModel(default='hi')), registry_of())\n"
        "before = gc.get_freeze_count()\n"
        "hub.warm_up()\n"
        "frozen = gc.get_freeze_count()\n"
        "print(before, frozen > 10_000, freeze_start_up_heap(), gc.get_freeze_count() == frozen)\n"
    )
    done = subprocess.run(checkout_python(code), capture_output=True, text=True, timeout=120, cwd=ROOT, env=checkout_env(tmp_path, os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True", "False", "True"]

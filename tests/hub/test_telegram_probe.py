"""The defects the real-client probe found, each fixed at its mechanism, through PTB's real client."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.transports.telegram import NOT_ADMIN_FOR, RetryPolicy
from scopehub.memory import NewFact, Store, add_fact, current_facts
from tests.fakes.bot_api import FakeBotAPI
from tests.hub.telegram_helpers import bot_run, echo, make_hub, rows
from tests.hub.test_telegram_webhook import post, webhook_worker


def test_a_queued_message_sees_the_reply_to_the_message_before_it(tmp_path: Path) -> None:
    """B arrives while A is answered: A's reply is stored after B, and B's call still has it."""
    b_stored = threading.Event()
    seen: list[list[dict[str, Any]]] = []

    async def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        seen.append(messages)
        if len(seen) == 1:
            await asyncio.to_thread(b_stored.wait, 10)  # A's answer takes until B is in
            return "Your shopping list: milk, eggs."
        return "ok"

    hub = make_hub(tmp_path / "hub.db", FunctionModel(model))

    async def main() -> None:
        with FakeBotAPI() as tg:
            async with webhook_worker(hub, tg) as (_, url):
                secret = tg.webhook_secret
                assert await post(url, tg.make_update(42, "what's on my shopping list?"), secret) == 200
                await asyncio.sleep(0.3)
                assert await post(url, tg.make_update(42, "and add bread to the list"), secret) == 200
                b_stored.set()
                await tg.await_sent(2, chat_id=42)

    try:
        asyncio.run(main())
    finally:
        hub.store.close()
    stored = rows(tmp_path / "hub.db", "user:42")
    assert [r[0] for r in stored] == ["user", "user", "agent", "agent"]  # A, B, A's reply, B's reply: by id
    second = seen[1]
    history = [(m["role"], m["content"]) for m in second if m["role"] in ("user", "assistant")]
    assert ("assistant", "Your shopping list: milk, eggs.") in history
    # In turn order: A, A's reply, then B (the message being answered).
    assert [role for role, _ in history[-3:]] == ["user", "assistant", "user"]
    assert history[-1][1].endswith("and add bread to the list")


def test_an_empty_or_zero_width_message_costs_no_model_call_and_is_not_stored(tmp_path: Path) -> None:
    model = FunctionModel(echo)

    async def scenario(hub, tg, bot) -> None:
        for invisible in ("\u200b\u200b", "\u2060", " \ufeff ", "\u3164"):
            tg.push_message(42, invisible)
        tg.push_message(42, "hello")
        (sent,) = await tg.await_sent(1, chat_id=42)
        assert sent["text"].endswith("ok: hello")

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", model))
    assert len(model.calls) == 1
    assert [r[1] for r in rows(tmp_path / "hub.db", "user:42")] == ["hello", "ok: hello"]


def test_a_long_retry_after_is_honoured_exactly_not_after_the_claim_runs_out(tmp_path: Path) -> None:
    """Telegram asks for longer than the bot waits in place: the stored reply goes out when asked, once."""
    policy = RetryPolicy(attempts=3, backoff=0.05, max_backoff=0.2, max_wait=0.5)

    async def scenario(hub, tg, bot) -> None:
        tg.fail_next("sendMessage", 429, retry_after=2)
        tg.push_message(42, "add buy milk to my tasks")
        (sent,) = await tg.await_sent(1, chat_id=42, timeout=15)  # the claim TTL is 120 s
        assert sent["text"].startswith("[tasks]")
        sends = [e for e in tg.log if e["method"] == "sendMessage"]
        limited, delivered = sends[0], sends[-1]
        assert limited["status"] == 429 and delivered["status"] == 200
        assert delivered["at"] - limited["at"] >= 2.0  # not before Telegram allowed it
        await asyncio.sleep(0.5)
        assert len(tg.sent(42)) == 1  # and only once

    bot_run(tmp_path, scenario, retry=policy)
    stored = rows(tmp_path / "hub.db", "user:42")
    assert stored[1][0] == "agent" and stored[1][3] == "42:2"  # the reply is recorded with its Telegram id


def test_every_destructive_group_command_needs_an_administrator(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    group = -100
    hub = make_hub(db)
    door = add_fact(hub.store, f"group:{group}", NewFact(text="the door code is 1234"), now=1.0)

    async def scenario(hub, tg, bot) -> None:
        tg.set_member(group, 8, "administrator")
        tg.push_message(group, f"/forget {door.id}", user_id=7)  # a member
        (refused,) = await tg.await_sent(1, chat_id=group)
        assert refused["text"] == NOT_ADMIN_FOR.format(what="erase what I keep about this group")
        tg.push_message(group, "/forget@hub_test_bot door code", user_id=7)
        await tg.await_sent(2, chat_id=group)
        assert [f.text for f in current_facts(hub.store, f"group:{group}")] == ["the door code is 1234"]
        tg.push_message(group, "/forget", user_id=7)  # no argument: only the usage, for anyone
        usage = await tg.await_sent(3, chat_id=group)
        assert usage[2]["text"].startswith("Usage: /forget")
        tg.push_message(group, f"/forget {door.id}", user_id=8)  # an administrator
        done = await tg.await_sent(4, chat_id=group)
        assert done[3]["text"].startswith("Forgotten:")

    bot_run(tmp_path, scenario, hub=hub)
    with Store(db) as store:
        assert current_facts(store, f"group:{group}") == []
        # The refused commands were not even stored: nothing of them reached the hub.
        assert [m.text for m in store.messages(f"group:{group}")] == ["/forget", f"/forget {door.id}"]

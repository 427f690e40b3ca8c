"""Updates python-telegram-bot cannot read: skipped and kept, never a stop for the other chats."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from telegram import Update

from scopehub.memory import Store, rejected_updates
from tests.fakes.bot_api import FakeBotAPI
from tests.hub.telegram_helpers import bot_run, make_hub
from tests.hub.test_telegram_webhook import post, webhook_worker


def poll_without_persistent_id(tg: FakeBotAPI, chat_id: int, user_id: int | None = None) -> dict[str, Any]:
    """A poll as a self-hosted Bot API server older than 9.6 sends it: PTB 22.8 raises TypeError on it."""
    update = tg.make_update(chat_id, None, user_id=user_id)
    update["message"]["poll"] = {
        "id": "poll-1",
        "question": "lunch?",
        "options": [{"text": "pizza", "voter_count": 0}, {"text": "salad", "voter_count": 0}],
        "total_voter_count": 0,
        "is_closed": False,
        "is_anonymous": True,
        "type": "regular",
        "allows_multiple_answers": False,
    }
    return update


def test_a_poison_update_is_kept_and_skipped_and_polling_goes_on(tmp_path: Path) -> None:
    async def scenario(hub, tg, bot) -> None:
        tg.push_update(poll_without_persistent_id(tg, 42))
        tg.push_message(42, "add buy milk to my tasks")
        tg.push_update(poll_without_persistent_id(tg, 77))  # a stranger's: only the reason is kept
        tg.push_message(43, "hello")
        (sent,) = await tg.await_sent(1, chat_id=42)
        assert sent["text"].startswith("[tasks]")
        await tg.await_sent(1, chat_id=43)
        await asyncio.to_thread(tg.wait_updates_consumed)
        await asyncio.sleep(0.5)
        assert len(tg.calls("getUpdates")) < 20  # no hot loop of getUpdates on the same batch

    hub = make_hub(tmp_path / "hub.db", allowed_users="42,43")
    bot_run(tmp_path, scenario, hub=hub)
    with Store(tmp_path / "hub.db") as store:
        kept = {r.update_id: r for r in rejected_updates(store)}
    assert len(kept) == 2
    mine, stranger = sorted(kept.values(), key=lambda r: r.id)
    assert mine.scope == "user:42" and "persistent_id" in mine.reason
    assert json.loads(mine.body)["message"]["poll"]["question"] == "lunch?"
    assert stranger.scope is None and stranger.body == "" and "persistent_id" in stranger.reason


def test_a_poison_update_posted_to_the_webhook_is_kept_and_answered_200(tmp_path: Path) -> None:
    hub = make_hub(tmp_path / "hub.db")

    async def main() -> None:
        with FakeBotAPI() as tg:
            async with webhook_worker(hub, tg) as (_, url):
                secret = tg.webhook_secret
                assert await post(url, poll_without_persistent_id(tg, 42), secret) == 200
                assert await post(url, {"no": "update id"}, secret) == 400
                assert await post(url, tg.make_update(42, "add buy milk to my tasks"), secret) == 200
                await tg.await_sent(1, chat_id=42)

    try:
        asyncio.run(main())
    finally:
        hub.store.close()
    with Store(tmp_path / "hub.db") as store:
        (kept,) = rejected_updates(store)
    assert kept.scope == "user:42" and "persistent_id" in kept.reason


def test_the_webhook_reads_a_readable_update_once(tmp_path: Path, monkeypatch) -> None:
    # The guard's check that PTB can read an update is the reading itself, not a second parse.
    reads: list[int] = []
    original = Update.de_json.__func__

    def counting(cls: Any, data: Any, bot: Any = None) -> Any:
        if isinstance(data, dict) and "update_id" in data:
            reads.append(data["update_id"])
        return original(cls, data, bot)

    monkeypatch.setattr(Update, "de_json", classmethod(counting))
    hub = make_hub(tmp_path / "hub.db")

    async def main() -> None:
        with FakeBotAPI() as tg:
            async with webhook_worker(hub, tg) as (_, url):
                update = tg.make_update(42, "add buy milk to my tasks")
                assert await post(url, update, tg.webhook_secret) == 200
                (sent,) = await tg.await_sent(1, chat_id=42)
                assert sent["text"].startswith("[tasks]")
                assert reads.count(update["update_id"]) == 1

    try:
        asyncio.run(main())
    finally:
        hub.store.close()

"""The webhook worker (hub/transports/telegram/webhook.py) through python-telegram-bot's real
client: a forged update is refused in every configuration, and the update Telegram sends is kept."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from scopehub.hub import Hub
from scopehub.hub.transports.telegram import (
    ALLOWED_UPDATES,
    BOT_DATA_KEY,
    TelegramBot,
    build_application,
)
from scopehub.hub.transports.telegram.webhook import WEBHOOK_SECRET_NAME, serve_webhook
from scopehub.memory import Store
from tests.fakes.bot_api import FakeBotAPI
from tests.hub.telegram_helpers import FAST, make_hub, rows


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@asynccontextmanager
async def webhook_worker(
    hub: Hub, tg: FakeBotAPI, *, secret: str | None = None, register: bool = True
) -> AsyncIterator[tuple[TelegramBot, str]]:
    """One worker as ``agents-hub telegram --webhook-url`` runs it; yields it and its URL once it answers /healthz."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"
    app = build_application(hub, hub.settings, base_url=tg.base_url, retry=FAST)
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve_webhook(
            app,
            listen="127.0.0.1",
            port=port,
            url_path="hook",
            webhook_url=url if register else None,
            secret_token=secret,
            allowed_updates=list(ALLOWED_UPDATES),
            stop=stop,
        )
    )
    try:
        async with httpx.AsyncClient() as client:
            for _ in range(200):
                if task.done():
                    task.result()  # raises what stopped it
                try:
                    if (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.05)
        yield app.bot_data[BOT_DATA_KEY], url
    finally:
        stop.set()
        await task
        await hub.drain()


async def post(url: str, update: dict[str, Any], secret: str | None) -> int:
    headers = {"X-Telegram-Bot-Api-Secret-Token": secret} if secret is not None else {}
    async with httpx.AsyncClient() as client:
        return (await client.post(url, json=update, headers=headers)).status_code


@pytest.mark.parametrize("configured", [None, "chosen-by-the-operator_1"])
def test_a_forged_update_is_refused_and_telegrams_own_is_answered(tmp_path: Path, configured: str | None) -> None:
    """Without a configured secret the worker makes one; either way a request without it is refused."""
    hub = make_hub(tmp_path / "hub.db", allowed_users="42")

    async def main() -> None:
        with FakeBotAPI() as tg:
            async with webhook_worker(hub, tg, secret=configured) as (_, url):
                registered = tg.webhook_secret
                assert tg.webhook_url == url
                assert registered is not None and len(registered) >= 32 if configured is None else registered == configured
                # A forged update claiming to come from an allowed user: no header, a wrong one, an empty one.
                forged = tg.make_update(42, "add buy milk to my tasks")
                for header in (None, "wrong", "", registered + "x"):
                    assert await post(url, forged, header) == 403
                assert await asyncio.to_thread(tg.post_to_webhook, tg.make_update(42, "forged again"), secret=None) == 403
                await asyncio.sleep(0.3)
                assert tg.sent() == []  # nothing answered
                assert rows(tmp_path / "hub.db", "user:42") == []  # nothing stored
                # What Telegram sends, with the secret it was given, is stored and answered.
                assert await asyncio.to_thread(tg.post_to_webhook, tg.make_update(42, "add buy milk to my tasks")) == 200
                (sent,) = await tg.await_sent(1, chat_id=42)
                assert sent["text"].startswith("[tasks]")

    try:
        asyncio.run(main())
    finally:
        hub.store.close()
    with Store(tmp_path / "hub.db") as store:
        kept = store.query("SELECT value FROM deployment_secrets WHERE name = ?", (WEBHOOK_SECRET_NAME,))
    assert (kept != []) is (configured is None)  # a configured secret is never written to the database


def test_every_worker_of_a_deployment_checks_the_secret_the_first_one_made(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    first_hub, second_hub = make_hub(db), make_hub(db)

    async def main() -> None:
        with FakeBotAPI() as tg:
            async with webhook_worker(first_hub, tg) as (_, first_url):
                made = tg.webhook_secret
                # The second worker registers nothing (--no-set-webhook) yet checks the same secret.
                async with webhook_worker(second_hub, tg, register=False) as (_, second_url):
                    assert tg.webhook_secret == made and tg.webhook_url == first_url
                    assert await post(second_url, tg.make_update(7, "hello"), None) == 403
                    assert await post(second_url, tg.make_update(7, "hello there"), made) == 200
                    assert await post(first_url, tg.make_update(8, "hi"), made) == 200
                    await tg.await_sent(1, chat_id=7)
                    await tg.await_sent(1, chat_id=8)
            # A restarted worker registers the same secret again.
            async with webhook_worker(first_hub, tg) as _:
                assert tg.webhook_secret == made

    try:
        asyncio.run(main())
    finally:
        first_hub.store.close()
        second_hub.store.close()

"""Builders the Telegram tests share: a hub on a scripted model and the bot running against the loopback fake Bot API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from scopehub.agents import AgentRegistry, AgentSpec
from scopehub.hub import Deps, Hub, load_settings
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.transports.telegram import (
    BOT_DATA_KEY,
    RetryPolicy,
    TelegramBot,
    build_application,
)
from scopehub.memory import Store
from tests.fakes.bot_api import FakeBotAPI
from tests.helpers import registry_of

TOKEN = "123456:test-token"


FAST = RetryPolicy(attempts=3, backoff=0.05, max_backoff=0.2)


NOTES = AgentSpec(
    name="notes",
    description="notes: keep and find notes",
    instructions="Keep notes.",
    examples=("note that the wifi password is hunter2", "find my note about the wifi"),
    keywords=("note", "notes"),
)


def registry() -> AgentRegistry:
    return registry_of(NOTES)


def echo(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """The model answers with what it was asked."""
    return "ok: " + messages[-1]["content"]


def make_hub(db: Path, model: Any = None, **settings: Any) -> Hub:
    config = load_settings(db=db, telegram_bot_token=TOKEN, **settings)
    return Hub(Deps(store=Store(db), settings=config, model=model or FunctionModel(echo)), registry())


@asynccontextmanager
async def running(hub: Hub, tg: FakeBotAPI, **options: Any) -> AsyncIterator[TelegramBot]:
    """What ``run_polling`` does, without blocking: init, post_init, poll, start ... and back."""
    options.setdefault("retry", FAST)
    app = build_application(hub, hub.settings, base_url=tg.base_url, **options)
    await app.initialize()
    assert app.post_init is not None and app.post_stop is not None
    await app.post_init(app)

    def error_callback(exc: Exception) -> None:  # what run_polling passes: polling errors go to the error handler
        app.create_task(app.process_error(error=exc, update=None))

    await app.updater.start_polling(poll_interval=0.0, timeout=1, error_callback=error_callback)
    await app.start()
    try:
        yield app.bot_data[BOT_DATA_KEY]
    finally:
        await app.updater.stop()
        await app.stop()
        await app.post_stop(app)
        await app.shutdown()
        await hub.drain()


def bot_run(
    tmp_path: Path,
    scenario: Callable[[Hub, FakeBotAPI, TelegramBot], Any],
    hub: Hub | None = None,
    *,
    fake: dict[str, Any] | None = None,
    **options: Any,
) -> Hub:
    """Run ``scenario`` against a bot polling a fresh fake Bot API (``fake``: its options); ``options`` go to the bot."""
    hub = hub or make_hub(tmp_path / "hub.db")

    async def main() -> None:
        with FakeBotAPI(**(fake or {})) as tg:
            async with running(hub, tg, **options) as bot:
                await scenario(hub, tg, bot)

    try:
        asyncio.run(main())
    finally:
        hub.store.close()
    return hub


def rows(db: Path, scope: str) -> list[tuple[Any, ...]]:
    with Store(db) as store:
        return store.query("SELECT role, text, agent, ext_id FROM messages WHERE scope = ? ORDER BY id", (scope,))

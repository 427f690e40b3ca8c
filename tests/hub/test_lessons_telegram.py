"""A 👎 on a reply in Telegram teaches the agent that wrote it: python-telegram-bot's own
client against the loopback fake Bot API, polling with the hub's ALLOWED_UPDATES.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from scopehub.hub import Deps, Hub, load_settings
from scopehub.hub.lessons import LESSON_PROMPT
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.transports.telegram import (
    ALLOWED_UPDATES,
    BOT_DATA_KEY,
    RetryPolicy,
    TelegramBot,
    build_application,
)
from scopehub.memory import Store, lessons_of
from tests.fakes.bot_api import FakeBotAPI
from tests.helpers import registry_of

TOKEN = "123456:test-token"
LESSON = "When the person asks for their list, show the work tasks, not the shopping list."


def _system(messages):
    """Every system message of a call: the stable part, then facts, lessons, awareness..."""
    return "\n\n".join(m["content"] for m in messages if m["role"] == "system")


def is_lesson_call(messages: list[dict[str, Any]]) -> bool:
    return _system(messages) == LESSON_PROMPT


def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """The agents always show the shopping list (the mistake); the lesson model learns from the 👎."""
    if is_lesson_call(messages):
        return json.dumps({"lesson": LESSON, "kind": "failure", "importance": "high", "topic": "task lists"})
    return "Shopping list: milk, eggs."


def agent_calls(model: FunctionModel, agent: str) -> list[list[dict[str, Any]]]:
    """The messages of every call ``agent`` was sent (lesson-model calls left out)."""
    return [c.messages for c in model.calls if _system(c.messages).startswith(f"You are the {agent} agent.")]


@asynccontextmanager
async def running(hub: Hub, tg: FakeBotAPI) -> AsyncIterator[TelegramBot]:
    """What ``agents-hub telegram`` does, without blocking, asking Telegram for ALLOWED_UPDATES."""
    app = build_application(hub, hub.settings, base_url=tg.base_url, retry=RetryPolicy(attempts=3, backoff=0.05, max_backoff=0.2))
    await app.initialize()
    assert app.post_init is not None and app.post_stop is not None
    await app.post_init(app)
    await app.updater.start_polling(poll_interval=0.0, timeout=1, allowed_updates=list(ALLOWED_UPDATES))
    await app.start()
    try:
        yield app.bot_data[BOT_DATA_KEY]
    finally:
        await app.updater.stop()
        await app.stop()
        await app.post_stop(app)
        await app.shutdown()
        await hub.drain()


async def until(check, timeout: float = 5.0) -> Any:
    """Poll ``check()`` until it is truthy (background learning runs on the bot's loop)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_a_thumbs_down_on_a_reply_becomes_a_lesson_in_that_agents_next_call_and_no_other(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    model = FunctionModel(answer)
    hub = Hub(Deps(store=Store(db), settings=load_settings(db=db, telegram_bot_token=TOKEN), model=model), registry_of())

    async def main() -> None:
        with FakeBotAPI() as tg:
            async with running(hub, tg):
                tg.push_message(42, "what is on my todo list")
                (first,) = await tg.await_sent(1, chat_id=42)
                assert first["text"] == "[tasks]\nShopping list: milk, eggs."
                tg.push_reaction(42, first["message_id"], "👎")
                lessons = await until(lambda: lessons_of(hub.store, "user:42", "tasks"))
                assert tg.allowed_updates is not None and "message_reaction" in tg.allowed_updates
                # A reaction never produces a reply in the chat.
                await asyncio.sleep(0.2)
                assert len(tg.sent(42)) == 1
                assert [(x.kind, x.importance, x.text, x.source) for x in lessons] == [("failure", "high", LESSON, "feedback")]
                # The lesson model was shown the exchange and the 👎.
                (lesson_call,) = [c for c in model.calls if is_lesson_call(c.messages)]
                prompt = lesson_call.messages[1]["content"]
                assert "what is on my todo list" in prompt and "Shopping list" in prompt and "👎" in prompt
                assert lesson_call.json_mode

                tg.push_message(42, "what is on my todo list")
                tg.push_message(42, "/general tell me a joke")
                await tg.await_sent(3, chat_id=42)

    try:
        asyncio.run(main())
    finally:
        hub.store.close()
    tasks_calls, general_calls = agent_calls(model, "tasks"), agent_calls(model, "general")
    assert len(tasks_calls) == 2 and len(general_calls) == 1
    assert LESSON not in _system(tasks_calls[0])  # before the 👎
    assert LESSON in _system(tasks_calls[1])  # the very next call of the agent that answered
    assert all(LESSON not in m["content"] for m in general_calls[0])  # no other agent is sent it
    with Store(db) as store:
        calls = store.calls("user:42")
        assert [c["agent"] for c in calls] == ["tasks", "tasks", "general"]


def test_a_reaction_on_the_persons_own_message_or_an_unknown_emoji_teaches_nothing(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    model = FunctionModel(answer)
    hub = Hub(Deps(store=Store(db), settings=load_settings(db=db, telegram_bot_token=TOKEN), model=model), registry_of())

    async def main() -> None:
        with FakeBotAPI() as tg:
            async with running(hub, tg):
                question = tg.push_message(42, "what is on my todo list")
                (first,) = await tg.await_sent(1, chat_id=42)
                tg.push_reaction(42, question["message"]["message_id"], "👎")  # the person's own message
                tg.push_reaction(42, first["message_id"], "🤔")  # says nothing sure
                tg.push_reaction(42, first["message_id"], "👍", old=["🤔"])
                await until(lambda: lessons_of(hub.store, "user:42", "tasks"))
                await asyncio.sleep(0.2)
                assert len(tg.sent(42)) == 1

    try:
        asyncio.run(main())
    finally:
        hub.store.close()
    with Store(db) as store:
        rows = store.query("SELECT source, signal, text FROM feedback WHERE scope = 'user:42'")
    assert rows == [("reaction", "positive", "👍")]
    assert sum(is_lesson_call(c.messages) for c in model.calls) == 1


def test_feedback_in_telegram_and_a_reaction_in_a_group_teach_the_agent_of_that_chat(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    model = FunctionModel(answer)
    hub = Hub(Deps(store=Store(db), settings=load_settings(db=db, telegram_bot_token=TOKEN), model=model), registry_of())

    async def main() -> None:
        with FakeBotAPI() as tg:
            async with running(hub, tg):
                tg.push_message(42, "what is on my todo list")
                await tg.await_sent(1, chat_id=42)
                tg.push_message(42, "/feedback no, I meant the work list")
                ack = await tg.await_sent(2, chat_id=42)
                assert "the tasks agent will learn from it" in ack[1]["text"]
                await until(lambda: lessons_of(hub.store, "user:42", "tasks"))
                group = -100
                tg.push_message(group, "@hub_test_bot what is on my todo list", user_id=7)
                (reply,) = await tg.await_sent(1, chat_id=group)
                tg.push_reaction(group, reply["message_id"], "👍", user_id=8)
                await until(lambda: lessons_of(hub.store, f"group:{group}", "tasks"))
                await asyncio.sleep(0.2)
                assert len(tg.sent(group)) == 1

    try:
        asyncio.run(main())
    finally:
        hub.store.close()
    with Store(db) as store:
        private = store.query("SELECT source, signal, text FROM feedback WHERE scope = 'user:42'")
        grouped = store.query("SELECT source, signal, text FROM feedback WHERE scope = 'group:-100'")
    assert private == [("command", "negative", "no, I meant the work list")]
    assert grouped == [("reaction", "positive", "👍")]

"""The Telegram transport end to end: python-telegram-bot's own HTTP client against the
loopback fake Bot API (tests/fakes/bot_api/), the hub on a scripted model, a Store in tmp_path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from scopehub.agents import AgentRegistry, AgentSpec
from scopehub.hub import Deps, Hub, load_settings
from scopehub.hub.errors import ConfigError, ModelUnavailable
from scopehub.hub.models.testing import FunctionModel, ScriptedModel
from scopehub.hub.orchestrator import MODEL_DOWN_REPLY
from scopehub.hub.transports.telegram import (
    APOLOGY_SAVED,
    BOT_DATA_KEY,
    REFUSAL,
    REMINDER_PREFIX,
    TELEGRAM_LIMIT,
    RetryPolicy,
    TelegramBot,
    build_application,
    is_allowed,
    scope_for,
    split_message,
)
from scopehub.memory import Store, add_reminder, get_reminder
from tests.fakes.bot_api import FakeBotAPI, utf16_len
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


# -- private chats, groups, commands ----------------------------------------------------------


def test_private_message_gets_reply_from_the_right_agent_shown_first(tmp_path):
    async def thinking(messages, tools):
        await asyncio.sleep(0.25)  # long enough to renew the typing action
        return echo(messages, tools)

    async def scenario(hub, tg, bot):
        tg.push_message(42, "add buy milk to my tasks")
        (sent,) = await tg.await_sent(1, chat_id=42)
        assert sent["text"] == "[tasks]\nok: add buy milk to my tasks"
        assert sent["parse_mode"] is None  # plain text: no formatting error can lose it
        typing = tg.calls("sendChatAction")
        assert len(typing) >= 2 and typing[0]["action"] == "typing"  # renewed while working
        # A reply to the bot's message routes back to the agent that wrote it.
        tg.push_message(42, "and eggs", reply_to_message=sent["message_id"])
        await tg.await_sent(2, chat_id=42)

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", FunctionModel(thinking)), typing_interval=0.1)
    stored = rows(tmp_path / "hub.db", "user:42")
    assert [(r[0], r[2]) for r in stored] == [("user", "tasks"), ("agent", "tasks"), ("user", "tasks"), ("agent", "tasks")]
    assert stored[0][3] == "42:1" and stored[1][3] == "42:2"  # Telegram ids: the user's, then the bot's reply
    with Store(tmp_path / "hub.db") as store:
        follow_up = store.find_ext("user:42", "42:3")
        assert follow_up.via == "reply" and follow_up.reply_to == store.find_ext("user:42", "42:2").id


def test_group_answers_only_mentions_replies_and_commands_but_stores_everything(tmp_path):
    model = FunctionModel(echo)

    async def scenario(hub, tg, bot):
        group = -100
        tg.push_message(group, "we should add milk to the tasks", user_id=7, first_name="Ann")
        tg.push_message(group, "@hub_test_bot add milk to my tasks", user_id=7, first_name="Ann")
        (first,) = await tg.await_sent(1, chat_id=group)
        assert first["text"] == "[tasks]\nok: Ann: add milk to my tasks"  # the mention is stripped; who asks is said
        assert first["reply_to"] == 2  # in a group the answer quotes its question
        tg.push_message(group, "and eggs please", user_id=8, reply_to_message=first["message_id"])
        tg.push_message(group, "/help@other_bot", user_id=8)  # another bot's command: not ours
        tg.push_message(group, "/agents", user_id=8)
        sent = await tg.await_sent(3, chat_id=group)
        assert sent[1]["text"].startswith("[tasks]\nok: Test: and eggs please")
        assert sent[2]["text"].startswith("Agents:\n/general")
        await asyncio.sleep(0.2)
        assert len(tg.sent(group)) == 3  # nothing for the chatter, nothing for /help@other_bot

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", model))
    stored = rows(tmp_path / "hub.db", "group:-100")
    texts = [r[1] for r in stored if r[0] == "user"]
    assert texts == ["we should add milk to the tasks", "add milk to my tasks", "and eggs please", "/agents"]
    assert len(model.calls) == 2  # the unaddressed chatter was stored but cost no model call
    # The group's chatter is in the context of the next answer, with who said it.
    assert any("Ann: we should add milk" in m["content"] for m in model.calls[0].messages)


def test_set_my_commands_lists_hub_commands_and_every_agent(tmp_path):
    async def scenario(hub, tg, bot):
        names = [c["command"] for c in tg.commands()]
        assert names[:3] == ["start", "help", "agents"]
        assert {"general", "tasks", "notes", "remember", "facts", "forget", "search", "usage"} <= set(names)
        assert all(c["description"] for c in tg.commands())
        tg.push_message(42, "/notes wifi password is hunter2")
        (sent,) = await tg.await_sent(1, chat_id=42)
        assert sent["text"] == "[notes]\nok: wifi password is hunter2"
        tg.push_message(42, "/nosuchcommand hello")  # unknown: said so, not sent to an agent
        sent = await tg.await_sent(2, chat_id=42)
        assert sent[1]["text"] == "unknown command /nosuchcommand; /help lists them"

    bot_run(tmp_path, scenario)


def test_long_reply_is_split_in_order_and_nothing_is_lost(tmp_path):
    paragraphs = [f"Paragraph {i}: " + " ".join(f"word{i}-{j}" for j in range(120)) for i in range(12)]
    answer = "\n\n".join(paragraphs)
    assert len(answer) > 10_000

    async def scenario(hub, tg, bot):
        tg.push_message(42, "tell me a long story")
        await tg.await_sent(3, chat_id=42)
        await asyncio.sleep(0.2)
        sent = tg.sent(42)
        assert all(utf16_len(m["text"]) <= TELEGRAM_LIMIT for m in sent)
        assert sent[0]["text"].startswith("[general]\nParagraph 0:")
        joined = "\n\n".join(m["text"] for m in sent).removeprefix("[general]\n")
        assert joined.split() == answer.split()
        # Cut at paragraph boundaries: every chunk ends a paragraph.
        assert all(m["text"].rstrip().split()[-1].endswith("-119") for m in sent)

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", ScriptedModel([answer])))


def test_split_message_prefers_paragraphs_then_lines_then_words_then_hard():
    assert split_message("short") == ["short"]
    assert split_message("aaaa\n\nbbbb", limit=8) == ["aaaa", "bbbb"]
    assert split_message("aaaa\nbbbb cc", limit=9) == ["aaaa", "bbbb cc"]
    assert split_message("aaaa bbbb cccc", limit=10) == ["aaaa bbbb", "cccc"]
    assert split_message("x" * 25, limit=10) == ["x" * 10, "x" * 10, "x" * 5]
    emoji = "😀" * 5  # two UTF-16 units each, as Telegram counts
    assert split_message(emoji, limit=4) == ["😀😀", "😀😀", "😀"]
    assert split_message("  \n ") == []


def test_a_redelivered_update_is_not_handled_twice(tmp_path):
    model = FunctionModel(echo)

    async def scenario(hub, tg, bot):
        update = tg.push_message(42, "add buy milk to my tasks")
        await tg.await_sent(1, chat_id=42)
        tg.push_update({"message": update["message"]})  # the same message again, a new update id
        tg.push_message(42, "/help")
        await tg.await_sent(2, chat_id=42)
        assert len(tg.sent(42)) == 2

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", model))
    assert len(model.calls) == 1


# -- reminders ------------------------------------------------------------------------------


def test_reminder_is_delivered_at_its_due_time_and_marked_sent(tmp_path):
    db = tmp_path / "hub.db"
    hub = make_hub(db)
    reminder = add_reminder(hub.store, "user:42", "call mom", time.time() + 1.0, chat="42")

    async def scenario(hub, tg, bot):
        assert (reminder.scope, reminder.id) in bot.reminders.scheduled()  # a job at the exact due time
        (sent,) = await tg.await_sent(1, chat_id=42, timeout=5)
        assert sent["text"] == REMINDER_PREFIX + "call mom"
        assert time.time() >= reminder.due

    bot_run(tmp_path, scenario, hub=hub)
    with Store(db) as store:
        after = get_reminder(store, reminder.scope, reminder.id)
    assert not after.active and after.last_sent is not None


def test_reminder_set_during_a_conversation_is_scheduled_at_once(tmp_path):
    def set_reminder(messages, tools):
        add_reminder(hub.store, "user:42", "stretch", time.time() + 0.5, chat="42")
        return "I'll remind you."

    hub = make_hub(tmp_path / "hub.db", FunctionModel(set_reminder))

    async def scenario(hub, tg, bot):
        tg.push_message(42, "remind me to stretch in a moment")
        sent = await tg.await_sent(2, chat_id=42, timeout=4)  # not after the 60 s sweep
        assert [m["text"] for m in sent] == ["[general]\nI'll remind you.", REMINDER_PREFIX + "stretch"]

    bot_run(tmp_path, scenario, hub=hub, reminder_interval=60.0)


def test_a_reply_telegram_could_not_take_is_sent_later_once_not_dropped(tmp_path):
    # Every attempt of the first delivery fails (Telegram unreachable): the reply is stored,
    # its message stays owed, and the sweep sends the stored reply once the mark runs out,
    # without asking the model again.
    model = FunctionModel(echo)
    hub = make_hub(tmp_path / "hub.db", model, claim_ttl=1.0)

    async def scenario(hub, tg, bot):
        tg.fail_next("sendMessage", 500, times=FAST.attempts)
        tg.push_message(42, "add buy milk to my tasks")
        sent = await tg.await_sent(1, chat_id=42, timeout=8)
        assert sent[0]["text"] == "[tasks]\nok: add buy milk to my tasks"
        await asyncio.sleep(1.5)  # a second sweep must not send it again
        assert len(tg.sent(42)) == 1

    bot_run(tmp_path, scenario, hub=hub)
    assert len(model.calls) == 1  # answered once, sent later
    agent_rows = [row for row in rows(tmp_path / "hub.db", "user:42") if row[0] == "agent"]
    assert len(agent_rows) == 1 and agent_rows[0][3] is not None  # the reply's Telegram id is recorded


def test_a_sent_reply_is_recorded_while_the_event_loop_is_busy(tmp_path):
    # Telegram has no idempotency key: a reply it took whose id is not recorded yet is sent
    # again by the next worker if this one dies right then. The id is recorded on the reply
    # sender's own thread as soon as Telegram answers, so a busy event loop (other chats'
    # store calls block it) does not hold the reply in that window.
    from scopehub.hub.orchestrator import Reply
    from scopehub.memory import NewMessage

    async def scenario(hub, tg, bot):
        store = hub.store
        asked = store.append(NewMessage(scope="user:42", role="user", text="what is on my list", chat="42", ext_id="42:500"))
        stored = store.append(NewMessage(scope="user:42", role="agent", text="milk, eggs", agent="tasks", reply_to=asked.id))
        reply = Reply(text=stored.text, agent="tasks", message_id=asked.id, reply_id=stored.id, scope="user:42")
        delivering = asyncio.create_task(bot.deliver(bot._bot, 42, reply, reply_to=None, thread_id=None, defer_unsent=True))
        await asyncio.sleep(0)  # the send is handed over; from here on this loop is blocked
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and store.get("user:42", stored.id).ext_id is None:
            time.sleep(0.01)  # blocking on purpose: the loop cannot run the delivery's own steps
        recorded = store.get("user:42", stored.id).ext_id
        assert tg.sent(42)[0]["text"] == "[tasks]\nmilk, eggs"
        assert recorded == f"42:{tg.sent(42)[0]['message_id']}"
        assert await delivering == [tg.sent(42)[0]["message_id"]]
        assert store.get("user:42", stored.id).ext_id == recorded  # recorded once, the same id

    bot_run(tmp_path, scenario)


def test_a_sent_reminder_is_marked_sent_while_the_event_loop_is_busy(tmp_path):
    # The same window for reminders: taken by Telegram but still due in the store, another
    # worker would send it again. Its delivery is recorded on the reply sender's thread.
    async def scenario(hub, tg, bot):
        store = hub.store
        reminder = add_reminder(store, "user:42", "call mom", time.time() - 1, chat="42")
        delivering = asyncio.create_task(bot.reminders.deliver(bot._bot, "user:42", reminder.id))
        await asyncio.sleep(0)  # the send is handed over; from here on this loop is blocked
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and get_reminder(store, "user:42", reminder.id).last_sent is None:
            time.sleep(0.01)  # blocking on purpose
        assert get_reminder(store, "user:42", reminder.id).last_sent is not None
        assert [sent["text"] for sent in tg.sent(42)] == [REMINDER_PREFIX + "call mom"]
        assert await delivering is True
        fired = store.query("SELECT count(*) FROM events WHERE scope = ? AND type = 'reminder.fired'", ("user:42",))
        assert fired == [(1,)]  # recorded once, not again by the turn

    bot_run(tmp_path, scenario)


def test_failed_reminder_delivery_is_retried_later(tmp_path):
    hub = make_hub(tmp_path / "hub.db")
    reminder = add_reminder(hub.store, "user:42", "water the plants", time.time() - 1, chat="42")

    async def scenario(hub, tg, bot):
        tg.fail_next("sendMessage", 500, times=3)  # every attempt of the first delivery fails
        sent = await tg.await_sent(1, chat_id=42, timeout=5)
        assert sent[0]["text"] == REMINDER_PREFIX + "water the plants"

    bot_run(tmp_path, scenario, hub=hub, reminder_interval=0.3)
    with Store(tmp_path / "hub.db") as store:
        assert not get_reminder(store, reminder.scope, reminder.id).active


def test_forget_all_erases_the_scope_and_cancels_its_reminders(tmp_path):
    db = tmp_path / "hub.db"
    hub = make_hub(db)
    mine = add_reminder(hub.store, "user:42", "secret errand", time.time() + 1.2, chat="42")
    other = add_reminder(hub.store, "user:43", "someone else's", time.time() + 1.2, chat="43")

    async def scenario(hub, tg, bot):
        tg.push_message(42, "add buy milk to my tasks")
        await tg.await_sent(1, chat_id=42)
        assert {(mine.scope, mine.id), (other.scope, other.id)} <= bot.reminders.scheduled()
        tg.push_message(42, "/forget all")
        tg.push_message(42, "/forget all")  # sent again: confirmed, as the button would
        sent = await tg.await_sent(3, chat_id=42)
        assert sent[2]["text"].startswith("Done: everything of this chat is erased")
        assert (mine.scope, mine.id) not in bot.reminders.scheduled() and (other.scope, other.id) in bot.reminders.scheduled()
        await tg.await_sent(1, chat_id=43, timeout=3)
        await asyncio.sleep(0.3)
        assert len(tg.sent(42)) == 3  # the erased reminder never fired

    bot_run(tmp_path, scenario, hub=hub)
    assert rows(db, "user:42") == []
    with Store(db) as store:
        assert get_reminder(store, mine.scope, mine.id) is None


def test_restart_keeps_memory_and_pending_reminders(tmp_path):
    db = tmp_path / "hub.db"
    model = FunctionModel(echo)

    async def main() -> None:
        with FakeBotAPI() as tg:  # the same Telegram on both sides of the restart
            first = make_hub(db)
            async with running(first, tg):
                tg.push_message(42, "my dog is called Rex")
                await tg.await_sent(1, chat_id=42)
            # Pending when the process stops (set once it stopped: no wall-clock race with its sweep).
            reminder = add_reminder(first.store, "user:42", "feed Rex", time.time() + 1.5, chat="42")
            first.store.close()
            assert len(tg.sent(42)) == 1

            second = make_hub(db, model)  # a new process: new Store on the same file, new Application
            try:
                async with running(second, tg) as bot:
                    assert (reminder.scope, reminder.id) in bot.reminders.scheduled()  # rescheduled from the store
                    tg.push_message(42, "what is my dog called?")
                    sent = await tg.await_sent(3, chat_id=42, timeout=5)
                    assert sent[-1]["text"] == REMINDER_PREFIX + "feed Rex"
            finally:
                second.store.close()

    asyncio.run(main())
    context = "\n".join(m["content"] for m in model.calls[0].messages)
    assert "my dog is called Rex" in context


# -- access -----------------------------------------------------------------------------------


def test_allowlist_refuses_once_and_stores_nothing_of_strangers(tmp_path):
    db = tmp_path / "hub.db"
    hub = make_hub(db, allowed_users="42", allowed_chats="-200")

    async def scenario(hub, tg, bot):
        tg.push_message(7, "hello?")
        tg.push_message(7, "anyone?")
        tg.push_message(-100, "@hub_test_bot let me in", user_id=7)  # a stranger's group
        tg.push_message(-100, "@hub_test_bot hi", user_id=42)  # an allowed user in that group
        tg.push_message(-200, "@hub_test_bot hi from an allowed group", user_id=7)
        tg.push_message(42, "hi")
        await tg.await_sent(1, chat_id=42)
        await tg.await_sent(1, chat_id=-200)
        await tg.await_sent(2, chat_id=-100)
        await asyncio.sleep(0.2)
        assert tg.texts(7) == [REFUSAL]  # one refusal, not one per message
        assert tg.texts(-100)[0] == REFUSAL and tg.texts(-100)[1].startswith("[general]")

    bot_run(tmp_path, scenario, hub=hub)
    with Store(db) as store:
        assert set(store.scopes()) == {"user:42", "group:-100", "group:-200"}
        assert [r[1] for r in rows(db, "group:-100") if r[0] == "user"] == ["hi"]


def test_access_rule_and_scopes():
    everyone = load_settings()
    assert is_allowed(everyone, 1, 1)
    listed = load_settings(allowed_users="1", allowed_chats="-5")
    assert is_allowed(listed, 1, -9) and is_allowed(listed, 2, -5) and not is_allowed(listed, 2, -9)
    assert scope_for("private", 42, 42) == "user:42"
    assert scope_for("group", -5, 42) == "group:-5" and scope_for("supergroup", -1005, 42) == "group:-1005"


# -- faults -------------------------------------------------------------------------------------


def test_retry_after_on_send_message_is_honoured_and_the_reply_arrives(tmp_path):
    async def scenario(hub, tg, bot):
        tg.fail_next("sendMessage", 429, retry_after=1)
        tg.push_message(42, "add buy milk to my tasks")
        started = time.monotonic()
        (sent,) = await tg.await_sent(1, chat_id=42, timeout=6)
        assert time.monotonic() - started >= 0.9  # waited as told
        assert sent["text"].startswith("[tasks]")
        assert len(tg.calls("sendMessage")) == 2

    bot_run(tmp_path, scenario)


def test_network_error_on_send_is_retried(tmp_path):
    async def scenario(hub, tg, bot):
        tg.drop_next("sendMessage")
        tg.push_message(42, "add buy milk to my tasks")
        (sent,) = await tg.await_sent(1, chat_id=42, timeout=6)
        assert sent["text"].startswith("[tasks]")

    bot_run(tmp_path, scenario)


def test_a_refused_message_gets_a_plain_fallback(tmp_path):
    async def scenario(hub, tg, bot):
        tg.bad_entities_next("sendMessage")
        tg.push_message(42, "add buy milk to my tasks")
        (sent,) = await tg.await_sent(1, chat_id=42)
        assert sent["text"] == "[tasks]\nok: add buy milk to my tasks"
        assert len(tg.calls("sendMessage")) == 2

    bot_run(tmp_path, scenario)


def test_model_down_gets_a_clear_reply_and_the_message_stays_stored(tmp_path):
    db = tmp_path / "hub.db"

    async def scenario(hub, tg, bot):
        tg.push_message(42, "add buy milk to my tasks")
        (sent,) = await tg.await_sent(1, chat_id=42)
        assert sent["text"] == MODEL_DOWN_REPLY

    bot_run(tmp_path, scenario, hub=make_hub(db, ScriptedModel([ModelUnavailable("provider down")])))
    assert [(r[0], r[1]) for r in rows(db, "user:42")] == [("user", "add buy milk to my tasks")]


def test_a_crash_is_logged_with_its_traceback_and_never_shown(tmp_path, caplog):
    def crash(messages, tools):
        raise RuntimeError("secret internals")

    db = tmp_path / "hub.db"

    async def scenario(hub, tg, bot):
        tg.push_message(42, "add buy milk to my tasks")
        (sent,) = await tg.await_sent(1, chat_id=42)
        assert sent["text"] == APOLOGY_SAVED

    with caplog.at_level(logging.ERROR, logger="scopehub.hub.transports.telegram"):
        bot_run(tmp_path, scenario, hub=make_hub(db, FunctionModel(crash)))
    assert "secret internals" in caplog.text and "Traceback" in caplog.text
    assert [r[1] for r in rows(db, "user:42")] == ["add buy milk to my tasks"]


# -- ordering -----------------------------------------------------------------------------------


def test_one_chat_in_order_while_two_chats_run_concurrently(tmp_path):
    order: list[str] = []

    async def slow_model(messages, tools):
        text = messages[-1]["content"]
        order.append("start " + text)
        # The first message of chat A is slow; B's must not wait for it, A's second must.
        await asyncio.sleep(0.8 if text == "a1" else 0.05)
        order.append("end " + text)
        return "done " + text

    async def scenario(hub, tg, bot):
        tg.push_message(1, "a1")
        tg.push_message(1, "a2")
        tg.push_message(1, "/help")
        tg.push_message(2, "b1")
        (b,) = await tg.await_sent(1, chat_id=2)
        assert tg.sent(1) == []  # chat B answered while chat A's first answer is still working
        sent = await tg.await_sent(3, chat_id=1)
        assert [m["text"].split("\n")[-1] for m in sent[:2]] == ["done a1", "done a2"]
        assert sent[2]["text"].startswith("I'm a team")
        assert b["text"].endswith("done b1")

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", FunctionModel(slow_model)))
    assert order.index("end a1") < order.index("start a2")  # one chat: strictly in order
    assert order.index("end b1") < order.index("end a1")  # two chats: concurrently


# -- webhook and CLI ----------------------------------------------------------------------------


def test_webhook_mode_receives_updates_and_checks_the_secret(tmp_path, unused_tcp_port):
    hub = make_hub(tmp_path / "hub.db")

    async def main() -> None:
        with FakeBotAPI() as tg:
            app = build_application(hub, hub.settings, base_url=tg.base_url, retry=FAST)
            async with app:
                await app.post_init(app)
                await app.updater.start_webhook(
                    listen="127.0.0.1",
                    port=unused_tcp_port,
                    url_path="tg",
                    webhook_url="https://bot.example.com/tg",
                    secret_token="s3cret",
                )
                await app.start()
                try:
                    assert tg.webhook_url == "https://bot.example.com/tg"
                    update = tg.make_update(42, "add buy milk to my tasks")
                    url = f"http://127.0.0.1:{unused_tcp_port}/tg"
                    async with httpx.AsyncClient() as client:
                        bad = await client.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "wrong"})
                        assert bad.status_code == 403
                        ok = await client.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "s3cret"})
                        assert ok.status_code == 200
                    (sent,) = await tg.await_sent(1, chat_id=42)
                    assert sent["text"].startswith("[tasks]")
                finally:
                    await app.updater.stop()
                    await app.stop()
                    await app.post_stop(app)

    try:
        asyncio.run(main())
    finally:
        hub.store.close()


@pytest.fixture
def unused_tcp_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_missing_token_is_a_clear_one_line_error(tmp_path, capsys):
    from scopehub.hub.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["telegram"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "TELEGRAM_BOT_TOKEN" in err and "\n" not in err
    hub = make_hub(tmp_path / "x.db")
    with pytest.raises(ConfigError):
        build_application(hub, load_settings())
    hub.store.close()

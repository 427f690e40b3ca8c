"""The Telegram transport end to end: python-telegram-bot's own HTTP client against the
loopback fake Bot API (tests/fakes/bot_api/), the hub on a scripted model, a Store in tmp_path."""

from __future__ import annotations

import asyncio
import logging
import traceback

import httpx
import pytest

from scopehub.hub import load_settings
from scopehub.hub.errors import ConfigError, ModelUnavailable
from scopehub.hub.models.testing import FunctionModel, ScriptedModel
from scopehub.hub.orchestrator import MODEL_DOWN_REPLY
from scopehub.hub.transports.telegram import (
    APOLOGY_SAVED,
    REFUSAL,
    TELEGRAM_LIMIT,
    build_application,
    delivery,
    is_allowed,
    scope_for,
    split_message,
)
from scopehub.memory import Store
from tests.fakes.bot_api import FakeBotAPI, utf16_len
from tests.helpers import StoreThreads
from tests.hub.telegram_helpers import FAST, bot_run, echo, make_hub, rows

# -- private chats, groups, commands ----------------------------------------------------------


def test_private_message_gets_reply_from_the_right_agent_shown_first(tmp_path):
    async def thinking(messages, tools):
        await asyncio.sleep(0.5)  # long enough to show the typing action (after 0.1 s) and renew it
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


def test_retry_after_on_send_message_is_honoured_and_the_reply_arrives(tmp_path, monkeypatch):
    # The retry loop's waits, with how many sendMessage calls the fake had seen as each
    # began and ended: the second attempt must come after a wait of what Telegram asked.
    waits: list[tuple[float, int, int]] = []
    tg_box: list[FakeBotAPI] = []

    async def recorded_sleep(delay: float, *args: object) -> None:
        before = len(tg_box[0].calls("sendMessage"))
        await asyncio.sleep(delay, *args)
        waits.append((delay, before, len(tg_box[0].calls("sendMessage"))))

    class RecordingAsyncio:
        sleep = staticmethod(recorded_sleep)

        def __getattr__(self, name: str) -> object:
            return getattr(asyncio, name)

    monkeypatch.setattr(delivery, "asyncio", RecordingAsyncio())

    async def scenario(hub, tg, bot):
        tg_box.append(tg)
        tg.fail_next("sendMessage", 429, retry_after=1)
        tg.push_message(42, "add buy milk to my tasks")
        (sent,) = await tg.await_sent(1, chat_id=42, timeout=6)
        assert waits == [(1.0, 1, 1)]  # waited as told, after the refused call and before the next
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


def test_a_plain_message_arrives_and_is_stored_in_one_store_step(tmp_path, monkeypatch):
    """On PostgreSQL every store step is a thread hop: a plain message's arrival (the
    redelivery check, paused reminders resumed) and its storing are one step; a reply to an
    earlier message still has its target traced in between, and a redelivery is still not
    stored or answered twice."""
    model = FunctionModel(echo)
    hub = make_hub(tmp_path / "hub.db", model)
    threads = StoreThreads(hub.store, monkeypatch)

    async def scenario(hub, tg, bot):
        async def talk():
            update = tg.push_message(42, "add buy milk to my tasks")
            (answer,) = await tg.await_sent(1, chat_id=42)
            tg.push_update({"message": update["message"]})  # the same message again
            tg.push_message(42, "make it oat milk", reply_to_message=answer["message_id"])
            await tg.await_sent(2, chat_id=42)
            await asyncio.sleep(0.2)

        await threads.watch(talk())

    bot_run(tmp_path, scenario, hub=hub)
    intake = [step for step in threads.steps if step in ("_arrive_and_store", "_arrived", "reply_target", "_store_owed")]
    assert intake == ["_arrive_and_store", "_arrive_and_store", "_arrived", "reply_target", "_store_owed"], threads.steps
    assert len(model.calls) == 2  # the redelivery was not answered again
    user_rows = [r for r in rows(tmp_path / "hub.db", "user:42") if r[0] == "user"]
    assert [r[1] for r in user_rows] == ["add buy milk to my tasks", "make it oat milk"]


def test_a_plain_message_is_looked_up_once_and_its_turn_reads_it_without_a_read_of_its_own(tmp_path, monkeypatch):
    """The delivery's id is looked up once on arrival (not again when it is stored), and
    the turn that answers it reads the message, its stored reply, its settings and its
    window in batches (one round trip each on PostgreSQL), with no ``get`` of its own."""
    model = FunctionModel(echo)
    hub = make_hub(tmp_path / "hub.db", model)
    lookups: list[str] = []
    turn_gets: list[str] = []
    watching = False
    find_ext, get = hub.store.find_ext, hub.store.get

    def looked_up(*args, **kwargs):
        if watching:
            lookups.append(args[1])
        return find_ext(*args, **kwargs)

    def got(*args, **kwargs):
        callers = {frame.name for frame in traceback.extract_stack()}
        if watching and callers & {"_owed_state", "_begin_queued", "_take_turn_and_look"}:
            turn_gets.append(" < ".join(sorted(callers & {"_owed_state", "_begin_queued", "_take_turn_and_look"})))
        return get(*args, **kwargs)

    monkeypatch.setattr(hub.store, "find_ext", looked_up)
    monkeypatch.setattr(hub.store, "get", got)

    async def scenario(hub, tg, bot):
        nonlocal watching
        watching = True
        tg.push_message(42, "add buy milk to my tasks")
        await tg.await_sent(1, chat_id=42)
        await asyncio.sleep(0.2)
        watching = False

    bot_run(tmp_path, scenario, hub=hub)
    assert len(lookups) == 1, lookups
    assert turn_gets == []
    assert len(model.calls) == 1
    assert [r[1] for r in rows(tmp_path / "hub.db", "user:42") if r[0] == "user"] == ["add buy milk to my tasks"]

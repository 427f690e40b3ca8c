"""The Telegram transport beyond plain text, through python-telegram-bot's own client and the
loopback fake Bot API: captions and media, text documents, edits, forwards, a group that
becomes a supergroup, chats that block the bot (403), a second poller (409), /forget all
in groups, mentions, start-up warm-up and the reply deadline.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from scopehub.hub import Deps, Hub, load_settings
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.orchestrator import MODEL_SLOW_REPLY
from scopehub.hub.transports.telegram import (
    CANT_READ,
    CONFIRM_FORGET_ALL,
    CONFIRM_FORGET_ALL_PRIVATE,
    DOCUMENT_UNREADABLE,
    NOT_ADMIN,
    REMINDER_PREFIX,
    strip_mention,
)
from scopehub.hub.transports.telegram.voice import NO_TRANSCRIBE_MODEL
from scopehub.memory import (
    NewFact,
    Store,
    add_fact,
    add_reminder,
    add_task,
    current_facts,
    get_reminder,
    list_tasks,
    list_vault_items,
)
from tests.fakes.bot_api import FakeBotAPI
from tests.hub.telegram_helpers import TOKEN, bot_run, echo, make_hub, registry, rows, running


async def settle(tg: FakeBotAPI, chat_id: int, count: int) -> list[dict[str, Any]]:
    """Send /help and wait for its answer: every earlier update of that chat is handled by then
    (updates of one chat are handled in order)."""
    tg.push_message(chat_id, "/help", user_id=chat_id if chat_id > 0 else 7)
    return await tg.await_sent(count, chat_id=chat_id)


# -- captions, media, documents ----------------------------------------------------------------


def test_a_caption_is_routed_and_answered_like_text_and_the_agent_is_told_what_it_cannot_open(tmp_path):
    async def scenario(hub, tg, bot):
        tg.push_media(42, "photo", caption="add to my tasks: pay this 20 EUR receipt")
        (sent,) = await tg.await_sent(1, chat_id=42)
        assert sent["text"] == "[tasks]\nok: [photo; you cannot open it] add to my tasks: pay this 20 EUR receipt"
        # In a group, a captioned photo that mentions the bot is addressed like text.
        tg.push_media(-100, "photo", caption="@hub_test_bot add the receipt to our tasks", user_id=7, first_name="Ann")
        (group,) = await tg.await_sent(1, chat_id=-100)
        assert group["text"] == "[tasks]\nok: Ann: [photo; you cannot open it] add the receipt to our tasks"
        # A PDF with a caption: its name, and that it cannot be opened; a kept text file says where it went.
        tg.push_media(42, "document", caption="what does this say?", file_name="report.pdf", mime_type="application/pdf")
        tg.push_media(42, "document", caption="keep this", file_name="code.txt", content=b"the code is 4411")
        sent = await tg.await_sent(4, chat_id=42)
        assert sent[1]["text"].endswith("ok: [document: report.pdf; you cannot open it] what does this say?")
        assert "ok: [document: code.txt; kept in this chat's notes] keep this" in [m["text"].split("\n", 1)[-1] for m in sent]
        # Editing the caption keeps what the message carries.
        tg.push_edit(42, 1, "add to my tasks: pay this 25 EUR receipt")
        for _ in range(100):
            if "25 EUR" in hub.store.find_ext("user:42", "42:1").text:
                break
            await asyncio.sleep(0.05)

    bot_run(tmp_path, scenario)
    stored = [(r[0], r[1], r[2]) for r in rows(tmp_path / "hub.db", "user:42")]
    assert stored[:2] == [
        ("user", "[photo; you cannot open it] add to my tasks: pay this 25 EUR receipt", "tasks"),
        ("agent", "ok: [photo; you cannot open it] add to my tasks: pay this 20 EUR receipt", "tasks"),
    ]


def test_media_without_a_caption_is_stored_as_a_marker_and_said_so(tmp_path):
    model = FunctionModel(echo)

    async def scenario(hub, tg, bot):
        tg.push_media(42, "photo")
        tg.push_media(42, "voice")
        tg.push_media(42, "sticker")
        sent = await tg.await_sent(3, chat_id=42)
        assert [m["text"] for m in sent] == [
            CANT_READ.format(what="photos"),
            NO_TRANSCRIBE_MODEL.format(what="voice notes"),  # HUB_TRANSCRIBE_MODEL is not set
            CANT_READ.format(what="stickers"),
        ]
        # Groups: everything is stored, but only what is addressed gets a word back.
        tg.push_message(-100, "@hub_test_bot hello", user_id=7)
        (hello,) = await tg.await_sent(1, chat_id=-100)
        tg.push_media(-100, "voice", user_id=8)  # chatter: kept, not answered
        tg.push_media(-100, "document", file_name="report.pdf", mime_type="application/pdf", user_id=8)
        tg.push_media(-100, "voice", user_id=8, reply_to_message=hello["message_id"])  # to the bot
        sent = await tg.await_sent(2, chat_id=-100)
        assert sent[1]["text"] == NO_TRANSCRIBE_MODEL.format(what="voice notes")
        assert sent[1]["reply_to"] is not None  # it answers the voice note it means
        await settle(tg, -100, 3)

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", model))
    assert [r[1] for r in rows(tmp_path / "hub.db", "user:42")] == ["[photo]", "[voice note]", "[sticker: 😀]"]
    group = [r[1] for r in rows(tmp_path / "hub.db", "group:-100") if r[0] == "user"]
    assert group[1:4] == ["[voice note]", "[document: report.pdf]", "[voice note]"]
    assert len(model.calls) == 1  # only "hello" went to an agent


def test_a_text_document_is_kept_in_the_vault_where_search_finds_it(tmp_path):
    db = tmp_path / "hub.db"

    async def scenario(hub, tg, bot):
        tg.push_media(42, "document", file_name="boiler.md", mime_type="text/markdown", content=b"# Boiler\nThe service code is 4411.\n")
        (saved,) = await tg.await_sent(1, chat_id=42)
        assert saved["text"] == "Saved boiler.md (35 characters) in this chat's memory: ask me about it, or /search it."
        assert tg.calls("download")  # fetched through getFile and the file route
        tg.push_message(42, "/search service code")
        found = await tg.await_sent(2, chat_id=42)
        assert "The service code is 4411" in found[1]["text"]
        # Not UTF-8, or over 1 MB: noted, not kept (and a big one is not even downloaded).
        tg.push_media(42, "document", file_name="latin1.txt", content="café".encode("latin-1"))
        tg.push_media(42, "document", file_name="huge.txt", content=b"x" * 1_000_001)
        sent = await tg.await_sent(4, chat_id=42)
        assert [m["text"] for m in sent[2:]] == [
            DOCUMENT_UNREADABLE.format(name="latin1.txt"),
            DOCUMENT_UNREADABLE.format(name="huge.txt"),
        ]
        assert len(tg.calls("getFile")) == 2

    bot_run(tmp_path, scenario)
    with Store(db) as store:
        (item,) = list_vault_items(store, "user:42")
        assert (item.kind, item.title, item.body) == ("document", "boiler.md", "# Boiler\nThe service code is 4411.\n")
        assert store.search("user:42", "4411")[0].kind == "vault"
    assert next(r[1] for r in rows(db, "user:42") if r[0] == "user") == "[document: boiler.md]"


# -- edits and forwards ---------------------------------------------------------------------------


def test_an_edit_updates_the_stored_text_and_search_and_gets_no_new_answer(tmp_path):
    db = tmp_path / "hub.db"
    model = FunctionModel(lambda messages, tools: "Noted.")

    async def scenario(hub, tg, bot):
        first = tg.push_message(42, "save a note: meet at the library")
        await tg.await_sent(1, chat_id=42)
        tg.push_edit(42, first["message"]["message_id"], "save a note: meet at the museum")
        await settle(tg, 42, 2)

    bot_run(tmp_path, scenario, hub=make_hub(db, model))
    assert len(model.calls) == 1  # the edit was not answered again
    with Store(db) as store:
        edited = store.find_ext("user:42", "42:1")
        assert (edited.text, edited.agent) == ("save a note: meet at the museum", "notes")  # the route is kept
        assert store.search("user:42", "museum")[0].id == edited.id
        assert store.search("user:42", "library") == []


def test_a_forward_keeps_where_it_came_from(tmp_path):
    model = FunctionModel(echo)
    ram = {"type": "user", "date": 1_700_000_000, "sender_user": {"id": 77, "is_bot": False, "first_name": "Ram", "last_name": "Kumar"}}
    news = {"type": "channel", "date": 1_700_000_000, "message_id": 9, "chat": {"id": -1009, "type": "channel", "title": "City News"}}

    async def scenario(hub, tg, bot):
        tg.push_message(42, "the report is due friday", extra={"forward_origin": ram})
        tg.push_message(42, "/help is closed on sunday", extra={"forward_origin": news})
        await tg.await_sent(2, chat_id=42)

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", model))
    assert [r[1] for r in rows(tmp_path / "hub.db", "user:42") if r[0] == "user"] == [
        "forwarded from Ram Kumar: the report is due friday",
        "forwarded from City News: /help is closed on sunday",  # a forwarded text is never a command
    ]
    assert model.calls[0].messages[-1]["content"] == "forwarded from Ram Kumar: the report is due friday"


# -- a group becomes a supergroup ---------------------------------------------------------------


def test_a_migrated_group_keeps_its_memory_under_the_supergroup(tmp_path):
    db = tmp_path / "hub.db"
    model = FunctionModel(echo)
    hub = make_hub(db, model)
    old, new = -100, -1001234

    async def scenario(hub, tg, bot):
        tg.push_message(old, "@hub_test_bot note that the hall costs 300 EUR", user_id=7, first_name="Ann")
        await tg.await_sent(1, chat_id=old)
        add_task(hub.store, f"group:{old}", "book the hall")
        add_fact(hub.store, f"group:{old}", NewFact(text="the club meets on Fridays"))
        reminder = add_reminder(hub.store, f"group:{old}", "pay the hall", time.time() + 1.5, chat=str(old))
        bot.reminders.sweep()
        tg.migrate_chat(old, new, user_id=7)
        tg.push_message(new, "@hub_test_bot what does the hall cost?", user_id=7, first_name="Ann", chat_type="supergroup")
        sent = await tg.await_sent(2, chat_id=new, timeout=6)
        assert sent[0]["text"].startswith("[notes]")
        assert sent[1]["text"] == REMINDER_PREFIX + "pay the hall"  # delivered to the new chat id
        assert tg.sent(old)[1:] == []
        await asyncio.sleep(0.3)
        assert get_reminder(hub.store, f"group:{new}", reminder.id).active is False  # sent once, marked

    bot_run(tmp_path, scenario, hub=hub)
    with Store(db) as store:
        assert f"group:{old}" not in store.scopes()
        texts = [m.text for m in store.messages(f"group:{new}")]
        assert texts[0] == "note that the hall costs 300 EUR" and "what does the hall cost?" in texts
        assert [t.title for t in list_tasks(store, f"group:{new}")] == ["book the hall"]
        assert [f.text for f in current_facts(store, f"group:{new}")] == ["the club meets on Fridays"]
        assert store.search(f"group:{new}", "hall costs")[0].text == "note that the hall costs 300 EUR"
        assert store.search(f"group:{old}", "hall") == []
    # The supergroup's answer was given with the group's history.
    assert any("Ann: note that the hall costs 300 EUR" in m["content"] for m in model.calls[-1].messages)


def test_a_send_that_says_the_chat_migrated_moves_the_memory_and_is_delivered(tmp_path):
    db = tmp_path / "hub.db"
    hub = make_hub(db)
    old, new = -200, -1002000
    reminder = add_reminder(hub.store, f"group:{old}", "stand-up", time.time() + 0.5, chat=str(old))

    async def scenario(hub, tg, bot):
        tg.migrate_chat(old, new, notify=False)  # the updates were missed; only sends tell
        (sent,) = await tg.await_sent(1, chat_id=new, timeout=5)
        assert sent["text"] == REMINDER_PREFIX + "stand-up"
        await asyncio.sleep(0.5)
        assert len(tg.sent(new)) == 1  # once

    bot_run(tmp_path, scenario, hub=hub, reminder_interval=0.3)
    with Store(db) as store:
        moved = get_reminder(store, f"group:{new}", reminder.id)
        assert moved is not None and not moved.active and moved.chat == str(new)


# -- 403 and 409 ----------------------------------------------------------------------------------


def test_a_chat_that_blocked_the_bot_has_its_reminders_paused_until_it_writes(tmp_path, caplog):
    db = tmp_path / "hub.db"

    async def main() -> None:
        with FakeBotAPI() as tg:
            first = make_hub(db)
            soon = time.time() + 0.3
            one = add_reminder(first.store, "user:42", "water the plants", soon, chat="42")
            two = add_reminder(first.store, "user:42", "call mum", soon, chat="42")
            tg.block(42)
            async with running(first, tg, reminder_interval=0.2):
                await asyncio.to_thread(tg.wait_calls, "sendMessage", 2, 5)
                await asyncio.sleep(0.8)  # several sweeps: nothing is tried again
                assert len(tg.calls("sendMessage")) == 2
            assert get_reminder(first.store, "user:42", one.id).paused is not None
            first.store.close()

            second = make_hub(db)  # a restart does not try again either
            try:
                async with running(second, tg, reminder_interval=0.2):
                    await asyncio.sleep(0.6)
                    assert len(tg.calls("sendMessage")) == 2
                    tg.block(42, False)
                    tg.push_message(42, "/help")  # the person is back
                    sent = await tg.await_sent(3, chat_id=42, timeout=5)
                    texts = [m["text"] for m in sent]
                    assert {REMINDER_PREFIX + "water the plants", REMINDER_PREFIX + "call mum"} <= set(texts)
                assert get_reminder(second.store, "user:42", two.id).active is False
            finally:
                second.store.close()

    with caplog.at_level(logging.INFO, logger="scopehub.hub.transports.telegram"):
        asyncio.run(main())
    refused = [r for r in caplog.records if "refuses messages" in r.getMessage()]
    assert len(refused) == 1 and "2 reminders paused" in refused[0].getMessage()


def test_failed_deliveries_keep_counting_across_a_restart(tmp_path):
    db = tmp_path / "hub.db"

    async def main() -> None:
        with FakeBotAPI() as tg:
            hub = make_hub(db)
            reminder = add_reminder(hub.store, "user:42", "stretch", time.time() - 1, chat="42")
            tg.fail_next("sendMessage", 500, times=3)  # the three attempts of one delivery
            async with running(hub, tg, reminder_interval=5.0):
                await asyncio.to_thread(tg.wait_calls, "sendMessage", 3, 5)
                await asyncio.sleep(0.2)
            first = get_reminder(hub.store, "user:42", reminder.id)
            assert first.failures == 1 and first.retry_at > time.time() + 2  # next try in about 5 s
            hub.store.close()

            again = make_hub(db)
            try:
                async with running(again, tg, reminder_interval=5.0):
                    await asyncio.sleep(0.5)
                    assert len(tg.calls("sendMessage")) == 3  # the restart waits out the backoff
            finally:
                assert get_reminder(again.store, "user:42", reminder.id).failures == 1
                again.store.close()

    asyncio.run(main())


def test_another_poller_is_one_clear_log_line_and_polling_goes_on(tmp_path, caplog):
    conflict = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"

    async def scenario(hub, tg, bot):
        tg.fail_next("getUpdates", 409, description=conflict, times=2)
        tg.push_message(42, "add buy milk to my tasks")
        (sent,) = await tg.await_sent(1, chat_id=42, timeout=8)
        assert sent["text"].startswith("[tasks]")

    with caplog.at_level(logging.DEBUG):
        bot_run(tmp_path, scenario)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings if "another process is polling with this token" in r.getMessage()] != []
    assert len([r for r in warnings if "polling" in r.getMessage()]) == 1
    assert not [r for r in warnings if r.exc_info or r.levelno >= logging.ERROR]


# -- /forget all in groups -------------------------------------------------------------------------


def test_forget_all_in_a_group_needs_an_admin_and_a_confirmation(tmp_path):
    db = tmp_path / "hub.db"
    clock = [time.time()]
    config = load_settings(db=db, telegram_bot_token=TOKEN)
    hub = Hub(Deps(store=Store(db), settings=config, model=FunctionModel(echo), clock=lambda: clock[0]), registry())
    group = -100

    async def scenario(hub, tg, bot):
        tg.set_member(group, 8, "administrator")
        tg.push_message(group, "@hub_test_bot the door code is 1234", user_id=7)
        await tg.await_sent(1, chat_id=group)
        tg.push_message(group, "/forget all", user_id=7)  # a member
        sent = await tg.await_sent(2, chat_id=group)
        assert sent[1]["text"] == NOT_ADMIN
        tg.push_message(group, "/forget all", user_id=8)  # an admin: asked to confirm
        sent = await tg.await_sent(3, chat_id=group)
        assert sent[2]["text"] == CONFIRM_FORGET_ALL
        clock[0] += 61  # too late: asked again
        tg.push_message(group, "/forget@hub_test_bot all", user_id=8)
        sent = await tg.await_sent(4, chat_id=group)
        assert sent[3]["text"] == CONFIRM_FORGET_ALL
        assert store_texts() == ["the door code is 1234", "ok: Test: the door code is 1234"]  # nothing erased yet
        clock[0] += 30
        tg.push_message(group, "/forget all", user_id=8)  # confirmed in time
        sent = await tg.await_sent(5, chat_id=group)
        assert sent[4]["text"].startswith("Done: everything of this chat is erased")
        assert tg.calls("getChatMember")[0]["user_id"] == 7

    def store_texts() -> list[str]:
        return [m.text for m in hub.store.messages(f"group:{group}")]

    bot_run(tmp_path, scenario, hub=hub)
    assert rows(db, f"group:{group}") == []


def test_forget_all_in_a_private_chat_asks_first_and_the_button_erases(tmp_path):
    async def scenario(hub, tg, bot):
        tg.push_message(42, "my door code is 1234")
        await tg.await_sent(1, chat_id=42)
        tg.push_message(42, "/forget all")
        sent = await tg.await_sent(2, chat_id=42)
        assert sent[1]["text"] == CONFIRM_FORGET_ALL_PRIVATE
        assert [b["text"] for b in sent[1]["reply_markup"]["inline_keyboard"][0]] == ["Erase everything", "Cancel"]
        assert [m.text for m in hub.store.messages("user:42")] == ["my door code is 1234", "ok: my door code is 1234"]
        tg.push_callback_query(42, sent[1]["reply_markup"]["inline_keyboard"][0][0]["callback_data"])
        sent = await tg.await_sent(3, chat_id=42)
        assert sent[2]["text"].startswith("Done: everything of this chat is erased (3 messages, 0 facts")
        assert tg.calls("getChatMember") == []
        assert tg.message(42, sent[1]["message_id"]).get("reply_markup") is None  # the buttons are gone

    bot_run(tmp_path, scenario)
    assert rows(tmp_path / "hub.db", "user:42") == []


# -- mentions, start-up, deadline -------------------------------------------------------------------


def test_a_removed_mention_leaves_no_stray_punctuation(tmp_path):
    model = FunctionModel(echo)

    async def scenario(hub, tg, bot):
        tg.push_message(-100, "hey @hub_test_bot , list tasks", user_id=7, first_name="Ann")
        (sent,) = await tg.await_sent(1, chat_id=-100)
        assert sent["text"] == "[tasks]\nok: Ann: hey, list tasks"

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", model))
    assert strip_mention("hey @bot, list tasks", "bot") == "hey, list tasks"
    assert strip_mention("@Bot: list tasks", "bot") == "list tasks"
    assert strip_mention("milk, @bot, please", "bot") == "milk, please"
    assert strip_mention("is 5 ! big, @bot?", "bot") == "is 5 ! big?"  # only the seam is touched
    assert strip_mention("mail me@bot.com", "bot") == "mail me@bot.com"


def test_slow_first_use_work_is_done_off_the_loop_before_polling(tmp_path):
    seen: dict[str, Any] = {}

    class Warming(FunctionModel):
        def warm_up(self) -> None:
            seen["thread"] = threading.current_thread()
            seen["polls_before"] = len(tg_ref[0].calls("getUpdates"))

    tg_ref: list[FakeBotAPI] = []

    async def main() -> None:
        with FakeBotAPI() as tg:
            tg_ref.append(tg)
            hub = make_hub(tmp_path / "hub.db", Warming(echo))
            try:
                async with running(hub, tg):
                    tg.push_message(42, "hello")
                    await tg.await_sent(1, chat_id=42)
            finally:
                hub.store.close()

    asyncio.run(main())
    assert seen["thread"] is not threading.main_thread()  # not on the event loop's thread
    assert seen["polls_before"] == 0  # before the first getUpdates


def test_a_hung_model_gets_an_apology_within_the_deadline(tmp_path):
    async def hang(messages, tools):
        await asyncio.sleep(3600)

    async def scenario(hub, tg, bot):
        tg.push_message(42, "add buy milk to my tasks")
        (sent,) = await tg.await_sent(1, chat_id=42)
        assert sent["text"] == MODEL_SLOW_REPLY

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", FunctionModel(hang), reply_deadline=0.3))
    assert [r[1] for r in rows(tmp_path / "hub.db", "user:42")] == ["add buy milk to my tasks"]


def test_the_bot_asks_telegram_for_edits_too(tmp_path, monkeypatch):
    from telegram.ext import Application

    from scopehub.hub.cli import main

    asked: dict[str, Any] = {}
    monkeypatch.setattr(Application, "run_polling", lambda self, **kw: asked.update(kw))
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("HUB_MODEL", "openai/fake")
    monkeypatch.setenv("HUB_API_BASE", "http://127.0.0.1:9")
    monkeypatch.setenv("HUB_DB", str(tmp_path / "hub.db"))
    main(["telegram"])
    assert set(asked["allowed_updates"]) == {"message", "edited_message", "message_reaction", "callback_query"}

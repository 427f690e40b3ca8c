"""Telegram reminders and delivery that outlives the moment: due reminders sent and marked, replies sent later, forget-all, restarts."""

from __future__ import annotations

import asyncio
import time

from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.transports.telegram import REMINDER_PREFIX
from scopehub.memory import Store, add_reminder, get_reminder
from tests.fakes.bot_api import FakeBotAPI
from tests.helpers import StoreThreads
from tests.hub.telegram_helpers import FAST, bot_run, echo, make_hub, rows, running

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


def test_a_reminder_set_by_an_answer_is_scheduled_from_the_answers_own_store_step(tmp_path, monkeypatch):
    """With the store's work in the database threads (PostgreSQL): the reminder an answer set
    is scheduled at once, by the step that records the answer (no store step of its own),
    and the job is added on the event loop."""

    def set_reminder(messages, tools):
        add_reminder(hub.store, "user:42", "stretch", time.time() + 0.5, chat="42")
        return "I'll remind you."

    hub = make_hub(tmp_path / "hub.db", FunctionModel(set_reminder))
    threads = StoreThreads(hub.store, monkeypatch)

    async def scenario(hub, tg, bot):
        async def talk():
            tg.push_message(42, "remind me to stretch in a moment")
            return await tg.await_sent(2, chat_id=42, timeout=4)  # not after the 60 s sweep

        sent = await threads.watch(talk())
        assert [m["text"] for m in sent] == ["[general]\nI'll remind you.", REMINDER_PREFIX + "stretch"]

    bot_run(tmp_path, scenario, hub=hub, reminder_interval=60.0)
    assert "_record" in threads.steps and not any("due_reminders" in step for step in threads.steps), threads.steps


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

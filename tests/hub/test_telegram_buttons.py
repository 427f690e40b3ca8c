"""Inline keyboards for every confirmation and /settings per chat, through PTB's real client:
each press is answered and checked against the chat and the user."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from scopehub.agents import AgentSpec, ToolContext, tool
from scopehub.hub import Deps, Hub, load_settings
from scopehub.hub.models import ModelResponse, ToolCall
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.transports.telegram import CONFIRM_FORGET_ALL, NOT_ADMIN_FOR
from scopehub.hub.transports.telegram.keyboards import asks_yes_no
from scopehub.memory import Store, chat_settings
from tests.fakes.bot_api import FakeBotAPI
from tests.helpers import registry_of
from tests.hub.telegram_helpers import NOTES, TOKEN, bot_run, echo, make_hub, rows

GROUP = -100


def buttons(sent: dict[str, Any]) -> dict[str, str]:
    """Button text -> callback data of a sent message."""
    return {b["text"]: b["callback_data"] for row in (sent["reply_markup"] or {}).get("inline_keyboard", []) for b in row}


def answers(tg: FakeBotAPI) -> list[dict[str, Any]]:
    return tg.calls("answerCallbackQuery")


async def eventually(check: Any, timeout: float = 5.0) -> None:
    """Wait until ``check()`` is true (an edit after the press's answer lands a moment later)."""
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    assert check()


def test_forget_all_in_a_group_is_confirmed_by_its_asker_with_a_button_and_others_are_refused(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    clock = [time.time()]
    config = load_settings(db=db, telegram_bot_token=TOKEN)
    hub = Hub(Deps(store=Store(db), settings=config, model=FunctionModel(echo), clock=lambda: clock[0]), registry_of(NOTES))

    async def scenario(hub, tg, bot) -> None:
        tg.set_member(GROUP, 8, "administrator")
        tg.set_member(GROUP, 9, "administrator")
        tg.push_message(GROUP, "@hub_test_bot the door code is 1234", user_id=7)
        await tg.await_sent(1, chat_id=GROUP)
        tg.push_message(GROUP, "/forget all", user_id=8)
        confirm = (await tg.await_sent(2, chat_id=GROUP))[1]
        assert confirm["text"] == CONFIRM_FORGET_ALL and confirm["reply_to"] is not None
        keys = buttons(confirm)
        assert list(keys) == ["Erase everything", "Cancel"]
        # A member, and another administrator, press it: refused, nothing erased, each press answered.
        tg.push_callback_query(GROUP, keys["Erase everything"], message_id=confirm["message_id"], user_id=7)
        tg.push_callback_query(GROUP, keys["Erase everything"], message_id=confirm["message_id"], user_id=9)
        await tg.wait_calls_async("answerCallbackQuery", 2)
        assert [(a["show_alert"], a["text"]) for a in answers(tg)] == [
            (True, "Only the person who asked for this can confirm it."),
            (True, "Only the person who asked for this can confirm it."),
        ]
        assert len(hub.store.messages(f"group:{GROUP}")) == 2
        # Too late: the confirmation ran out; the buttons go, nothing is erased.
        clock[0] += 61
        tg.push_callback_query(GROUP, keys["Erase everything"], message_id=confirm["message_id"], user_id=8)
        await tg.wait_calls_async("answerCallbackQuery", 3)
        assert answers(tg)[2]["text"].startswith("This confirmation ran out")
        await eventually(lambda: tg.message(GROUP, confirm["message_id"]).get("reply_markup") is None)
        # Asked again and confirmed by the asker: erased.
        tg.push_message(GROUP, "/forget all", user_id=8)
        again = (await tg.await_sent(3, chat_id=GROUP))[2]
        tg.push_callback_query(GROUP, buttons(again)["Erase everything"], message_id=again["message_id"], user_id=8)
        done = (await tg.await_sent(4, chat_id=GROUP))[3]
        assert done["text"].startswith("Done: everything of this chat is erased")
        assert tg.message(GROUP, again["message_id"])["text"].endswith("Confirmed by Test.")
        assert len(answers(tg)) == 4

    bot_run(tmp_path, scenario, hub=hub)
    assert rows(db, f"group:{GROUP}") == []


def test_cancel_keeps_everything(tmp_path: Path) -> None:
    async def scenario(hub, tg, bot) -> None:
        tg.push_message(42, "my door code is 1234")
        await tg.await_sent(1, chat_id=42)
        tg.push_message(42, "/forget all")
        confirm = (await tg.await_sent(2, chat_id=42))[1]
        tg.push_callback_query(42, buttons(confirm)["Cancel"], message_id=confirm["message_id"])
        await tg.wait_calls_async("answerCallbackQuery", 1)
        assert answers(tg)[0]["text"] == "Cancelled"
        await eventually(lambda: tg.message(42, confirm["message_id"])["text"].endswith("Cancelled: nothing was erased."))
        tg.push_callback_query(42, buttons(confirm)["Erase everything"], message_id=confirm["message_id"])  # a stale press
        await tg.wait_calls_async("answerCallbackQuery", 2)
        assert answers(tg)[1]["text"].startswith("This confirmation ran out")

    bot_run(tmp_path, scenario)
    assert [r[1] for r in rows(tmp_path / "hub.db", "user:42")] == ["my door code is 1234", "ok: my door code is 1234"]


def test_a_yes_or_no_question_gets_buttons_and_the_press_is_the_askers_answer(tmp_path: Path) -> None:
    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        last = messages[-1]["content"]
        if last.endswith(("yes", "no")):
            return f"Understood: {last.split(': ')[-1]}."
        return "I found two reminders called 'call mum'. Should I cancel reminder #2?"

    async def scenario(hub, tg, bot) -> None:
        tg.push_message(GROUP, "@hub_test_bot cancel my call mum reminder in the tasks", user_id=7, first_name="Ann")
        question = (await tg.await_sent(1, chat_id=GROUP))[0]
        keys = buttons(question)
        assert list(keys) == ["Yes", "No"]
        tg.push_callback_query(GROUP, keys["Yes"], message_id=question["message_id"], user_id=8)  # not the asker
        await tg.wait_calls_async("answerCallbackQuery", 1)
        assert answers(tg)[0] == {"callback_query_id": "1", "text": "Only the person who asked can answer this.", "show_alert": True}
        tg.push_callback_query(GROUP, keys["Yes"], message_id=question["message_id"], user_id=7, first_name="Ann")
        reply = (await tg.await_sent(2, chat_id=GROUP))[1]
        assert reply["text"] == "[tasks]\nUnderstood: yes."
        await eventually(lambda: tg.message(GROUP, question["message_id"]).get("reply_markup") is None)  # one answer only

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", FunctionModel(model)))
    with Store(tmp_path / "hub.db") as store:
        said = store.messages(f"group:{GROUP}")[2]
        question = store.messages(f"group:{GROUP}")[1]
    assert (said.text, said.sender, said.via, said.reply_to) == ("yes", "Ann", "reply", question.id)
    assert asks_yes_no("Did you mean task #3?") and asks_yes_no("Done.\nShall I also add eggs?")
    assert not asks_yes_no("Which list: work or shopping?") and not asks_yes_no("Added buy milk.")


class _NoArgs(BaseModel):
    pass


@tool
def local_zone(ctx: ToolContext, args: _NoArgs) -> str:
    """The chat's time zone."""
    return f"zone={ctx.extra['timezone']}"


CLOCK = AgentSpec(
    name="clock", description="clock: what time it is", instructions="Tell the time.", examples=("what time is it",), tools=(local_zone,)
)


def test_settings_per_chat_change_the_agents_the_language_and_the_time_zone_admin_only_in_groups(tmp_path: Path) -> None:
    calls: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        calls.append(messages)
        if messages[-1]["role"] == "tool":
            return f"It is {messages[-1]['content']}."
        if any(t["function"]["name"] == "local_zone" for t in tools):
            return ModelResponse(tool_calls=(ToolCall(id="c1", name="local_zone", arguments="{}"),))
        return "ok: " + messages[-1]["content"]

    db = tmp_path / "hub.db"
    config = load_settings(db=db, telegram_bot_token=TOKEN, router_embedder="none", timezone="UTC")
    hub = Hub(Deps(store=Store(db), settings=config, model=FunctionModel(model)), registry_of(NOTES, CLOCK))

    async def scenario(hub, tg, bot) -> None:
        tg.set_member(GROUP, 8, "administrator")
        tg.push_message(GROUP, "/settings", user_id=7)  # anyone may look
        shown = (await tg.await_sent(1, chat_id=GROUP))[0]
        assert shown["text"].startswith("Settings of this chat:\nTime zone: UTC (the default)")
        keys = buttons(shown)
        assert "✅ notes" in keys and "Deutsch" in keys
        tg.push_callback_query(GROUP, keys["✅ notes"], message_id=shown["message_id"], user_id=7)  # a member
        await tg.wait_calls_async("answerCallbackQuery", 1)
        assert answers(tg)[0]["text"] == NOT_ADMIN_FOR.format(what="change this group's settings")
        assert chat_settings(hub.store, f"group:{GROUP}").agents is None
        tg.push_message(GROUP, "/settings timezone Europe/Berlin", user_id=7)  # typed, by a member: refused
        assert (await tg.await_sent(2, chat_id=GROUP))[1]["text"] == NOT_ADMIN_FOR.format(what="change this group's settings")
        # An administrator turns notes off and picks German with the buttons, and types a time zone.
        tg.push_callback_query(GROUP, keys["✅ notes"], message_id=shown["message_id"], user_id=8)
        tg.push_callback_query(GROUP, keys["Deutsch"], message_id=shown["message_id"], user_id=8)
        await tg.wait_calls_async("answerCallbackQuery", 3)
        assert [a["text"] for a in answers(tg)[1:]] == ["Saved", "Saved"]
        await eventually(lambda: "Language: Deutsch" in tg.message(GROUP, shown["message_id"])["text"])
        refreshed = tg.message(GROUP, shown["message_id"])
        assert "Language: Deutsch" in refreshed["text"] and "Agents: general, tasks, clock" in refreshed["text"]
        assert "▫️ notes" in buttons({"reply_markup": refreshed["reply_markup"]})
        tg.push_message(GROUP, "/settings timezone Europe/Berlin", user_id=8)
        assert (await tg.await_sent(3, chat_id=GROUP))[2]["text"].startswith("Time zone set to Europe/Berlin")
        # A notes request now goes to another agent, told to answer in German; the clock's tool reads the zone.
        tg.push_message(GROUP, "@hub_test_bot note that the wifi password is hunter2", user_id=7)
        noted = (await tg.await_sent(4, chat_id=GROUP))[3]
        assert not noted["text"].startswith("[notes]")
        assert "always answer in Deutsch" in calls[-1][1]["content"]
        tg.push_message(GROUP, "/clock what time is it", user_id=7)
        assert (await tg.await_sent(5, chat_id=GROUP))[4]["text"] == "[clock]\nIt is zone=Europe/Berlin."

    bot_run(tmp_path, scenario, hub=hub)
    with Store(db) as store:
        kept = chat_settings(store, f"group:{GROUP}")
        assert (kept.timezone, kept.language, kept.agents) == ("Europe/Berlin", "Deutsch", ("general", "tasks", "clock"))
        assert chat_settings(store, "user:7").timezone is None  # the member's private chat is untouched


def test_settings_in_a_private_chat_need_no_administrator(tmp_path: Path) -> None:
    async def scenario(hub, tg, bot) -> None:
        tg.push_message(42, "/settings agents tasks")
        assert (await tg.await_sent(1, chat_id=42))[0]["text"].startswith("Only tasks answer here now")
        tg.push_message(42, "/settings language klingon!!")
        assert (await tg.await_sent(2, chat_id=42))[1]["text"].startswith("Usage: /settings language")
        tg.push_message(42, "/settings timezone Mars/Olympus")
        assert "don't know the time zone" in (await tg.await_sent(3, chat_id=42))[2]["text"]
        tg.push_message(42, "note that the wifi password is hunter2")
        assert (await tg.await_sent(4, chat_id=42))[3]["text"].startswith("[tasks]")  # notes is off here
        assert tg.calls("getChatMember") == []

    bot_run(tmp_path, scenario)

"""Streamed replies and the typing action, through PTB's real client and litellm's real streaming."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from scopehub.hub.models import LiteLLMModel
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.transports.telegram import streaming
from scopehub.hub.transports.telegram.delivery import TELEGRAM_LIMIT, split_message
from scopehub.memory import Store
from tests.fakes.bot_api import BotAPIError
from tests.fakes.openai_server import FakeOpenAI, text
from tests.hub.telegram_helpers import bot_run, echo, make_hub, rows

ANSWER = " ".join(f"word{n}" for n in range(60))  # 20 chunks of 3 words from the fake server


def streaming_hub(tmp_path: Path, llm: FakeOpenAI, **settings: Any):
    return make_hub(tmp_path / "hub.db", LiteLLMModel("openai/fake", api_base=llm.base_url, api_key="sk-fake"), **settings)


def test_a_private_answer_is_streamed_as_a_draft_and_sent_whole(tmp_path: Path) -> None:
    with FakeOpenAI(default=lambda request: text(ANSWER), stream_chunk_delay=0.05) as llm:

        async def scenario(hub, tg, bot) -> None:
            tg.push_message(42, "add buy milk to my tasks")
            (sent,) = await tg.await_sent(1, chat_id=42)
            assert sent["text"] == f"[tasks]\n{ANSWER}"  # the final message, whole
            drafts = tg.drafts(42)
            assert len(drafts) >= 2 and len({d["draft_id"] for d in drafts}) == 1
            shown = [d["text"].removesuffix(" …") for d in drafts]
            assert all(ANSWER.startswith(part) for part in shown)  # each a prefix of the answer...
            assert [len(part) for part in shown] == sorted(len(part) for part in shown)  # ...growing
            assert tg.calls("editMessageText") == []

        bot_run(tmp_path, scenario, hub=streaming_hub(tmp_path, llm), stream_every=0.1)
        assert llm.requests[0]["stream"] is True
    assert rows(tmp_path / "hub.db", "user:42")[1][1] == ANSWER  # stored once, whole


def test_a_group_answer_is_streamed_by_editing_one_message_within_the_rate_limit(tmp_path: Path) -> None:
    with FakeOpenAI(default=lambda request: text(ANSWER), stream_chunk_delay=0.05) as llm:

        async def scenario(hub, tg, bot) -> None:
            tg.fail_next("editMessageText", 429, retry_after=1)  # Telegram slows the edits down once
            tg.push_message(-100, "@hub_test_bot add buy milk to our tasks", user_id=7)
            (placeholder,) = await tg.await_sent(1, chat_id=-100)
            assert ANSWER.startswith(placeholder["text"].removesuffix(" …"))  # the first text, as a reply
            assert placeholder["reply_to"] == 1
            for _ in range(100):
                if tg.message(-100, placeholder["message_id"])["text"].startswith("[tasks]"):
                    break
                await asyncio.sleep(0.05)
            assert tg.message(-100, placeholder["message_id"])["text"] == f"[tasks]\n{ANSWER}"
            assert len(tg.sent(-100)) == 1  # one message, edited: nothing sent twice
            edits = [e for e in tg.log if e["method"] == "editMessageText"]
            limited = next(i for i, e in enumerate(edits) if e["status"] == 429)
            if limited + 1 < len(edits):
                assert edits[limited + 1]["at"] - edits[limited]["at"] >= 1.0  # paused as Telegram asked

        bot_run(tmp_path, scenario, hub=streaming_hub(tmp_path, llm), stream_every=0.1)
    with Store(tmp_path / "hub.db") as store:
        reply = store.messages("group:-100")[1]
    assert reply.role == "agent" and reply.ext_id == "-100:2"  # the edited message is the reply's Telegram id


def test_without_drafts_a_private_answer_is_streamed_by_edits_and_a_long_one_is_split(tmp_path: Path) -> None:
    long_answer = " ".join(f"sentence{n} is here." for n in range(700))  # over Telegram's limit

    def no_drafts(params: dict[str, Any]) -> Any:
        raise BotAPIError(404, "Not Found: method not found")  # a self-hosted Bot API older than 9.3

    with FakeOpenAI(default=lambda request: text(long_answer), stream_chunk_delay=0.001) as llm:

        async def scenario(hub, tg, bot) -> None:
            tg.set_handler("sendMessageDraft", no_drafts)
            tg.push_message(42, "add buy milk to my tasks")
            chunks = len(split_message(f"[tasks]\n{long_answer}"))
            assert chunks > 1
            sent = await tg.await_sent(chunks, chat_id=42, timeout=20)
            for _ in range(100):
                if tg.message(42, sent[0]["message_id"])["text"].startswith("[tasks]"):
                    break
                await asyncio.sleep(0.05)
            first = tg.message(42, sent[0]["message_id"])["text"]
            assert first.startswith("[tasks]\nsentence0") and len(first) <= TELEGRAM_LIMIT
            assert " ".join((first.removeprefix("[tasks]\n") + " " + " ".join(m["text"] for m in tg.sent(42)[1:])).split()) == long_answer
            assert bot.drafts_work is False

        bot_run(tmp_path, scenario, hub=streaming_hub(tmp_path, llm), stream_every=0.05)


def test_a_model_that_cannot_stream_answers_whole_and_stream_off_sends_no_draft(tmp_path: Path) -> None:
    async def scenario(hub, tg, bot) -> None:
        tg.push_message(42, "add buy milk to my tasks")
        (sent,) = await tg.await_sent(1, chat_id=42)
        assert sent["text"] == "[tasks]\nok: add buy milk to my tasks"
        assert tg.drafts() == [] and tg.calls("editMessageText") == []

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", FunctionModel(echo)))
    with FakeOpenAI(default=lambda request: text(ANSWER)) as llm:

        async def off(hub, tg, bot) -> None:
            tg.push_message(42, "add buy milk to my tasks")
            (sent,) = await tg.await_sent(1, chat_id=42)
            assert sent["text"] == f"[tasks]\n{ANSWER}" and tg.drafts() == []

        bot_run(tmp_path / "off", off, hub=make_hub(tmp_path / "off.db", LiteLLMModel("openai/fake", api_base=llm.base_url, api_key="k"), stream="off"))
        assert not llm.requests[0].get("stream")


def test_an_answer_written_before_the_first_update_is_due_is_sent_whole_with_nothing_streamed(tmp_path: Path, monkeypatch) -> None:
    # The first draft (or placeholder) waits streaming.FIRST_DELAY after the first text; an
    # answer done by then goes out as one sendMessage, in a private chat and in a group.
    monkeypatch.setattr(streaming, "FIRST_DELAY", 30.0)
    with FakeOpenAI(default=lambda request: text(ANSWER)) as llm:

        async def scenario(hub, tg, bot) -> None:
            tg.push_message(42, "add buy milk to my tasks")
            (sent,) = await tg.await_sent(1, chat_id=42, timeout=20)
            assert sent["text"] == f"[tasks]\n{ANSWER}"
            tg.push_message(-100, "@hub_test_bot add buy milk to our tasks", user_id=7)
            (answer,) = await tg.await_sent(1, chat_id=-100)
            assert answer["text"] == f"[tasks]\n{ANSWER}" and answer["reply_to"] == 1  # sent, not edited into a placeholder
            assert tg.drafts() == [] and tg.calls("editMessageText") == []

        bot_run(tmp_path, scenario, hub=streaming_hub(tmp_path, llm), stream_every=60.0)
        assert llm.requests[0]["stream"] is True  # streamed by the model all the same
    assert [r[1] for r in rows(tmp_path / "hub.db", "user:42")] == ["add buy milk to my tasks", ANSWER]


def test_typing_shows_only_when_the_answer_takes_longer_than_the_typing_delay(tmp_path: Path) -> None:
    async def thinking(messages, tools):  # long enough for an action sent at once to go out
        await asyncio.sleep(0.3)
        return echo(messages, tools)

    async def scenario(hub, tg, bot) -> None:
        tg.push_message(42, "add buy milk to my tasks")
        (sent,) = await tg.await_sent(1, chat_id=42)
        assert sent["text"] == "[tasks]\nok: add buy milk to my tasks"
        assert tg.calls("sendChatAction") == []  # answered within the delay: no action at all

    bot_run(tmp_path, scenario, hub=make_hub(tmp_path / "hub.db", FunctionModel(thinking)), typing_delay=30.0)
    seen: list[Any] = []  # the fake Bot API, once running

    async def slow(messages, tools):  # answers once "typing…" is up (or gives up after 10 s)
        for _ in range(200):
            if seen and seen[0].calls("sendChatAction"):
                break
            await asyncio.sleep(0.05)
        return echo(messages, tools)

    async def slow_answer(hub, tg, bot) -> None:
        seen.append(tg)
        tg.push_message(42, "add buy milk to my tasks")
        (sent,) = await tg.await_sent(1, chat_id=42, timeout=20)
        assert sent["text"] == "[tasks]\nok: add buy milk to my tasks"
        methods = [e["method"] for e in tg.log]
        assert "sendChatAction" in methods and methods.index("sendChatAction") < methods.index("sendMessage")  # shown before the answer
        assert tg.calls("sendChatAction")[0]["action"] == "typing"

    bot_run(tmp_path / "slow", slow_answer, hub=make_hub(tmp_path / "slow.db", FunctionModel(slow)), typing_delay=0.1)

"""The loopback fakes answer the real clients the way the real APIs do, for what the bot uses.

Only the fakes' fidelity is tested here: the OpenAI chat completions the hub sends through
litellm (text, tool calls, usage, the errors and broken bodies it handles) and the Bot API
methods the Telegram transport calls through python-telegram-bot (getMe, sendMessage with
reply parameters, sendChatAction, setMyCommands, getUpdates, form-encoded), with the
error shapes it handles (RetryAfter, BadRequest, Forbidden, NetworkError). What the bot
does with them is tested in tests/hub.
"""

from __future__ import annotations

import asyncio
import datetime as dtm
import json
import threading
from typing import Any

import litellm
import pytest
from telegram import Bot, BotCommand, ReplyParameters, Update
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter

from tests.fakes import FakeBotAPI, FakeOpenAI
from tests.fakes.bot_api import auto_entities, message_update, utf16_len
from tests.fakes.openai_server import delay, error, malformed, text, tool_call, tool_calls

TOKEN = "123456:TEST-token"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search notes.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


async def _complete(server: FakeOpenAI, **kwargs: Any) -> Any:
    params: dict[str, Any] = {
        "model": "openai/fake",
        "api_base": server.base_url,
        "api_key": "sk-fake",
        "messages": [{"role": "user", "content": "hi"}],
        "num_retries": 0,
        "max_retries": 0,
    }
    params.update(kwargs)
    return await litellm.acompletion(**params)


# -- FakeOpenAI through litellm ---------------------------------------------------------


def test_openai_text_tool_calls_and_usage_as_litellm_parses_them() -> None:
    async def scenario(server: FakeOpenAI) -> None:
        server.script(
            text("hello there"),
            tool_call("search", {"q": "cats"}, call_id="call_A"),
            tool_calls([tool_call("search", {"q": "a"}), ("search", '{"q": "b"}')]),
        )
        first = await _complete(server, tools=TOOLS)
        assert first.choices[0].message.content == "hello there"
        assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
        assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens

        second = await _complete(server, tools=TOOLS)
        (call,) = second.choices[0].message.tool_calls
        assert (call.id, call.function.name) == ("call_A", "search")
        assert json.loads(call.function.arguments) == {"q": "cats"}
        assert second.choices[0].finish_reason == "tool_calls"

        third = await _complete(server, tools=TOOLS)
        args = [json.loads(c.function.arguments) for c in third.choices[0].message.tool_calls]
        assert args == [{"q": "a"}, {"q": "b"}]
        assert len({c.id for c in third.choices[0].message.tool_calls}) == 2

    with FakeOpenAI() as server:
        asyncio.run(scenario(server))
        sent = server.requests
    # What litellm put on the wire: the provider's model name, the messages, the tools.
    assert len(sent) == 3
    assert sent[0]["model"] == "fake"
    assert sent[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert sent[0]["tools"][0]["function"]["name"] == "search"
    assert not sent[0].get("stream")


def test_openai_http_errors_map_to_the_litellm_exceptions_the_hub_handles() -> None:
    async def scenario(server: FakeOpenAI) -> None:
        server.script(error(429, headers={"Retry-After": "7"}), error(500), error(503), error(400), "fine")
        with pytest.raises(litellm.RateLimitError) as rate:
            await _complete(server)
        assert rate.value.status_code == 429
        assert rate.value.response.headers["retry-after"] == "7"  # LiteLLMModel honours it
        with pytest.raises(litellm.InternalServerError) as internal:
            await _complete(server)
        assert internal.value.status_code == 500
        with pytest.raises(litellm.ServiceUnavailableError):
            await _complete(server)
        with pytest.raises(litellm.BadRequestError):
            await _complete(server)
        assert (await _complete(server)).choices[0].message.content == "fine"

    with FakeOpenAI() as server:
        asyncio.run(scenario(server))
        assert len(server.requests) == 5  # no hidden retries with num_retries=0


def test_openai_timeout_and_malformed_bodies() -> None:
    async def scenario(server: FakeOpenAI) -> None:
        server.script(
            delay(0.6, then=text("late")), malformed("not json at all"), malformed('{"foo": 1}')
        )
        with pytest.raises(litellm.Timeout):
            await _complete(server, timeout=0.1)
        with pytest.raises(litellm.InternalServerError, match="Expecting value"):
            await _complete(server)
        with pytest.raises(litellm.InternalServerError, match="choices"):
            await _complete(server)
        assert (await _complete(server)).choices[0].message.content == "ok"  # still serving

    with FakeOpenAI() as server:
        asyncio.run(scenario(server))


# -- FakeBotAPI: updates as PTB parses them ----------------------------------------------


def test_auto_entities_use_utf16_offsets_that_ptb_parses() -> None:
    text_ = "/ask@hub_test_bot 😀 ping @alice_b and @bob12"
    entities = auto_entities(text_)
    assert [e["type"] for e in entities] == ["bot_command", "mention", "mention"]
    assert entities[0] == {"type": "bot_command", "offset": 0, "length": 17}
    assert utf16_len("😀") == 2
    update = Update.de_json(message_update(-5, text_, user_id=7), None)
    message = update.message
    assert message is not None
    parsed = message.parse_entities()
    assert sorted(parsed.values()) == ["/ask@hub_test_bot", "@alice_b", "@bob12"]
    assert message.chat.type == "group"
    assert message.from_user is not None and message.from_user.id == 7


# -- FakeBotAPI through telegram.Bot: the methods the transport calls ---------------------


def test_bot_methods_the_transport_calls() -> None:
    async def scenario(tg: FakeBotAPI) -> None:
        async with Bot(TOKEN, base_url=tg.base_url) as bot:
            assert (bot.username, bot.id) == ("hub_test_bot", 999)  # initialize() called getMe

            update = tg.push_message(42, "question")
            question_id = update["message"]["message_id"]
            reply = await bot.send_message(
                42, "answer", reply_parameters=ReplyParameters(question_id, allow_sending_without_reply=True)
            )
            assert (reply.text, reply.chat.id) == ("answer", 42)
            assert reply.from_user is not None and reply.from_user.is_bot
            assert reply.reply_to_message is not None and reply.reply_to_message.text == "question"

            # Telegram counts the 4,096-character limit in UTF-16 code units.
            assert (await bot.send_message(42, "😀" * 2048)).text == "😀" * 2048
            with pytest.raises(BadRequest, match="too long"):
                await bot.send_message(42, "😀" * 2048 + "x")

            await bot.send_chat_action(42, "typing")
            assert await bot.set_my_commands([BotCommand("start", "Start"), BotCommand("tasks", "To-do list")])

    with FakeBotAPI() as tg:
        asyncio.run(scenario(tg))
        assert [m["text"] for m in tg.sent(42)] == ["answer", "😀" * 2048]
        assert tg.sent(42)[0]["reply_to"] == 1  # the pushed "question"
        (commands_call,) = tg.calls("setMyCommands")
        assert commands_call["commands"] == [
            {"command": "start", "description": "Start"},
            {"command": "tasks", "description": "To-do list"},
        ]
        assert tg.calls("sendChatAction") == [{"chat_id": 42, "action": "typing"}]
        # PTB form-encodes parameters; parameterless calls (getMe) POST an empty body.
        kinds = {bool(e["params"]): e["content_type"] for e in tg.log}
        assert kinds == {
            True: "application/x-www-form-urlencoded",
            False: "application/octet-stream",
        }


def test_bot_errors_have_the_shapes_the_transport_handles() -> None:
    async def scenario(tg: FakeBotAPI) -> None:
        async with Bot(TOKEN, base_url=tg.base_url) as bot:
            tg.fail_next("sendMessage", 429, retry_after=2)
            with pytest.raises(RetryAfter) as retry:
                await bot.send_message(1, "first try")
            assert retry.value.retry_after in (2, dtm.timedelta(seconds=2))

            tg.drop_next("sendMessage")
            with pytest.raises(NetworkError):
                await bot.send_message(1, "dropped")

            tg.bad_entities_next(times=2)
            for _ in range(2):
                with pytest.raises(BadRequest, match="parse entities"):
                    await bot.send_message(1, "<b>broken", parse_mode="HTML")

            tg.fail_next("sendMessage", 403)
            with pytest.raises(Forbidden, match="blocked"):
                await bot.send_message(1, "to a user who blocked the bot")

            tg.fail_next("getMe", 500)
            with pytest.raises(NetworkError):
                await bot.get_me()

            assert (await bot.send_message(1, "finally")).text == "finally"

    with FakeBotAPI() as tg:
        asyncio.run(scenario(tg))
        assert tg.texts() == ["finally"]  # failed attempts are not "sent"...
        assert [e["status"] for e in tg.log if e["method"] == "sendMessage"] == [429, 0, 400, 400, 403, 200]  # ...but recorded


def test_get_updates_confirms_by_offset_and_a_long_poll_wakes_on_a_new_message() -> None:
    async def scenario(tg: FakeBotAPI) -> None:
        async with Bot(TOKEN, base_url=tg.base_url) as bot:
            tg.push_message(3, "a")
            tg.push_message(3, "b")
            first = await bot.get_updates(timeout=0)
            assert [u.message.text for u in first if u.message] == ["a", "b"]
            assert tg.pending_updates == 2  # delivered, not yet confirmed: a restart gets them again
            assert await bot.get_updates(offset=first[-1].update_id + 1, timeout=0) == ()
            assert tg.updates_consumed

            timer = threading.Timer(0.1, tg.push_message, args=(3, "c"))
            timer.start()
            woken = await bot.get_updates(offset=first[-1].update_id + 1, timeout=10)
            timer.join()
            assert [u.message.text for u in woken if u.message] == ["c"]

    with FakeBotAPI() as tg:
        asyncio.run(scenario(tg))

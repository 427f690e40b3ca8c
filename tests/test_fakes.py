"""The loopback fakes work through the real clients (litellm, python-telegram-bot)."""

from __future__ import annotations

import asyncio
import datetime as dtm
import json
import math
import threading
import urllib.error
import urllib.request
from typing import Any

import litellm
import pytest
from telegram import (
    Bot,
    BotCommand,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
    Update,
)
from telegram.error import BadRequest, EndPointNotFound, NetworkError, RetryAfter
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

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


def _post_json(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A plain synchronous HTTP POST (no client library), returning status and JSON."""
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


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


# -- FakeOpenAI -----------------------------------------------------------------------


def test_openai_text_tool_calls_and_recorded_requests() -> None:
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
        ids = [c.id for c in third.choices[0].message.tool_calls]
        assert len(set(ids)) == 2

        # Script exhausted: the default responder answers "ok".
        fourth = await _complete(server)
        assert fourth.choices[0].message.content == "ok"

    with FakeOpenAI() as server:
        asyncio.run(scenario(server))
        sent = server.requests
    assert len(sent) == 4
    assert sent[0]["model"] == "fake"
    assert sent[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert sent[0]["tools"][0]["function"]["name"] == "search"
    assert "tools" not in sent[3]
    assert not sent[0].get("stream")


def test_openai_default_responder_and_callable_steps() -> None:
    def echo(request: dict[str, Any]) -> str:
        return "echo: " + request["messages"][-1]["content"]

    async def scenario(server: FakeOpenAI) -> list[str]:
        server.script(lambda req: text(f"{len(req['messages'])} messages"))
        out = [(await _complete(server)).choices[0].message.content]
        out.append(
            (await _complete(server, messages=[{"role": "user", "content": "x"}]))
            .choices[0]
            .message.content
        )
        return out

    with FakeOpenAI(default=echo) as server:
        assert asyncio.run(scenario(server)) == ["1 messages", "echo: x"]
        assert server.remaining == 0


def test_openai_http_errors_map_to_litellm_exceptions() -> None:
    async def scenario(server: FakeOpenAI) -> None:
        server.script(error(429, headers={"Retry-After": "7"}), error(500), error(503), "fine")
        with pytest.raises(litellm.RateLimitError) as rate:
            await _complete(server)
        assert rate.value.status_code == 429
        assert rate.value.response.headers["retry-after"] == "7"
        with pytest.raises(litellm.InternalServerError) as internal:
            await _complete(server)
        assert internal.value.status_code == 500
        with pytest.raises(litellm.ServiceUnavailableError):
            await _complete(server)
        assert (await _complete(server)).choices[0].message.content == "fine"

    with FakeOpenAI() as server:
        asyncio.run(scenario(server))
        assert len(server.requests) == 4  # no hidden retries with num_retries=0


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


def test_openai_rejects_streaming_and_works_from_sync_code() -> None:
    with FakeOpenAI() as server:
        server.script(text("scripted"))
        status, body = _post_json(
            f"{server.base_url}/chat/completions",
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True},
        )
        assert status == 400
        assert "stream=true is not supported" in body["error"]["message"]
        assert server.remaining == 1  # a rejected request consumes no step
        # The unversioned route serves too.
        status, body = _post_json(
            f"{server.root_url}/chat/completions", {"model": "m", "messages": []}
        )
        assert status == 200
        assert body["choices"][0]["message"]["content"] == "scripted"
        assert len(server.wait_requests(2, timeout=1)) == 2


def test_openai_embeddings_are_deterministic_unit_vectors() -> None:
    async def scenario(server: FakeOpenAI) -> list[list[float]]:
        resp = await litellm.aembedding(
            model="openai/emb", api_base=server.base_url, api_key="sk-fake", input=["a", "b", "a"]
        )
        return [item["embedding"] for item in resp.data]

    with FakeOpenAI(embedding_dim=16) as server:
        a, b, a_again = asyncio.run(scenario(server))
        assert a == a_again != b
        assert len(a) == 16
        assert math.isclose(sum(v * v for v in a), 1.0, rel_tol=1e-6)
        assert server.embedding_requests[0]["input"] == ["a", "b", "a"]
        assert server.requests == []


def test_servers_start_and_stop_repeatedly() -> None:
    server = FakeOpenAI()
    for _ in range(2):
        server.start()
        assert server.running
        assert _post_json(f"{server.base_url}/chat/completions", {"messages": []})[0] == 200
        server.stop()
        server.stop()  # idempotent
        assert not server.running
    with pytest.raises(RuntimeError):
        _ = server.base_url


# -- FakeBotAPI: pure helpers -----------------------------------------------------------


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


# -- FakeBotAPI through telegram.Bot ----------------------------------------------------


def test_bot_round_trips() -> None:
    async def scenario(tg: FakeBotAPI) -> None:
        async with Bot(TOKEN, base_url=tg.base_url) as bot:
            assert bot.username == "hub_test_bot"  # initialize() called getMe
            assert bot.id == 999

            keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Yes", callback_data="y")]])
            sent = await bot.send_message(
                42, "*hi*", parse_mode="MarkdownV2", reply_markup=keyboard
            )
            assert isinstance(sent, Message)
            assert (sent.message_id, sent.text, sent.chat.id) == (1, "*hi*", 42)
            assert sent.from_user is not None and sent.from_user.is_bot
            assert sent.reply_markup == keyboard

            update = tg.push_message(42, "question")
            question_id = update["message"]["message_id"]
            reply = await bot.send_message(
                42, "answer", reply_parameters=ReplyParameters(question_id)
            )
            assert reply.reply_to_message is not None
            assert reply.reply_to_message.text == "question"

            edited = await bot.edit_message_text("*hi* edited", chat_id=42, message_id=1)
            assert isinstance(edited, Message) and edited.edit_date is not None
            with pytest.raises(BadRequest, match="not modified"):
                await bot.edit_message_text("*hi* edited", chat_id=42, message_id=1)

            await bot.send_chat_action(42, "typing")
            assert await bot.set_my_commands(
                [BotCommand("start", "Start"), BotCommand("ask", "Ask")]
            )
            assert [c.command for c in await bot.get_my_commands()] == ["start", "ask"]
            assert await bot.delete_my_commands()
            assert await bot.get_my_commands() == ()

            assert await bot.set_webhook("https://example.invalid/hook")
            assert (await bot.get_webhook_info()).url == "https://example.invalid/hook"
            assert await bot.delete_webhook(drop_pending_updates=True)
            assert (await bot.get_webhook_info()).url == ""

            with pytest.raises(EndPointNotFound):
                await bot.do_api_request("noSuchMethod")

    with FakeBotAPI() as tg:
        asyncio.run(scenario(tg))
        sent = tg.sent(42)
        assert [m["text"] for m in sent] == ["*hi*", "answer"]
        assert sent[0]["parse_mode"] == "MarkdownV2"
        assert sent[0]["reply_markup"]["inline_keyboard"][0][0]["callback_data"] == "y"
        assert sent[1]["reply_to"] == 2  # the pushed "question" took message id 2
        assert tg.message(42, 1)["text"] == "*hi* edited"
        (commands_call,) = tg.calls("setMyCommands")
        assert commands_call["commands"] == [
            {"command": "start", "description": "Start"},
            {"command": "ask", "description": "Ask"},
        ]
        assert tg.calls("sendChatAction") == [{"chat_id": 42, "action": "typing"}]
        assert tg.calls("deleteWebhook") == [{"drop_pending_updates": True}]
        assert tg.updates_consumed  # drop_pending_updates cleared the queue
        # PTB form-encodes parameters; parameterless calls POST an empty body.
        kinds = {bool(e["params"]): e["content_type"] for e in tg.log}
        assert kinds == {
            True: "application/x-www-form-urlencoded",
            False: "application/octet-stream",
        }
        # Unknown methods: Telegram's 404 body.
        status, body = _post_json(f"{tg.base_url}{TOKEN}/noSuchMethod", {})
        assert status == 404
        assert body == {
            "ok": False,
            "error_code": 404,
            "description": "Not Found: method noSuchMethod",
        }
        # JSON bodies are accepted too, with the legacy reply_to_message_id.
        status, body = _post_json(
            f"{tg.base_url}{TOKEN}/sendMessage",
            {"chat_id": 42, "text": "raw", "reply_to_message_id": 1},
        )
        assert status == 200 and body["result"]["reply_to_message"]["message_id"] == 1
        assert tg.sent()[-1]["reply_to"] == 1


def test_bot_fault_injection() -> None:
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

            tg.fail_next("getMe", 500)
            with pytest.raises(NetworkError):
                await bot.get_me()

            assert (await bot.send_message(1, "finally")).text == "finally"

    with FakeBotAPI() as tg:
        asyncio.run(scenario(tg))
        assert tg.texts() == ["finally"]  # failed attempts are not "sent"...
        assert len(tg.calls("sendMessage")) == 5  # ...but every attempt is recorded
        assert [e["status"] for e in tg.log if e["method"] == "sendMessage"] == [
            429,
            0,
            400,
            400,
            200,
        ]
        with pytest.raises(AssertionError, match="finally"):
            tg.wait_sent(2, timeout=0.05)


def test_get_updates_long_poll_offsets_and_cap() -> None:
    async def scenario(tg: FakeBotAPI) -> None:
        async with Bot(TOKEN, base_url=tg.base_url) as bot:
            tg.push_message(3, "a")
            tg.push_message(3, "b")
            first = await bot.get_updates(timeout=0)
            assert [u.message.text for u in first if u.message] == ["a", "b"]
            assert tg.pending_updates == 2  # delivered, not yet confirmed
            assert await bot.get_updates(offset=first[-1].update_id + 1, timeout=0) == ()
            assert tg.updates_consumed

            # A waiting long poll wakes up when a message is pushed from another thread.
            timer = threading.Timer(0.1, tg.push_message, args=(3, "c"))
            timer.start()
            woken = await bot.get_updates(offset=first[-1].update_id + 1, timeout=10)
            timer.join()
            assert [u.message.text for u in woken if u.message] == ["c"]

            # timeout is capped at max_poll_timeout, so an empty poll returns soon.
            assert await bot.get_updates(offset=woken[-1].update_id + 1, timeout=30) == ()

    with FakeBotAPI(max_poll_timeout=0.2) as tg:
        asyncio.run(scenario(tg))
        assert [c.get("timeout") for c in tg.calls("getUpdates")] == [0, 0, 10, 30]


# -- FakeBotAPI through an Application ---------------------------------------------------


def _echo_app(tg: FakeBotAPI) -> Application:
    async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None
        await update.effective_message.reply_text(f"started {context.args}")

    async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None
        await update.effective_message.reply_text("echo: " + (update.effective_message.text or ""))

    app = ApplicationBuilder().token(TOKEN).base_url(tg.base_url).build()
    app.add_handler(CommandHandler("start", start))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))
    return app


def test_application_polling_echo() -> None:
    async def scenario(tg: FakeBotAPI) -> None:
        app = _echo_app(tg)
        tg.push_message(42, "/start now", user_id=42)
        async with app:
            await app.start()
            assert app.updater is not None
            await app.updater.start_polling(poll_interval=0.0, timeout=1)
            await tg.await_sent(1, chat_id=42)
            tg.push_message(-100, "hello @hub_test_bot", user_id=7, chat_type="supergroup")
            await tg.await_sent(1, chat_id=-100)
            await app.updater.stop()
            await app.stop()

    with FakeBotAPI() as tg:
        asyncio.run(scenario(tg))
        assert tg.texts(42) == ["started ['now']"]
        (group_reply,) = tg.sent(-100)
        assert group_reply["text"] == "echo: hello @hub_test_bot"
        assert group_reply["reply_to"] == 1  # PTB quotes by default in groups only
        assert tg.sent(42)[0]["reply_to"] is None
        assert tg.updates_consumed
        assert tg.calls("deleteWebhook")  # start_polling removes any webhook first


def test_process_update_directly() -> None:
    async def scenario(tg: FakeBotAPI) -> None:
        app = _echo_app(tg)
        async with app:
            await app.process_update(Update.de_json(tg.make_update(5, "fed directly"), app.bot))
            # An update built without the server works too (the reply target is unknown
            # to the fake, which then just leaves reply_to_message out).
            built = message_update(-9, "no server", user_id=3, message_id=77)
            await app.process_update(Update.de_json(built, app.bot))

    with FakeBotAPI() as tg:
        asyncio.run(scenario(tg))
        assert tg.texts() == ["echo: fed directly", "echo: no server"]
        assert tg.sent(-9)[0]["reply_to"] == 77
        assert tg.calls("getUpdates") == []

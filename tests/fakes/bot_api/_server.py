"""The fake's server: its state, what it recorded, faults to inject, and the HTTP routes."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from aiohttp import web
from multidict import MultiMapping

from tests.fakes import LoopbackServer
from tests.fakes.bot_api._feeding import UpdateFeeder
from tests.fakes.bot_api._methods import (
    TRUE_METHODS,
    BotAPIError,
    BotMethods,
    Fault,
    commands_key,
    fail,
    return_true,
)
from tests.fakes.bot_api._wire import coerce_params

__all__ = ["FakeBotAPI", "MethodHandler"]

MethodHandler: TypeAlias = Callable[[dict[str, Any]], Any]


class FakeBotAPI(UpdateFeeder, BotMethods, LoopbackServer):
    """A scripted Telegram Bot API on 127.0.0.1 (see the module docstring).

    Recording: `calls(method)` holds the decoded parameters of every request, failed
    (injected) ones included; `sent()` holds successful sendMessage calls only.
    """

    def __init__(
        self,
        *,
        username: str = "hub_test_bot",
        bot_id: int = 999,
        first_name: str = "Hub Test Bot",
        token: str | None = None,
        max_poll_timeout: float = 1.0,
        port: int = 0,
        topics: bool = False,
    ) -> None:
        super().__init__(port=port)
        self.topics = topics  # getMe's has_topics_enabled: forum topic mode in private chats (Bot API 9.3)
        self.username = username
        self.bot_id = bot_id
        self.first_name = first_name
        self.token = token  # when set, other tokens get 401 Unauthorized
        self.max_poll_timeout = max_poll_timeout
        self._cond = threading.Condition(self._lock)
        self._update_ids = itertools.count(1)
        self._callback_ids = itertools.count(1)
        self._updates: deque[dict[str, Any]] = deque()
        self._message_ids: dict[int, itertools.count[int]] = {}
        self._messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._chats: dict[int, dict[str, Any]] = {}
        self._sent: list[dict[str, Any]] = []
        self._drafts: list[dict[str, Any]] = []
        self._topics: dict[int, dict[int, str]] = {}  # chat -> message_thread_id -> name
        self._topic_ids = itertools.count(1000)
        self._calls: list[tuple[str, dict[str, Any]]] = []
        self._log: list[dict[str, Any]] = []
        self._faults: dict[str, deque[Fault]] = {}
        self._commands: dict[str, list[dict[str, Any]]] = {}
        self._webhook: dict[str, Any] = {"url": ""}
        self._custom: dict[str, MethodHandler] = {}
        self._files: dict[str, tuple[bytes, str]] = {}  # file_id -> (content, file_path)
        self._file_ids = itertools.count(1)
        self._migrated: dict[int, int] = {}
        self._blocked: set[int] = set()
        self._members: dict[tuple[int, int], str] = {}
        self._update_event: asyncio.Event | None = None
        self._allowed_updates: frozenset[str] | None = None  # None: Telegram's default set
        self._methods: dict[str, Callable[[dict[str, Any]], Any]] = {
            "getMe": self._get_me,
            "getUpdates": self._get_updates,  # async; special-cased
            "sendMessage": self._send_message,
            "editMessageText": self._edit_message_text,
            "sendMessageDraft": self._send_message_draft,
            "createForumTopic": self._create_forum_topic,
            "editMessageReplyMarkup": self._edit_message_reply_markup,
            "deleteMessage": self._delete_message,
            "setMyCommands": self._set_my_commands,
            "getMyCommands": self._get_my_commands,
            "deleteMyCommands": self._delete_my_commands,
            "setWebhook": self._set_webhook,
            "deleteWebhook": self._delete_webhook,
            "getWebhookInfo": self._get_webhook_info,
            "getChat": self._get_chat,
            "getFile": self._get_file,
            "getChatMember": self._get_chat_member,
        }
        for name in TRUE_METHODS:
            self._methods[name] = return_true
        self._canonical = {name.lower(): name for name in self._methods}

    # -- urls and identity --------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/bot`` - for ``ApplicationBuilder().base_url(...)``."""
        return f"{self.root_url}/bot"

    @property
    def base_file_url(self) -> str:
        """``http://127.0.0.1:PORT/file/bot``: files of `push_media` are served below it."""
        return f"{self.root_url}/file/bot"

    @property
    def bot_user(self) -> dict[str, Any]:
        """The User dict getMe returns and sent messages carry in ``from``."""
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": self.first_name,
            "username": self.username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "has_topics_enabled": self.topics,
        }

    # -- inspecting what the bot did ------------------------------------------------

    def sent(self, chat_id: int | None = None) -> list[dict[str, Any]]:
        """Successful sendMessage calls, oldest first.

        Each is ``{"chat_id": int, "text", "parse_mode", "reply_to": int | None,
        "reply_markup", "entities", "message_thread_id", "message_id", "params"}``.
        """
        with self._lock:
            return [
                copy.deepcopy(m) for m in self._sent if chat_id is None or m["chat_id"] == chat_id
            ]

    def drafts(self, chat_id: int | None = None) -> list[dict[str, Any]]:
        """Drafts streamed with sendMessageDraft: ``{"chat_id", "draft_id", "text", "message_thread_id"}``."""
        with self._lock:
            return [copy.deepcopy(d) for d in self._drafts if chat_id is None or d["chat_id"] == chat_id]

    def forum_topics(self, chat_id: int) -> dict[int, str]:
        """The topics made in a chat with createForumTopic: ``{message_thread_id: name}``."""
        with self._lock:
            return dict(self._topics.get(chat_id, {}))

    def texts(self, chat_id: int | None = None) -> list[str]:
        """Just the texts of `sent(chat_id)`."""
        return [m["text"] for m in self.sent(chat_id)]

    def wait_sent(
        self, count: int, chat_id: int | None = None, timeout: float = 5.0
    ) -> list[dict[str, Any]]:
        """Block until at least `count` messages were sent (to `chat_id`); return them all.

        Call it from a thread other than the one running the bot's event loop (in async
        tests: ``await asyncio.to_thread(tg.wait_sent, 1)``), or use `await_sent`.
        """
        with self._cond:
            return copy.deepcopy(self._wait_matching(count, chat_id, timeout))

    def wait_newest(self, count: int, chat_id: int | None = None, timeout: float = 5.0) -> dict[str, Any]:
        """`wait_sent`, returning only the newest of them: a copy of one message, not of the
        whole history (a benchmark waiting on every reply would copy it again each time)."""
        with self._cond:
            return copy.deepcopy(self._wait_matching(count, chat_id, timeout)[-1])

    def _wait_matching(self, count: int, chat_id: int | None, timeout: float) -> list[dict[str, Any]]:
        """The sent messages (to `chat_id`) once there are `count`; call with `_cond` held."""

        def matching() -> list[dict[str, Any]]:
            return [m for m in self._sent if chat_id is None or m["chat_id"] == chat_id]

        if not self._cond.wait_for(lambda: len(matching()) >= count, timeout):
            got = [(m["chat_id"], m["text"]) for m in self._sent]
            where = "" if chat_id is None else f" to chat {chat_id}"
            raise AssertionError(
                f"expected {count} sent messages{where} within {timeout} s; all sent so far: {got!r}"
            )
        return matching()

    async def await_sent(
        self, count: int, chat_id: int | None = None, timeout: float = 5.0
    ) -> list[dict[str, Any]]:
        """Async `wait_sent` that keeps the caller's event loop running."""
        return await asyncio.to_thread(self.wait_sent, count, chat_id, timeout)

    def calls(self, method: str) -> list[dict[str, Any]]:
        """Decoded parameters of every request to `method` (case-insensitive), oldest first."""
        wanted = method.lower()
        with self._lock:
            return [copy.deepcopy(p) for m, p in self._calls if m.lower() == wanted]

    def wait_calls(self, method: str, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Block until `method` was called at least `count` times; return the calls."""
        wanted = method.lower()
        with self._cond:
            ok = self._cond.wait_for(
                lambda: sum(m.lower() == wanted for m, _ in self._calls) >= count, timeout
            )
            if not ok:
                raise AssertionError(
                    f"expected {count} {method} calls within {timeout} s; methods called: "
                    f"{[m for m, _ in self._calls]!r}"
                )
        return self.calls(method)

    async def wait_calls_async(self, method: str, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Async `wait_calls` that keeps the caller's event loop running."""
        return await asyncio.to_thread(self.wait_calls, method, count, timeout)

    @property
    def log(self) -> list[dict[str, Any]]:
        """Every request: ``{"at" (time.monotonic()), "method", "token", "content_type", "params", "status"}``."""
        with self._lock:
            return copy.deepcopy(self._log)

    def message(self, chat_id: int, message_id: int) -> dict[str, Any]:
        """The current state of a stored message (after edits), as Telegram would send it."""
        with self._lock:
            return copy.deepcopy(self._messages[(chat_id, message_id)])

    def commands(
        self, scope: Mapping[str, Any] | None = None, language_code: str = ""
    ) -> list[dict[str, Any]]:
        """The command list set with setMyCommands for that scope/language."""
        with self._lock:
            return copy.deepcopy(self._commands.get(commands_key(scope, language_code), []))

    @property
    def webhook_url(self) -> str:
        """The URL set with setWebhook ("" when none)."""
        with self._lock:
            return str(self._webhook["url"])

    @property
    def webhook_secret(self) -> str | None:
        """The secret token set with setWebhook (None when none was given)."""
        with self._lock:
            return self._webhook.get("secret_token")

    def post_to_webhook(self, update: Mapping[str, Any], *, secret: str | bool | None = True, timeout: float = 10.0) -> int:
        """POST ``update`` to the registered webhook URL as Telegram does; returns the HTTP status.

        ``secret=True`` sends the registered secret token (what Telegram does), a string sends
        that one instead, ``None`` or ``False`` sends none (a forged request). Call it from a
        thread other than the bot's event loop (``await asyncio.to_thread(...)``).
        """
        import httpx

        with self._lock:
            url, registered = self._webhook["url"], self._webhook.get("secret_token")
        if not url:
            raise AssertionError("no webhook is registered (setWebhook was never called)")
        token = registered if secret is True else (secret or None)
        headers = {"X-Telegram-Bot-Api-Secret-Token": token} if token else {}
        return httpx.post(url, json=dict(update), headers=headers, timeout=timeout).status_code

    # -- fault injection and extension ----------------------------------------------

    def fail_next(
        self,
        method: str,
        status: int = 429,
        *,
        retry_after: int | None = None,
        description: str | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next `times` calls of `method` with an ok=false error.

        A 429 carries ``parameters.retry_after`` (default 1 s) -> PTB raises RetryAfter.
        """
        if status == 429 and retry_after is None:
            retry_after = 1
        if description is None:
            description = (
                f"Too Many Requests: retry after {retry_after}"
                if status == 429
                else {
                    400: "Bad Request",
                    401: "Unauthorized",
                    403: "Forbidden: bot was blocked by the user",
                }.get(status, "Internal Server Error")
            )
        self._add_faults(method, Fault("http", status, description, retry_after), times)

    def drop_next(self, method: str, *, times: int = 1) -> None:
        """Close the connection without answering the next `times` calls (-> NetworkError)."""
        self._add_faults(method, Fault("drop"), times)

    def bad_entities_next(self, method: str = "sendMessage", *, times: int = 1) -> None:
        """Answer 400 "Bad Request: can't parse entities: ..." to the next `times` calls."""
        self.fail_next(
            method,
            400,
            description="Bad Request: can't parse entities: Can't find end of the entity "
            "starting at byte offset 0",
            times=times,
        )

    def set_handler(self, method: str, handler: MethodHandler | None) -> None:
        """Serve `method` with ``handler(params) -> result`` (raise BotAPIError for ok=false).

        Overrides the built-in implementation; ``None`` removes the override.
        """
        with self._lock:
            if handler is None:
                self._custom.pop(method.lower(), None)
            else:
                self._custom[method.lower()] = handler

    def reset(self) -> None:
        """Forget recorded calls, sent messages, queued updates and pending faults."""
        with self._lock:
            self._updates.clear()
            self._sent.clear()
            self._drafts.clear()
            self._calls.clear()
            self._log.clear()
            self._faults.clear()

    def _add_faults(self, method: str, fault: Fault, times: int) -> None:
        with self._lock:
            self._faults.setdefault(method.lower(), deque()).extend([fault] * times)

    # -- app ------------------------------------------------------------------------

    def on_loop_started(self) -> None:
        self._update_event = asyncio.Event()

    def _on_wake(self) -> None:
        if self._update_event is not None:
            self._update_event.set()

    def build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._dispatch)
        app.router.add_route("GET", "/file/bot{token}/{path:.+}", self._download)
        return app

    async def _download(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        with self._cond:
            self._calls.append(("download", {"file_path": path}))
            self._cond.notify_all()
            found = next((content for content, file_path in self._files.values() if file_path == path), None)
        if found is None:
            return web.Response(status=404, text="Not Found")
        return web.Response(body=found, content_type="application/octet-stream")

    async def _read_params(self, request: web.Request) -> dict[str, Any]:
        raw: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            body = await request.text()
            if body.strip():
                data = json.loads(body)
                if isinstance(data, dict):
                    raw.update(data)
        elif request.method == "POST":
            form: MultiMapping[Any] = await request.post()
            for key, value in form.items():
                if isinstance(value, web.FileField):
                    raw[key] = {
                        "filename": value.filename,
                        "content_type": value.content_type,
                        "content": value.file.read(),
                    }
                else:
                    raw[key] = value
        return coerce_params(raw)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        token = request.match_info["token"]
        given = request.match_info["method"]
        method = self._canonical.get(given.lower(), given)
        try:
            params = await self._read_params(request)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return fail(400, "Bad Request: can't parse JSON body")
        entry = {
            "at": time.monotonic(),
            "method": method,
            "token": token,
            "content_type": request.content_type,
            "params": params,
            "status": 200,
        }
        unauthorized = self.token is not None and token != self.token
        with self._cond:
            self._calls.append((method, params))
            self._log.append(entry)
            faults = self._faults.get(method.lower())
            fault = faults.popleft() if faults and not unauthorized else None
            if unauthorized:
                entry["status"] = 401
            self._cond.notify_all()
        if unauthorized:
            return fail(401, "Unauthorized")
        if fault is not None:
            if fault.kind == "drop":
                entry["status"] = 0
                assert request.transport is not None
                request.transport.close()
                # handler_cancellation cancels this handler once the connection is gone.
                await asyncio.sleep(60)
                raise web.HTTPServiceUnavailable()
            entry["status"] = fault.status
            parameters = {"retry_after": fault.retry_after} if fault.retry_after else None
            return fail(fault.status, fault.description, parameters)
        try:
            custom = self._custom.get(method.lower())
            if custom is not None:
                result = custom(params)
            elif method == "getUpdates":
                result = await self._get_updates(params)
            elif method in self._methods:
                result = self._methods[method](params)
            else:
                raise BotAPIError(404, f"Not Found: method {given}")
        except BotAPIError as exc:
            entry["status"] = exc.status
            return fail(exc.status, exc.description, exc.parameters)
        return web.json_response({"ok": True, "result": result})

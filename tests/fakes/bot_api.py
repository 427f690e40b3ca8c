"""A loopback fake of the Telegram Bot API for python-telegram-bot tests.

Point PTB at it with ``base_url``; requests arrive at ``/bot<TOKEN>/<method>``::

    with FakeBotAPI() as tg:
        app = ApplicationBuilder().token("123:abc").base_url(tg.base_url).build()
        tg.push_message(42, "/start", user_id=42)
        async with app:
            await app.start()
            await app.updater.start_polling(poll_interval=0.0, timeout=1)
            sent = await asyncio.to_thread(tg.wait_sent, 1)  # don't block the PTB loop
            await app.updater.stop()
            await app.stop()

Or skip HTTP polling and feed updates directly:
``await app.process_update(Update.de_json(tg.make_update(42, "hi"), app.bot))``
(the bot still needs the server for its replies and ``initialize()``'s getMe), or with no
server at all: ``Update.de_json(message_update(42, "hi"), bot)``.

How PTB 22 sends parameters (observed): without files, ``application/x-www-form-urlencoded``
where every value went through ``json.dumps`` unless it already was a string: ints
arrive as ``"42"``, booleans as ``"true"``/``"false"``, and nested objects
(``reply_markup``, ``entities``, ``reply_parameters``, ``commands``, ``scope``,
``link_preview_options``, ``allowed_updates``) as JSON text inside the form field. With
files it is ``multipart/form-data`` with the same encoding. Parameters left at their
defaults are not sent at all. The fake also accepts JSON bodies and query strings, and
decodes known fields back (see `coerce_params`), so `calls()` shows ints, bools, dicts.

Reactions: ``push_reaction(chat_id, message_id, "👎")`` queues a ``message_reaction``
update. As on Telegram, it is delivered only once a getUpdates call has asked for it in
``allowed_updates`` (Telegram remembers the last list; its default leaves out
``message_reaction``, ``message_reaction_count`` and ``chat_member``); an update of a type
not asked for is dropped, never delivered.

PTB error mapping (``telegram.request.BaseRequest._request_wrapper``): a response with
``parameters.retry_after`` raises ``telegram.error.RetryAfter`` whatever the status; 400 ->
``BadRequest``; 401/404 -> ``InvalidToken``; 403 -> ``Forbidden``; 409 -> ``Conflict``;
other statuses and dropped connections -> ``NetworkError`` (``TimedOut`` for timeouts).
Bot methods do not retry; the updater's polling loop retries getUpdates with back-off.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from aiohttp import web
from multidict import MultiMapping

from tests.fakes import LoopbackServer

__all__ = [
    "BotAPIError",
    "FakeBotAPI",
    "auto_entities",
    "coerce_params",
    "message_update",
    "utf16_len",
]

ChatType: TypeAlias = Literal["private", "group", "supergroup", "channel"]
MethodHandler: TypeAlias = Callable[[dict[str, Any]], Any]

# -- parameter decoding ---------------------------------------------------------------

INT_FIELDS = frozenset(
    {
        "message_id",
        "offset",
        "limit",
        "timeout",
        "reply_to_message_id",
        "message_thread_id",
        "user_id",
        "max_connections",
        "until_date",
        "cache_time",
        "direct_messages_topic_id",
    }
)
CHAT_ID_FIELDS = frozenset({"chat_id", "from_chat_id", "sender_chat_id"})
JSON_FIELDS = frozenset(
    {
        "reply_markup",
        "entities",
        "caption_entities",
        "reply_parameters",
        "link_preview_options",
        "commands",
        "scope",
        "allowed_updates",
        "media",
        "reaction",
        "menu_button",
        "results",
        "permissions",
        "rights",
        "message_ids",
        "options",
        "suggested_post_parameters",
    }
)
TEXT_FIELDS = frozenset(
    {
        "text",
        "caption",
        "title",
        "description",
        "short_description",
        "name",
        "query",
        "question",
        "explanation",
        "url",
        "secret_token",
        "parse_mode",
        "action",
        "language_code",
        "callback_query_id",
        "inline_message_id",
        "business_connection_id",
    }
)


def _to_int(value: str) -> int | str:
    try:
        return int(value)
    except ValueError:
        return value


def coerce_params(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Decode PTB's form encoding: ints, ``true``/``false`` and nested JSON fields."""
    params: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, str) and key not in TEXT_FIELDS:
            if key in CHAT_ID_FIELDS or key in INT_FIELDS:
                value = _to_int(value)
            elif key in JSON_FIELDS:
                with contextlib.suppress(json.JSONDecodeError):
                    value = json.loads(value)
            elif value in ("true", "false"):
                value = value == "true"
        params[key] = value
    return params


# -- entities and updates -------------------------------------------------------------

_COMMAND_RE = re.compile(r"^/[A-Za-z0-9_]{1,64}(?:@[A-Za-z0-9_]{3,32})?")
_MENTION_RE = re.compile(r"(?<![\w@/])@[A-Za-z0-9_]{3,32}")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit Telegram entity offsets use."""
    return len(text.encode("utf-16-le")) // 2


def auto_entities(text: str) -> list[dict[str, Any]]:
    """A bot_command entity for a leading ``/cmd[@bot]`` and mention entities for ``@name``."""
    entities: list[dict[str, Any]] = []
    command_end = 0
    match = _COMMAND_RE.match(text)
    if match:
        command_end = match.end()
        entities.append({"type": "bot_command", "offset": 0, "length": utf16_len(match.group())})
    for m in _MENTION_RE.finditer(text, command_end):
        entities.append(
            {
                "type": "mention",
                "offset": utf16_len(text[: m.start()]),
                "length": utf16_len(m.group()),
            }
        )
    return entities


def _user(user_id: int, first_name: str, username: str | None) -> dict[str, Any]:
    user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
    if username:
        user["username"] = username
    return user


def _infer_chat_type(chat_id: int) -> ChatType:
    return "private" if chat_id > 0 else "group"


def _chat(
    chat_id: int,
    chat_type: ChatType,
    *,
    first_name: str = "Test",
    username: str | None = None,
    title: str | None = None,
) -> dict[str, Any]:
    if chat_type == "private":
        chat: dict[str, Any] = {"id": chat_id, "type": "private", "first_name": first_name}
        if username:
            chat["username"] = username
        return chat
    chat = {"id": chat_id, "type": chat_type, "title": title or f"Test {chat_type} {chat_id}"}
    if chat_type == "supergroup":
        chat["is_forum"] = False
    return chat


def message_update(
    chat_id: int,
    text: str | None,
    *,
    user_id: int | None = None,
    update_id: int = 1,
    message_id: int = 1,
    chat_type: ChatType | None = None,
    username: str | None = None,
    first_name: str = "Test",
    reply_to_message: Mapping[str, Any] | None = None,
    entities: list[dict[str, Any]] | None = None,
    message_thread_id: int | None = None,
    chat_title: str | None = None,
    date: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Telegram Update dict carrying one message (no server needed).

    `chat_type` defaults to "private" for positive ids and "group" for negative ones;
    `user_id` defaults to `chat_id` in private chats and 1001 elsewhere; `entities`
    defaults to `auto_entities(text)` (pass ``[]`` for none). ``text=None`` leaves the
    text out (media, service messages); `extra` fields are merged into the message
    (``photo``, ``caption``, ``forward_origin``, ``migrate_to_chat_id`` ...).
    """
    kind = chat_type or _infer_chat_type(chat_id)
    uid = user_id if user_id is not None else (chat_id if kind == "private" else 1001)
    message: dict[str, Any] = {
        "message_id": message_id,
        "date": int(time.time()) if date is None else date,
        "chat": _chat(chat_id, kind, first_name=first_name, username=username, title=chat_title),
        "from": _user(uid, first_name, username),
    }
    if text is not None:
        message["text"] = text
        ents = auto_entities(text) if entities is None else entities
        if ents:
            message["entities"] = ents
    if extra:
        message.update(copy.deepcopy(dict(extra)))
    if reply_to_message is not None:
        parent = dict(reply_to_message)
        parent.pop("reply_to_message", None)  # Telegram nests only one level
        message["reply_to_message"] = parent
    if message_thread_id is not None:
        message["message_thread_id"] = message_thread_id
    return {"update_id": update_id, "message": message}


# -- the server -----------------------------------------------------------------------


class BotAPIError(Exception):
    """Raised by method implementations (and custom handlers) to answer ok=false."""

    def __init__(
        self, status: int, description: str, parameters: dict[str, Any] | None = None
    ) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


@dataclass(frozen=True)
class _Fault:
    kind: Literal["http", "drop"]
    status: int = 0
    description: str = ""
    retry_after: int | None = None


# Update types Telegram leaves out unless allowed_updates names them.
OPT_IN_UPDATES = frozenset({"chat_member", "message_reaction", "message_reaction_count"})

_TRUE_METHODS = (
    "sendChatAction",
    "close",
    "logOut",
    "answerCallbackQuery",
    "setMessageReaction",
    "setMyDescription",
    "setMyShortDescription",
    "setMyName",
    "setChatMenuButton",
)


class FakeBotAPI(LoopbackServer):
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
    ) -> None:
        super().__init__(port=port)
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
        self._calls: list[tuple[str, dict[str, Any]]] = []
        self._log: list[dict[str, Any]] = []
        self._faults: dict[str, deque[_Fault]] = {}
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
        for name in _TRUE_METHODS:
            self._methods[name] = _return_true
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
        }

    # -- feeding updates ------------------------------------------------------------

    def make_update(
        self,
        chat_id: int,
        text: str | None,
        *,
        user_id: int | None = None,
        chat_type: ChatType | None = None,
        username: str | None = None,
        first_name: str = "Test",
        reply_to_message: Mapping[str, Any] | int | None = None,
        entities: list[dict[str, Any]] | None = None,
        message_thread_id: int | None = None,
        chat_title: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Build (and remember, not queue) a message update with fresh ids.

        `reply_to_message` may be a Message dict or the id of a message in this chat
        (one the bot sent or one pushed earlier). For `process_update` feeding.
        """
        with self._lock:
            if isinstance(reply_to_message, int):
                key = (chat_id, reply_to_message)
                if key not in self._messages:
                    raise ValueError(f"no message {reply_to_message} in chat {chat_id} to reply to")
                reply_to_message = self._messages[key]
            known = self._chats.get(chat_id)
            kind: ChatType = chat_type or (known["type"] if known else _infer_chat_type(chat_id))
            update = message_update(
                chat_id,
                text,
                user_id=user_id,
                update_id=next(self._update_ids),
                message_id=self._next_message_id(chat_id),
                chat_type=kind,
                username=username,
                first_name=first_name,
                reply_to_message=reply_to_message,
                entities=entities,
                message_thread_id=message_thread_id,
                chat_title=chat_title,
                extra=extra,
            )
            message = update["message"]
            self._chats.setdefault(chat_id, message["chat"])
            self._messages[(chat_id, message["message_id"])] = message
            return copy.deepcopy(update)

    def push_message(
        self,
        chat_id: int,
        text: str | None,
        *,
        user_id: int | None = None,
        chat_type: ChatType | None = None,
        username: str | None = None,
        first_name: str = "Test",
        reply_to_message: Mapping[str, Any] | int | None = None,
        entities: list[dict[str, Any]] | None = None,
        message_thread_id: int | None = None,
        chat_title: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Queue a user's message for getUpdates; returns the Update dict.

        Defaults as in `message_update`: private chat for positive ids, group for
        negative ones, `user_id` = `chat_id` in private chats, automatic entities.
        """
        update = self.make_update(
            chat_id,
            text,
            user_id=user_id,
            chat_type=chat_type,
            username=username,
            first_name=first_name,
            reply_to_message=reply_to_message,
            entities=entities,
            message_thread_id=message_thread_id,
            chat_title=chat_title,
            extra=extra,
        )
        return self.push_update(update)

    def push_media(
        self,
        chat_id: int,
        kind: str,
        *,
        caption: str | None = None,
        file_name: str | None = None,
        content: bytes = b"\x89PNG fake bytes",
        mime_type: str | None = None,
        extra: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Queue a media message (``photo``, ``document``, ``voice``, ``sticker``, ``video``,
        ``video_note``, ``audio``, ``animation``) whose file `getFile` and the file route serve.

        `caption` gets automatic caption entities; `options` are those of `push_message`.
        """
        with self._lock:
            number = next(self._file_ids)
            file_id, unique = f"file-{number}", f"u{number}"
            path = f"{kind}s/file_{number}" + (f"_{file_name}" if file_name else "")
            self._files[file_id] = (content, path)
        base: dict[str, Any] = {"file_id": file_id, "file_unique_id": unique, "file_size": len(content)}
        media: Any
        if kind == "photo":
            media = [{**base, "width": 90, "height": 60}]
        elif kind == "sticker":
            media = {**base, "type": "regular", "width": 512, "height": 512, "is_animated": False, "is_video": False, "emoji": "😀"}
        elif kind in ("voice", "video_note"):
            media = {**base, "duration": 3, **({"length": 240} if kind == "video_note" else {})}
        elif kind in ("video", "animation"):
            media = {**base, "width": 320, "height": 240, "duration": 3}
        elif kind in ("document", "audio"):
            media = {**base, **({"duration": 3} if kind == "audio" else {})}
        else:
            raise ValueError(f"unknown media kind {kind!r}")
        if isinstance(media, dict):
            if file_name:
                media["file_name"] = file_name
            if mime_type:
                media["mime_type"] = mime_type
        fields: dict[str, Any] = {kind: media, **dict(extra or {})}
        if caption is not None:
            fields["caption"] = caption
            if auto_entities(caption):
                fields["caption_entities"] = auto_entities(caption)
        return self.push_message(chat_id, None, extra=fields, **options)

    def push_edit(self, chat_id: int, message_id: int, text: str) -> dict[str, Any]:
        """Queue an ``edited_message`` update: message `message_id` of the chat now reads `text`
        (its caption, for a media message)."""
        with self._lock:
            key = (chat_id, message_id)
            if key not in self._messages:
                raise ValueError(f"no message {message_id} in chat {chat_id} to edit")
            message = copy.deepcopy(self._messages[key])
            field, entities_field = ("caption", "caption_entities") if "caption" in message else ("text", "entities")
            message[field] = text
            message.pop(entities_field, None)
            if auto_entities(text):
                message[entities_field] = auto_entities(text)
            message["edit_date"] = int(time.time())
            self._messages[key] = message
        return self.push_update({"edited_message": message})

    def migrate_chat(self, old_chat_id: int, new_chat_id: int, *, notify: bool = True, user_id: int | None = None) -> None:
        """Upgrade group `old_chat_id` to supergroup `new_chat_id`, as Telegram does.

        From now on, sending to the old id answers 400 with ``migrate_to_chat_id`` (PTB
        raises ChatMigrated). With `notify`, the two service messages are queued: one in
        the old group (``migrate_to_chat_id``) and one in the new supergroup
        (``migrate_from_chat_id``).
        """
        with self._lock:
            self._migrated[old_chat_id] = new_chat_id
            title = self._chats.get(old_chat_id, {}).get("title")
            self._chats[new_chat_id] = _chat(new_chat_id, "supergroup", title=title)
        if notify:
            self.push_message(old_chat_id, None, user_id=user_id, extra={"migrate_to_chat_id": new_chat_id})
            self.push_message(new_chat_id, None, user_id=user_id, chat_type="supergroup", chat_title=title, extra={"migrate_from_chat_id": old_chat_id})

    def block(self, chat_id: int, blocked: bool = True) -> None:
        """The person blocked the bot (or it was removed from the group): sends to the chat
        answer 403 Forbidden until unblocked."""
        with self._lock:
            if blocked:
                self._blocked.add(chat_id)
            else:
                self._blocked.discard(chat_id)

    def set_member(self, chat_id: int, user_id: int, status: str) -> None:
        """What getChatMember answers for the user in the chat (default "member")."""
        if status not in ("creator", "administrator", "member", "restricted", "left", "kicked"):
            raise ValueError(f"unknown member status {status!r}")
        with self._lock:
            self._members[(chat_id, user_id)] = status

    def push_callback_query(
        self,
        chat_id: int,
        data: str,
        *,
        message_id: int | None = None,
        user_id: int | None = None,
        username: str | None = None,
        first_name: str = "Test",
    ) -> dict[str, Any]:
        """Queue a button press on a message (default: the bot's last message in the chat)."""
        with self._lock:
            if message_id is None:
                mine = [m for m in self._sent if m["chat_id"] == chat_id]
                if not mine:
                    raise ValueError(f"the bot sent nothing to chat {chat_id} to press a button on")
                message_id = mine[-1]["message_id"]
            message = self._messages.get((chat_id, message_id))
            if message is None:
                raise ValueError(f"no message {message_id} in chat {chat_id}")
            uid = user_id if user_id is not None else (chat_id if chat_id > 0 else 1001)
            update = {
                "update_id": next(self._update_ids),
                "callback_query": {
                    "id": str(next(self._callback_ids)),
                    "from": _user(uid, first_name, username),
                    "message": copy.deepcopy(message),
                    "chat_instance": str(chat_id),
                    "data": data,
                },
            }
        return self.push_update(update)

    def push_reaction(
        self,
        chat_id: int,
        message_id: int,
        emoji: str | list[str],
        *,
        user_id: int | None = None,
        first_name: str = "Test",
        username: str | None = None,
        old: list[str] | None = None,
    ) -> dict[str, Any]:
        """Queue a ``message_reaction`` update: a user's reaction(s) on a message changed to ``emoji``.

        ``old`` lists the emoji the user had on it before (Telegram sends both lists).
        """
        with self._lock:
            known = self._chats.get(chat_id)
            chat = known if known is not None else _chat(chat_id, _infer_chat_type(chat_id))
            uid = user_id if user_id is not None else (chat_id if chat["type"] == "private" else 1001)
            new = [emoji] if isinstance(emoji, str) else list(emoji)
            update = {
                "update_id": next(self._update_ids),
                "message_reaction": {
                    "chat": copy.deepcopy(chat),
                    "message_id": message_id,
                    "user": _user(uid, first_name, username),
                    "date": int(time.time()),
                    "old_reaction": [{"type": "emoji", "emoji": e} for e in old or []],
                    "new_reaction": [{"type": "emoji", "emoji": e} for e in new],
                },
            }
        return self.push_update(update)

    @property
    def allowed_updates(self) -> frozenset[str] | None:
        """The update types the last getUpdates asked for (None: never asked, Telegram's default)."""
        with self._lock:
            return self._allowed_updates

    def push_update(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue any Update dict (an ``update_id`` is assigned when missing)."""
        with self._cond:
            update = copy.deepcopy(update)
            if "update_id" not in update:
                update["update_id"] = next(self._update_ids)
            self._updates.append(update)
            self._cond.notify_all()
        self.wake()
        return update

    @property
    def pending_updates(self) -> int:
        """Queued updates not yet confirmed by a later getUpdates ``offset``."""
        with self._lock:
            return len(self._updates)

    @property
    def updates_consumed(self) -> bool:
        """True when every pushed update was confirmed (the poller has taken them all)."""
        return self.pending_updates == 0

    def wait_updates_consumed(self, timeout: float = 5.0) -> None:
        """Block until the poller confirmed every pushed update (not: handled them)."""
        with self._cond:
            if not self._cond.wait_for(lambda: not self._updates, timeout):
                ids = [u["update_id"] for u in self._updates]
                raise AssertionError(f"updates {ids} still pending after {timeout} s")

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

        def matching() -> list[dict[str, Any]]:
            return [m for m in self._sent if chat_id is None or m["chat_id"] == chat_id]

        with self._cond:
            if not self._cond.wait_for(lambda: len(matching()) >= count, timeout):
                got = [(m["chat_id"], m["text"]) for m in self._sent]
                where = "" if chat_id is None else f" to chat {chat_id}"
                raise AssertionError(
                    f"expected {count} sent messages{where} within {timeout} s; "
                    f"all sent so far: {got!r}"
                )
            return copy.deepcopy(matching())

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

    @property
    def log(self) -> list[dict[str, Any]]:
        """Every request: ``{"method", "token", "content_type", "params", "status"}``."""
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
            return copy.deepcopy(self._commands.get(_commands_key(scope, language_code), []))

    @property
    def webhook_url(self) -> str:
        """The URL set with setWebhook ("" when none)."""
        with self._lock:
            return str(self._webhook["url"])

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
        self._add_faults(method, _Fault("http", status, description, retry_after), times)

    def drop_next(self, method: str, *, times: int = 1) -> None:
        """Close the connection without answering the next `times` calls (-> NetworkError)."""
        self._add_faults(method, _Fault("drop"), times)

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
            self._calls.clear()
            self._log.clear()
            self._faults.clear()

    def _add_faults(self, method: str, fault: _Fault, times: int) -> None:
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
            return _fail(400, "Bad Request: can't parse JSON body")
        entry = {
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
            return _fail(401, "Unauthorized")
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
            return _fail(fault.status, fault.description, parameters)
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
            return _fail(exc.status, exc.description, exc.parameters)
        return web.json_response({"ok": True, "result": result})

    # -- method implementations (run in the server loop) -------------------------------

    def _drop_not_allowed(self) -> None:
        """Drop queued updates of types the bot did not ask for (Telegram never delivers them)."""
        allowed = self._allowed_updates

        def wanted(update: dict[str, Any]) -> bool:
            kind = next((key for key in update if key != "update_id"), "")
            return kind in allowed if allowed is not None else kind not in OPT_IN_UPDATES

        kept = [update for update in self._updates if wanted(update)]
        if len(kept) != len(self._updates):
            self._updates.clear()
            self._updates.extend(kept)

    def _next_message_id(self, chat_id: int) -> int:
        counter = self._message_ids.setdefault(chat_id, itertools.count(1))
        return next(counter)

    def _get_me(self, _params: dict[str, Any]) -> dict[str, Any]:
        return self.bot_user

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        limit = max(1, min(int(params.get("limit") or 100), 100))
        timeout = max(0.0, min(float(params.get("timeout") or 0), self.max_poll_timeout))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        assert self._update_event is not None
        if isinstance(params.get("allowed_updates"), list):
            with self._lock:  # Telegram remembers the list until a later call changes it
                self._allowed_updates = frozenset(params["allowed_updates"]) or None
        while True:
            with self._cond:
                self._drop_not_allowed()
                if offset > 0:
                    while self._updates and self._updates[0]["update_id"] < offset:
                        self._updates.popleft()
                elif offset < 0:
                    while len(self._updates) > -offset:
                        self._updates.popleft()
                self._cond.notify_all()
                batch = list(itertools.islice(self._updates, limit))
                if batch or self._closing:
                    return copy.deepcopy(batch)
                self._update_event.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._update_event.wait(), remaining)

    def _chat_for(self, chat_id: Any) -> dict[str, Any]:
        if not isinstance(chat_id, int):
            raise BotAPIError(400, "Bad Request: chat not found")
        chat = self._chats.get(chat_id)
        if chat is None:
            chat = _chat(chat_id, _infer_chat_type(chat_id))
            self._chats[chat_id] = chat
        return chat

    def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise BotAPIError(400, "Bad Request: message text is empty")
        if utf16_len(text) > 4096:
            raise BotAPIError(400, "Bad Request: message is too long")
        with self._cond:
            chat = self._chat_for(params.get("chat_id"))
            chat_id = chat["id"]
            if chat_id in self._blocked:
                raise BotAPIError(403, "Forbidden: bot was blocked by the user" if chat_id > 0 else "Forbidden: bot was kicked from the group chat")
            if chat_id in self._migrated:
                raise BotAPIError(
                    400, "Bad Request: group chat was upgraded to a supergroup chat", {"migrate_to_chat_id": self._migrated[chat_id]}
                )
            reply_params = params.get("reply_parameters")
            reply_to = params.get("reply_to_message_id")
            if isinstance(reply_params, dict) and reply_params.get("message_id") is not None:
                reply_to = int(reply_params["message_id"])
            message: dict[str, Any] = {
                "message_id": self._next_message_id(chat_id),
                "date": int(time.time()),
                "chat": chat,
                "from": self.bot_user,
                "text": text,
            }
            if params.get("entities"):
                message["entities"] = params["entities"]
            if params.get("message_thread_id") is not None:
                message["message_thread_id"] = params["message_thread_id"]
            if reply_to is not None:
                parent = self._messages.get((chat_id, reply_to))
                # Lenient where Telegram is not: an unknown parent (e.g. an update built
                # with message_update() and fed via process_update) is just left out.
                if parent is not None:
                    parent = dict(parent)
                    parent.pop("reply_to_message", None)
                    message["reply_to_message"] = parent
            markup = params.get("reply_markup")
            if isinstance(markup, dict) and "inline_keyboard" in markup:
                message["reply_markup"] = markup
            self._messages[(chat_id, message["message_id"])] = message
            self._sent.append(
                {
                    "chat_id": chat_id,
                    "text": text,
                    "parse_mode": params.get("parse_mode"),
                    "reply_to": reply_to,
                    "reply_markup": markup,
                    "entities": params.get("entities"),
                    "message_thread_id": params.get("message_thread_id"),
                    "message_id": message["message_id"],
                    "params": params,
                }
            )
            self._cond.notify_all()
            return copy.deepcopy(message)

    def _edit_message_text(self, params: dict[str, Any]) -> dict[str, Any] | bool:
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise BotAPIError(400, "Bad Request: message text is empty")
        if params.get("inline_message_id"):
            return True
        with self._lock:
            key = (params.get("chat_id"), params.get("message_id"))
            message = self._messages.get(key)  # type: ignore[arg-type]
            if message is None:
                raise BotAPIError(400, "Bad Request: message to edit not found")
            markup = params.get("reply_markup")
            if message.get("text") == text and markup == message.get("reply_markup"):
                raise BotAPIError(
                    400,
                    "Bad Request: message is not modified: specified new message content and "
                    "reply markup are exactly the same as a current content and reply markup "
                    "of the message",
                )
            message["text"] = text
            message["edit_date"] = int(time.time())
            if params.get("entities"):
                message["entities"] = params["entities"]
            else:
                message.pop("entities", None)
            if isinstance(markup, dict) and "inline_keyboard" in markup:
                message["reply_markup"] = markup
            else:
                message.pop("reply_markup", None)
            return copy.deepcopy(message)

    def _delete_message(self, params: dict[str, Any]) -> bool:
        with self._lock:
            key = (params.get("chat_id"), params.get("message_id"))
            if self._messages.pop(key, None) is None:  # type: ignore[arg-type]
                raise BotAPIError(400, "Bad Request: message to delete not found")
            return True

    def _set_my_commands(self, params: dict[str, Any]) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list):
            raise BotAPIError(400, 'Bad Request: parameter "commands" is required')
        with self._lock:
            key = _commands_key(params.get("scope"), params.get("language_code", ""))
            self._commands[key] = commands
        return True

    def _get_my_commands(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        with self._lock:
            key = _commands_key(params.get("scope"), params.get("language_code", ""))
            return copy.deepcopy(self._commands.get(key, []))

    def _delete_my_commands(self, params: dict[str, Any]) -> bool:
        with self._lock:
            key = _commands_key(params.get("scope"), params.get("language_code", ""))
            self._commands.pop(key, None)
        return True

    def _set_webhook(self, params: dict[str, Any]) -> bool:
        url = params.get("url")
        if not isinstance(url, str):
            raise BotAPIError(400, "Bad Request: bad webhook: URL is required")
        with self._lock:
            self._webhook = {"url": url}
            if params.get("drop_pending_updates"):
                self._updates.clear()
        return True

    def _delete_webhook(self, params: dict[str, Any]) -> bool:
        with self._cond:
            self._webhook = {"url": ""}
            if params.get("drop_pending_updates"):
                self._updates.clear()
                self._cond.notify_all()
        return True

    def _get_webhook_info(self, _params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return {
                "url": self._webhook["url"],
                "has_custom_certificate": False,
                "pending_update_count": len(self._updates),
            }

    def _get_chat(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            chat = dict(self._chat_for(params.get("chat_id")))
        chat.setdefault("accent_color_id", 0)
        chat.setdefault("max_reaction_count", 11)
        return chat


    def _get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            found = self._files.get(str(params.get("file_id")))
        if found is None:
            raise BotAPIError(400, "Bad Request: invalid file_id")
        content, path = found
        return {"file_id": params["file_id"], "file_unique_id": "u" + str(params["file_id"]), "file_size": len(content), "file_path": path}

    def _get_chat_member(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id, user_id = params.get("chat_id"), params.get("user_id")
        with self._lock:
            self._chat_for(chat_id)
            status = self._members.get((chat_id, user_id), "member")  # type: ignore[arg-type]
        user = _user(int(user_id), "Member", None) if isinstance(user_id, int) else None
        if user is None:
            raise BotAPIError(400, "Bad Request: invalid user_id specified")
        member: dict[str, Any] = {"status": status, "user": user}
        if status == "creator":
            member["is_anonymous"] = False
        elif status == "administrator":
            member.update(
                dict.fromkeys(
                    (
                        "can_be_edited", "is_anonymous", "can_manage_chat", "can_delete_messages", "can_manage_video_chats",
                        "can_restrict_members", "can_promote_members", "can_change_info", "can_invite_users",
                        "can_post_stories", "can_edit_stories", "can_delete_stories",
                    ),
                    False,
                )
            )
            member["can_manage_chat"] = True
        elif status == "restricted":
            raise BotAPIError(400, "Bad Request: restricted members are not simulated")
        elif status == "kicked":
            member["until_date"] = 0
        return member


def _return_true(_params: dict[str, Any]) -> bool:
    return True


def _commands_key(scope: Any, language_code: Any) -> str:
    scope = scope or {"type": "default"}
    return json.dumps([scope, language_code or ""], sort_keys=True)


def _fail(status: int, description: str, parameters: dict[str, Any] | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=status)

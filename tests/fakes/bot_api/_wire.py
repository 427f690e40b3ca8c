"""The Bot API's wire format as PTB 22 speaks it: form parameters decoded, and the Update dicts Telegram sends."""

from __future__ import annotations

import contextlib
import copy
import json
import re
import time
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

__all__ = ["ChatType", "auto_entities", "coerce_params", "message_update", "utf16_len"]

ChatType: TypeAlias = Literal["private", "group", "supergroup", "channel"]

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
        "draft_id",
        "icon_color",
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
        "icon_custom_emoji_id",
        "data",
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


def user_dict(user_id: int, first_name: str, username: str | None) -> dict[str, Any]:
    user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
    if username:
        user["username"] = username
    return user


def infer_chat_type(chat_id: int) -> ChatType:
    return "private" if chat_id > 0 else "group"


def chat_dict(
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
    kind = chat_type or infer_chat_type(chat_id)
    uid = user_id if user_id is not None else (chat_id if kind == "private" else 1001)
    message: dict[str, Any] = {
        "message_id": message_id,
        "date": int(time.time()) if date is None else date,
        "chat": chat_dict(chat_id, kind, first_name=first_name, username=username, title=chat_title),
        "from": user_dict(uid, first_name, username),
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

"""The Bot API methods the fake implements, run in the server's event loop.

A mixin of :class:`~tests.fakes.bot_api.FakeBotAPI`: the state it reads and writes (chats,
messages, updates, files, members...) is made in ``FakeBotAPI.__init__``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web

from tests.fakes.bot_api._wire import chat_dict, infer_chat_type, user_dict, utf16_len

__all__ = ["OPT_IN_UPDATES", "TRUE_METHODS", "BotAPIError", "BotMethods", "Fault", "commands_key", "fail", "return_true"]


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
class Fault:
    kind: Literal["http", "drop"]
    status: int = 0
    description: str = ""
    retry_after: int | None = None


# Update types Telegram leaves out unless allowed_updates names them.
OPT_IN_UPDATES = frozenset({"chat_member", "message_reaction", "message_reaction_count"})

TRUE_METHODS = (
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



class BotMethods:
    """getMe, getUpdates, sendMessage, editMessageText ... as Telegram answers them."""

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
            chat = chat_dict(chat_id, infer_chat_type(chat_id))
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

    def _edit_message_reply_markup(self, params: dict[str, Any]) -> dict[str, Any] | bool:
        if params.get("inline_message_id"):
            return True
        with self._lock:
            message = self._messages.get((params.get("chat_id"), params.get("message_id")))  # type: ignore[arg-type]
            if message is None:
                raise BotAPIError(400, "Bad Request: message to edit not found")
            markup = params.get("reply_markup")
            if markup == message.get("reply_markup") or (not markup and "reply_markup" not in message):
                raise BotAPIError(400, "Bad Request: message is not modified")
            if isinstance(markup, dict) and "inline_keyboard" in markup:
                message["reply_markup"] = markup
            else:
                message.pop("reply_markup", None)
            message["edit_date"] = int(time.time())
            return copy.deepcopy(message)

    def _create_forum_topic(self, params: dict[str, Any]) -> dict[str, Any]:
        """A topic in a private chat (the bot has topic mode) or a forum supergroup."""
        chat_id, name = params.get("chat_id"), params.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= 128:
            raise BotAPIError(400, "Bad Request: topic name must be 1-128 characters")
        with self._cond:
            chat = self._chat_for(chat_id)
            private = chat["type"] == "private"
            if (private and not self.topics) or (not private and not chat.get("is_forum")):
                raise BotAPIError(400, "Bad Request: the chat is not a forum")
            thread = next(self._topic_ids)
            self._topics.setdefault(chat["id"], {})[thread] = name
            self._cond.notify_all()
        return {"message_thread_id": thread, "name": name, "icon_color": int(params.get("icon_color") or 7322096)}

    def _send_message_draft(self, params: dict[str, Any]) -> bool:
        """A private chat's draft being streamed (Bot API 9.3): recorded, never stored as a message."""
        chat_id, draft_id, text = params.get("chat_id"), params.get("draft_id"), params.get("text", "")
        if not isinstance(chat_id, int) or chat_id <= 0:
            raise BotAPIError(400, "Bad Request: drafts can be sent only to private chats")
        if not isinstance(draft_id, int) or draft_id == 0:
            raise BotAPIError(400, "Bad Request: draft_id must be non-zero")
        if not isinstance(text, str) or utf16_len(text) > 4096:
            raise BotAPIError(400, "Bad Request: text is too long")
        with self._cond:
            self._drafts.append({"chat_id": chat_id, "draft_id": draft_id, "text": text, "message_thread_id": params.get("message_thread_id")})
            self._cond.notify_all()
        return True

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
            key = commands_key(params.get("scope"), params.get("language_code", ""))
            self._commands[key] = commands
        return True

    def _get_my_commands(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        with self._lock:
            key = commands_key(params.get("scope"), params.get("language_code", ""))
            return copy.deepcopy(self._commands.get(key, []))

    def _delete_my_commands(self, params: dict[str, Any]) -> bool:
        with self._lock:
            key = commands_key(params.get("scope"), params.get("language_code", ""))
            self._commands.pop(key, None)
        return True

    def _set_webhook(self, params: dict[str, Any]) -> bool:
        url = params.get("url")
        if not isinstance(url, str):
            raise BotAPIError(400, "Bad Request: bad webhook: URL is required")
        secret = params.get("secret_token")
        if secret is not None and not (isinstance(secret, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,256}", secret)):
            raise BotAPIError(400, "Bad Request: secret token contains unallowed characters")
        with self._lock:
            self._webhook = {"url": url, "secret_token": secret}
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
        user = user_dict(int(user_id), "Member", None) if isinstance(user_id, int) else None
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


def return_true(_params: dict[str, Any]) -> bool:
    return True


def commands_key(scope: Any, language_code: Any) -> str:
    scope = scope or {"type": "default"}
    return json.dumps([scope, language_code or ""], sort_keys=True)


def fail(status: int, description: str, parameters: dict[str, Any] | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=status)

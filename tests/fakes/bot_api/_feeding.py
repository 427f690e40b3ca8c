"""Feeding the fake: the messages, media, edits, button presses and reactions a person sends.

A mixin of :class:`~tests.fakes.bot_api.FakeBotAPI`: the state it reads and writes is made
in ``FakeBotAPI.__init__``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from typing import Any

from tests.fakes.bot_api._wire import (
    ChatType,
    auto_entities,
    chat_dict,
    infer_chat_type,
    message_update,
    user_dict,
)

__all__ = ["UpdateFeeder"]


class UpdateFeeder:
    """``push_message``, ``push_media``, ``push_edit``, ``push_callback_query``, ``push_reaction``..."""

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
            kind: ChatType = chat_type or (known["type"] if known else infer_chat_type(chat_id))
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
            self._chats[new_chat_id] = chat_dict(new_chat_id, "supergroup", title=title)
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
                    "from": user_dict(uid, first_name, username),
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
            chat = known if known is not None else chat_dict(chat_id, infer_chat_type(chat_id))
            uid = user_id if user_id is not None else (chat_id if chat["type"] == "private" else 1001)
            new = [emoji] if isinstance(emoji, str) else list(emoji)
            update = {
                "update_id": next(self._update_ids),
                "message_reaction": {
                    "chat": copy.deepcopy(chat),
                    "message_id": message_id,
                    "user": user_dict(uid, first_name, username),
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

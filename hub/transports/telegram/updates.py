"""The updates that are not new messages: edits, reactions, a group becoming a supergroup, errors.

* an edit updates the stored text and its search index (no new answer);
* a 👍 or 👎 (and the like) on one of the bot's replies is feedback for the agent that
  wrote it, learnt into a lesson in the background; it is never answered. Telegram sends
  reactions only when ``allowed_updates`` asks for ``message_reaction``, and in groups only
  to a bot that is an administrator;
* a group that becomes a supergroup takes its memory along (:meth:`.bot.TelegramBot.migrate`);
* an update python-telegram-bot could not read (:mod:`.guard`) is kept with its reason
  for the operator (``rejected_updates``; only the reason when its sender is not allowed)
  and skipped, with one log line;
* the one error handler logs, and apologises to someone who is owed an answer.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from telegram import ReactionType, ReactionTypeEmoji, Update
from telegram.error import Conflict, NetworkError
from telegram.ext import ContextTypes

from scopehub.hub.lessons import reaction_signal
from scopehub.hub.transports.telegram.delivery import scope_for
from scopehub.hub.transports.telegram.guard import body_text, describe_unreadable
from scopehub.hub.transports.telegram.inbox import ReplyOwed, message_body
from scopehub.hub.transports.telegram.media import describe_media
from scopehub.hub.transports.telegram.texts import APOLOGY, APOLOGY_SAVED
from scopehub.memory import record_rejected_update

if TYPE_CHECKING:
    from scopehub.hub.transports.telegram.bot import TelegramBot

__all__ = ["ChatUpdates"]

log = logging.getLogger(__name__)


class ChatUpdates:
    """Edits, reactions, migrations and errors for one :class:`~.bot.TelegramBot`."""

    def __init__(self, transport: TelegramBot) -> None:
        self.transport = transport
        self._conflict_logged = False  # "another process is polling" said once

    @property
    def hub(self) -> Any:
        return self.transport.hub

    async def on_edit(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """An edited message: its stored text and search index follow; its route stays; no new answer."""
        message, chat, user = update.edited_message, update.effective_chat, update.effective_user
        if message is None or chat is None or (message.text is None and message.caption is None):
            return
        user_id = user.id if user else None
        if not self.transport.allowed(user_id, chat.id):
            return
        addressed, text = self.transport.inbox.addressing(message, context.bot)
        if addressed is None or not text.strip():
            return
        scope = scope_for(chat.type, chat.id, user_id)
        stored = self.hub.store.find_ext(scope, f"{chat.id}:{message.message_id}")
        if stored is None:
            return  # never stored (sent before the bot was here): nothing to correct
        text = message_body(message, describe_media(message), text, kept="; kept in this chat's notes]" in stored.text)
        async with self.hub.lock_for(scope):
            self.hub.store.edit_text(scope, stored.id, text)
        log.info("message %s of %s edited", stored.id, scope)

    async def on_reaction(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A reaction on one of the bot's replies: feedback for the agent that wrote it, never answered."""
        reaction = update.message_reaction
        if reaction is None:
            return
        chat, user = reaction.chat, reaction.user
        user_id = user.id if user else None
        if not self.transport.allowed(user_id, chat.id):
            return  # silently: a reaction gets nothing back, not even the refusal
        scope = scope_for(chat.type, chat.id, user_id)
        ext_id = self.transport.inbox.reply_target(scope, chat.id, reaction.message_id, None, chunk_span=True)
        message = self.hub.store.find_ext(scope, ext_id)
        if message is None or message.role != "agent":
            return  # a reaction on the person's own message, or on something we do not keep
        before = {_emoji(r) for r in reaction.old_reaction}
        recorded = False
        for emoji in dict.fromkeys(_emoji(r) for r in reaction.new_reaction):
            signal = reaction_signal(emoji) if emoji and emoji not in before else None
            if signal is None:
                continue
            # Keyed by who reacted with what: a redelivered update, or the same reaction
            # taken back and given again, teaches once.
            key = f"reaction:{ext_id}:{user_id or (reaction.actor_chat.id if reaction.actor_chat else '')}:{emoji}"
            if self.hub.feedback_on(scope, message, emoji, source="reaction", signal=signal, key=key) is not None:
                recorded = True
        if recorded:
            self.hub.schedule_learning(scope)

    async def on_unreadable(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """An update that could not be read: kept for the operator, skipped; the others go on."""
        reason, body = describe_unreadable(update)
        chat, user = _sender_of(body)
        allowed = chat is not None and self.transport.allowed(user, chat[0])
        scope = scope_for(chat[1], chat[0], user) if chat is not None and allowed else None
        where = f" in chat {chat[0]}" if chat is not None else ""
        log.warning("update %s%s could not be read (%s); kept in rejected_updates and skipped", update.update_id, where, reason)
        try:
            record_rejected_update(
                self.hub.store,
                update_id=update.update_id,
                scope=scope,
                reason=reason,
                body=body_text(body) if allowed else "",  # nothing of a stranger's is kept
                now=self.hub.deps.clock(),
            )
        except Exception as exc:  # the log line above is the record then
            log.warning("update %s not kept (%s)", update.update_id, exc)

    async def on_migrate(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A group became a supergroup: Telegram says so in both chats; either notice moves the memory."""
        message, chat = update.effective_message, update.effective_chat
        if message is None or chat is None:
            return
        if message.migrate_to_chat_id:
            await self.transport.migrate(chat.id, int(message.migrate_to_chat_id))
        elif message.migrate_from_chat_id:
            await self.transport.migrate(int(message.migrate_from_chat_id), chat.id)

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """The one error handler: log with the traceback, never show it in a chat."""
        error = context.error
        if update is None and isinstance(error, Conflict):
            # Polling retries on its own, with growing pauses: one clear line, not a traceback each time.
            if not self._conflict_logged:
                self._conflict_logged = True
                log.warning("another process is polling with this token (409 Conflict); retrying quietly until it stops")
            else:
                log.debug("still in conflict with another poller: %s", error)
            return
        if update is None and isinstance(error, NetworkError):
            log.warning("Telegram connection problem: %s", error)  # polling retries on its own
            return
        where = ""
        if isinstance(update, Update):
            chat = update.effective_chat
            where = f" (update {update.update_id}, chat {chat.id if chat else '?'})"
        log.error("error while handling an update%s", where, exc_info=error)
        if isinstance(error, ReplyOwed):
            await self.transport.outbox.send_text(
                context.bot, error.chat_id, APOLOGY_SAVED if error.saved else APOLOGY, thread_id=error.thread_id, what="apology"
            )

    def note_conflict_over(self) -> None:
        """Updates arrive again: the other poller (409) is gone."""
        if self._conflict_logged:
            self._conflict_logged = False
            log.info("updates arrive again: the other poller is gone")


def _sender_of(body: dict[str, Any]) -> tuple[tuple[int, str] | None, int | None]:
    """``((chat id, chat type), sender id)`` of a raw update, as far as it says (None where it does not)."""
    for value in body.values():
        if not isinstance(value, dict):
            continue
        holder = value.get("message") if isinstance(value.get("message"), dict) else value
        chat = holder.get("chat")
        sender = value.get("from") or value.get("user") or holder.get("from")
        user = sender.get("id") if isinstance(sender, dict) and isinstance(sender.get("id"), int) else None
        if isinstance(chat, dict) and isinstance(chat.get("id"), int):
            return (chat["id"], str(chat.get("type", "group"))), user
        if user is not None:
            return None, user
    return None, None


def _emoji(reaction: ReactionType) -> str:
    """The emoji of a reaction ("" for custom emoji and paid stars, which say nothing we can read)."""
    return reaction.emoji if isinstance(reaction, ReactionTypeEmoji) else ""

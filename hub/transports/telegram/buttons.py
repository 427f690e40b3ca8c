"""Inline keyboards and the button presses they bring, each checked and answered.

Keyboards: the confirmation of ``/forget all`` ([Erase everything] [Cancel]); [Yes] [No]
under an agent's yes-or-no question ("Should I cancel reminder #2?", "Did you mean task
#3?"); and ``/settings``' agent and language buttons.

A press (a ``callback_query``) is always answered (the person's spinner stops, with a
word when nothing happens), and checked first: against the chat (the keyboard's own
message, in a chat the allowlist lets in) and the user (a confirmation only by whoever
asked for it, a question's answer only by whoever asked the question, a group's settings
only by its administrators). A confirmation lasts as long as its claim (60 s, every
worker sees it). What a press does goes the way a typed message goes: ``/forget all``
and "yes" are stored and answered in the scope's turn, in order with everything else.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from telegram import (
    Bot,
    CallbackQuery,
    Chat,
    InlineKeyboardMarkup,
    Message,
    Update,
    User,
)
from telegram.constants import ChatType
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from scopehub.hub.commands import LANGUAGES, format_settings
from scopehub.hub.orchestrator import Inbound, Reply
from scopehub.hub.transports.telegram.delivery import scope_for
from scopehub.hub.transports.telegram.groups import ADMIN_COMMANDS, FORGET_CONFIRM_KEY
from scopehub.hub.transports.telegram.inbox import INTAKE
from scopehub.hub.transports.telegram.keyboards import (
    ANSWER,
    FORGET,
    SETTING,
    asks_yes_no,
    settings_keyboard,
    yes_no_keyboard,
)
from scopehub.hub.transports.telegram.texts import ADMIN_UNKNOWN, NOT_ADMIN_FOR
from scopehub.memory import chat_settings, get_claim, release_claim, update_chat_settings

if TYPE_CHECKING:
    from scopehub.hub.transports.telegram.bot import TelegramBot

__all__ = ["Buttons"]

log = logging.getLogger(__name__)

STALE = "This button no longer works."
NOT_YOURS = "Only the person who asked can answer this."
EXPIRED = "This confirmation ran out; send /forget all again."


class Buttons:
    """The keyboards of one :class:`~.bot.TelegramBot`, and its ``callback_query`` handler."""

    def __init__(self, transport: TelegramBot) -> None:
        self.transport = transport

    @property
    def hub(self) -> Any:
        return self.transport.hub

    def markup_for(self, message: Any, reply: Reply, *, chunks: int) -> InlineKeyboardMarkup | None:
        """The keyboard under a reply to stored ``message``: settings for /settings, [Yes] [No]
        under an agent's yes-or-no question (in a group only on a one-message reply, which
        quotes the question's asker: the press is checked against it)."""
        if reply.kind == "command" and message.text.strip().split(None, 1)[0].split("@")[0].lower() == "/settings":
            if len(message.text.split()) == 1:
                return settings_keyboard(self.hub, message.scope)
            return None
        if reply.kind != "agent" or not asks_yes_no(reply.text):
            return None
        private = message.scope.startswith("user:")
        if not private and chunks > 1:
            return None
        return yes_no_keyboard(int(message.scope.split(":", 1)[1]) if private else 0)

    # -- presses --------------------------------------------------------------------------
    async def on_press(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A button press: checked against the chat and the user, then done; always answered."""
        query = update.callback_query
        if query is None:
            return
        answered = False

        async def answer(text: str | None = None, *, alert: bool = False) -> None:
            nonlocal answered
            if answered:
                return
            answered = True
            try:
                await query.answer(text, show_alert=alert)
            except TelegramError as exc:
                log.info("could not answer the button press %s: %s", query.id, exc)

        try:
            message, user = query.message, query.from_user
            if not isinstance(message, Message) or user is None:
                await answer(STALE)
                return
            chat = message.chat
            if chat.type not in (ChatType.PRIVATE, ChatType.GROUP, ChatType.SUPERGROUP) or not self.transport.allowed(user.id, chat.id):
                await answer("This bot is private.", alert=True)
                return
            if message.from_user is not None and message.from_user.id != context.bot.id:
                await answer(STALE)
                return
            kind, _, rest = (query.data or "").partition(":")
            if kind == FORGET:
                await self._forget_all(context.bot, query, message, chat, user, rest, answer)
            elif kind == ANSWER:
                await self._yes_no(context.bot, query, message, chat, user, rest, answer)
            elif kind == SETTING:
                await self._setting(context.bot, message, chat, user, rest, answer)
            else:
                await answer(STALE)
        finally:
            await answer()

    async def _forget_all(self, bot: Bot, query: CallbackQuery, message: Message, chat: Chat, user: User, rest: str, answer: Any) -> None:
        choice, _, whose = rest.partition(":")
        if not whose.isdigit() or (int(whose) != user.id and int(whose) != 0):
            await answer("Only the person who asked for this can confirm it.", alert=True)
            return
        scope = scope_for(chat.type, chat.id, user.id)
        holder = f"forget-all:{int(whose) or 'anonymous'}"
        pending = get_claim(self.hub.store, scope, FORGET_CONFIRM_KEY, now=self.hub.deps.clock())
        if pending is None or pending.holder != holder:
            await answer(EXPIRED, alert=True)
            await self._drop_keyboard(bot, message, suffix="(This confirmation ran out: nothing was erased.)")
            return
        if choice != "yes":
            release_claim(self.hub.store, scope, FORGET_CONFIRM_KEY, holder)
            await answer("Cancelled")
            await self._drop_keyboard(bot, message, suffix="Cancelled: nothing was erased.")
            return
        if chat.type != ChatType.PRIVATE:
            admin = await self.transport.groups.is_admin(bot, chat, user, None)
            if not admin:
                await answer(ADMIN_UNKNOWN if admin is None else NOT_ADMIN_FOR.format(what=ADMIN_COMMANDS["forget"]), alert=True)
                return
        release_claim(self.hub.store, scope, FORGET_CONFIRM_KEY, holder)
        await answer("Erasing…")
        await self._drop_keyboard(bot, message, suffix=f"Confirmed by {user.full_name}.")
        await self._as_message(query, chat, user, "/forget all", reply_to_ext=None)

    async def _yes_no(self, bot: Bot, query: CallbackQuery, message: Message, chat: Chat, user: User, rest: str, answer: Any) -> None:
        choice, _, whose = rest.partition(":")
        asker = int(whose) if whose.isdigit() else 0
        if not asker and message.reply_to_message is not None and message.reply_to_message.from_user is not None:
            asker = message.reply_to_message.from_user.id  # in a group the reply quotes who asked
        if chat.type != ChatType.PRIVATE and (not asker or asker != user.id):
            await answer(NOT_YOURS, alert=True)
            return
        word = "yes" if choice == "y" else "no"
        await answer(word.capitalize())
        await self._drop_keyboard(bot, message, suffix=None)
        scope = scope_for(chat.type, chat.id, user.id)
        reply_to_ext = self.transport.inbox.reply_target(scope, chat.id, message.message_id, message.text)
        await self._as_message(query, chat, user, word, reply_to_ext=reply_to_ext)

    async def _setting(self, bot: Bot, message: Message, chat: Chat, user: User, rest: str, answer: Any) -> None:
        if chat.type != ChatType.PRIVATE:
            admin = await self.transport.groups.is_admin(bot, chat, user, None)
            if not admin:
                await answer(ADMIN_UNKNOWN if admin is None else NOT_ADMIN_FOR.format(what=ADMIN_COMMANDS["settings"]), alert=True)
                return
        scope = scope_for(chat.type, chat.id, user.id)
        what, _, value = rest.partition(":")
        now = self.hub.deps.clock()
        names = self.hub.registry.names
        if what == "a" and value in self.hub.registry:
            current = chat_settings(self.hub.store, scope).agents or names
            chosen = [name for name in names if (name in current) != (name == value)]
            if not chosen:
                await answer("At least one agent must answer here.", alert=True)
                return
            update_chat_settings(self.hub.store, scope, agents=None if len(chosen) == len(names) else chosen, now=now)
        elif what == "l" and (value in LANGUAGES or value == "-"):
            update_chat_settings(self.hub.store, scope, language=LANGUAGES.get(value), now=now)
        else:
            await answer(STALE)
            return
        await answer("Saved")
        try:
            await bot.edit_message_text(
                format_settings(self.hub, scope), chat_id=chat.id, message_id=message.message_id, reply_markup=settings_keyboard(self.hub, scope)
            )
        except TelegramError as exc:
            log.info("settings message %s in %s not refreshed: %s", message.message_id, chat.id, exc)

    async def _drop_keyboard(self, bot: Bot, message: Message, *, suffix: str | None) -> None:
        """Take the buttons off (a press counts once), saying what came of it."""
        try:
            if suffix:
                await bot.edit_message_text(f"{message.text}\n\n{suffix}", chat_id=message.chat.id, message_id=message.message_id)
            else:
                await bot.edit_message_reply_markup(chat_id=message.chat.id, message_id=message.message_id, reply_markup=None)
        except TelegramError as exc:
            log.info("buttons of message %s in %s not removed: %s", message.message_id, message.chat.id, exc)

    async def _as_message(self, query: CallbackQuery, chat: Chat, user: User, text: str, *, reply_to_ext: str | None) -> None:
        """What the press said, as if typed: stored, then answered in the scope's turn."""
        scope = scope_for(chat.type, chat.id, user.id)
        inbound = Inbound(
            scope=scope,
            text=text,
            chat=str(chat.id),
            sender=user.full_name or user.username or str(user.id),
            ext_id=f"{chat.id}:button:{query.id}",
            reply_to_ext=reply_to_ext,
        )
        stored = self.transport.inbox.accept(inbound)
        if stored is None:
            return
        answers = self.transport.answers
        if INTAKE.get() is not None:
            answers.start_turn(scope)
        else:
            await answers.turns.run(scope)

"""Groups: who administers one (getChatMember), and what only an administrator may do.

A group's memory and settings are everyone's: every command that erases or changes them
(``/forget <fact>``, ``/forget all``, a ``/settings`` change) needs an administrator (or
the group's anonymous admin identity). ``/forget all`` needs a confirmation everywhere,
with a button or by sending it again.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from telegram import Bot, Chat, InlineKeyboardMarkup, Message, User
from telegram.constants import ChatMemberStatus, ChatType
from telegram.error import TelegramError

from scopehub.hub.transports.telegram.delivery import call_with_retry, scope_for
from scopehub.hub.transports.telegram.keyboards import forget_all_keyboard
from scopehub.hub.transports.telegram.texts import (
    ADMIN_UNKNOWN,
    CONFIRM_FORGET_ALL,
    CONFIRM_FORGET_ALL_PRIVATE,
    NOT_ADMIN,
    NOT_ADMIN_FOR,
)
from scopehub.memory import acquire_claim, get_claim, release_claim

if TYPE_CHECKING:
    from scopehub.hub.transports.telegram.bot import TelegramBot

__all__ = ["ADMIN_COMMANDS", "FORGET_ALL_RE", "FORGET_CONFIRM_KEY", "FORGET_CONFIRM_SECONDS", "GroupGuard", "admin_command"]

log = logging.getLogger(__name__)

FORGET_CONFIRM_SECONDS = 60.0
FORGET_CONFIRM_KEY = "forget-all:confirm"  # the pending confirmation, a claim: every worker sees it
FORGET_ALL_RE = re.compile(r"^/forget(?:@\w+)?\s+all\s*$", re.IGNORECASE)
_COMMAND_RE = re.compile(r"^/([A-Za-z_]+)(?:@\w+)?(?:\s+(.*))?$", re.DOTALL)
# Group commands that erase or change what every member shares, when given an argument
# (without one they only show or explain), and what they would do, for the refusal.
ADMIN_COMMANDS: dict[str, str] = {"forget": "erase what I keep about this group", "settings": "change this group's settings"}


def admin_command(text: str) -> str | None:
    """The name of the admin-only command ``text`` is (``/forget 3``, ``/settings timezone ...``), else None."""
    match = _COMMAND_RE.match(text.strip())
    if match is None:
        return None
    name = match.group(1).lower()
    return name if name in ADMIN_COMMANDS and (match.group(2) or "").strip() else None


class GroupGuard:
    """Administrator checks for the group commands that erase or change what everyone shares."""

    def __init__(self, transport: TelegramBot) -> None:
        self.transport = transport

    @staticmethod
    def may_hold(text: str, private: bool) -> bool:
        """Whether :meth:`guard` may hold this text back (False: it lets it go on unread)."""
        return FORGET_ALL_RE.match(text.strip()) is not None or (not private and admin_command(text) is not None)

    async def guard(
        self, bot: Bot, chat: Chat, user: User | None, message: Message, text: str
    ) -> tuple[str, InlineKeyboardMarkup | None] | None:
        """None when this message may go on; else what to answer, and its buttons (nothing is erased or changed).

        ``/forget all`` needs a confirmation everywhere (:meth:`guard_forget_all`); in a
        group every admin-only command (:data:`ADMIN_COMMANDS`) needs an administrator.
        """
        private = chat.type == ChatType.PRIVATE
        if FORGET_ALL_RE.match(text.strip()):
            return await self.guard_forget_all(bot, chat, user, message)
        name = admin_command(text)
        if name is None or private:
            return None
        admin = await self.is_admin(bot, chat, user, message)
        if admin is None:
            return ADMIN_UNKNOWN, None
        if not admin:
            log.info("non-admin %s tried /%s in group %s; refused", user.id if user else "?", name, chat.id)
            return NOT_ADMIN_FOR.format(what=ADMIN_COMMANDS[name]), None
        return None

    async def guard_forget_all(
        self, bot: Bot, chat: Chat, user: User | None, message: Message
    ) -> tuple[str, InlineKeyboardMarkup | None] | None:
        """None when this /forget all may erase the chat; else what to answer (nothing is erased).

        It is confirmed with the [Erase everything] button, or by sending it again, within
        FORGET_CONFIRM_SECONDS. In a group only an administrator (or the group's anonymous
        admin identity) may: a group's memory is everyone's.
        """
        private = chat.type == ChatType.PRIVATE
        if not private:
            admin = await self.is_admin(bot, chat, user, message)
            if admin is None:
                return ADMIN_UNKNOWN, None
            if not admin:
                log.info("non-admin %s asked to erase group %s; refused", user.id if user else "?", chat.id)
                return NOT_ADMIN, None
        # The pending confirmation is a claim of the chat (its TTL is the 60 s window), so
        # the button or the second /forget all confirms whichever worker each one reaches.
        hub = self.transport.hub
        who = f"forget-all:{user.id if user else 'anonymous'}"
        scope, now = scope_for(chat.type, chat.id, user.id if user else None), hub.deps.clock()
        pending = get_claim(hub.store, scope, FORGET_CONFIRM_KEY, now=now)
        if pending is not None and pending.holder == who:
            release_claim(hub.store, scope, FORGET_CONFIRM_KEY, who)
            return None
        if pending is not None:  # another administrator's request: this one replaces it
            release_claim(hub.store, scope, FORGET_CONFIRM_KEY, pending.holder)
        note = "hub: waiting for /forget all to be confirmed"
        acquire_claim(hub.store, scope, FORGET_CONFIRM_KEY, who, note=note, ttl=FORGET_CONFIRM_SECONDS, now=now)
        return (CONFIRM_FORGET_ALL_PRIVATE if private else CONFIRM_FORGET_ALL), forget_all_keyboard(user.id if user else None)

    async def is_admin(self, bot: Bot, chat: Chat, user: User | None, message: Message | None) -> bool | None:
        """Whether the sender administers the group (getChatMember); None when Telegram could not say."""
        if message is not None and message.sender_chat is not None and message.sender_chat.id == chat.id:
            return True  # an anonymous administrator writes as the group itself
        if user is None:
            return False
        try:
            member = await call_with_retry(lambda: bot.get_chat_member(chat.id, user.id), self.transport.retry, "getChatMember")
        except TelegramError as exc:
            log.warning("getChatMember for %s in %s failed: %s", user.id, chat.id, exc)
            return None
        return member.status in (ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR)

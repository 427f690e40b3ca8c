"""Groups: who administers one (getChatMember), and what only an administrator may do.

A group's memory and settings are everyone's: every command that erases or changes them
(``/forget <fact>``, ``/forget all``, a ``/settings`` change) needs an administrator (or
the group's anonymous admin identity), and ``/forget all`` a confirmation as well.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from telegram import Bot, Chat, Message, User
from telegram.constants import ChatMemberStatus
from telegram.error import TelegramError

from scopehub.hub.transports.telegram.delivery import call_with_retry
from scopehub.hub.transports.telegram.texts import (
    ADMIN_UNKNOWN,
    CONFIRM_FORGET_ALL,
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

    async def guard(self, bot: Bot, chat: Chat, user: User | None, message: Message, text: str) -> str | None:
        """None when this group message may go on; else what to answer (nothing is erased or changed).

        Every admin-only command (:data:`ADMIN_COMMANDS`) needs an administrator;
        ``/forget all`` needs a confirmation too (:meth:`guard_forget_all`).
        """
        name = admin_command(text)
        if name is None:
            return None
        if FORGET_ALL_RE.match(text.strip()):
            return await self.guard_forget_all(bot, chat, user, message)
        admin = await self.is_admin(bot, chat, user, message)
        if admin is None:
            return ADMIN_UNKNOWN
        if not admin:
            log.info("non-admin %s tried /%s in group %s; refused", user.id if user else "?", name, chat.id)
            return NOT_ADMIN_FOR.format(what=ADMIN_COMMANDS[name])
        return None

    async def guard_forget_all(self, bot: Bot, chat: Chat, user: User | None, message: Message) -> str | None:
        """None when this /forget all may erase the group; else what to answer (nothing is erased).

        Only an administrator (or the group's anonymous admin identity) may, and only by
        sending it twice within FORGET_CONFIRM_SECONDS: a group's memory is everyone's.
        """
        admin = await self.is_admin(bot, chat, user, message)
        if admin is None:
            return ADMIN_UNKNOWN
        if not admin:
            log.info("non-admin %s asked to erase group %s; refused", user.id if user else "?", chat.id)
            return NOT_ADMIN
        # The pending confirmation is a claim of the group (its TTL is the 60 s window), so
        # the second /forget all confirms whichever worker each one reaches.
        hub = self.transport.hub
        who = f"forget-all:{user.id if user else 'anonymous'}"
        scope, now = f"group:{chat.id}", hub.deps.clock()
        pending = get_claim(hub.store, scope, FORGET_CONFIRM_KEY, now=now)
        if pending is not None and pending.holder == who:
            release_claim(hub.store, scope, FORGET_CONFIRM_KEY, who)
            return None
        if pending is not None:  # another administrator's request: this one replaces it
            release_claim(hub.store, scope, FORGET_CONFIRM_KEY, pending.holder)
        note = "hub: waiting for /forget all to be confirmed"
        acquire_claim(hub.store, scope, FORGET_CONFIRM_KEY, who, note=note, ttl=FORGET_CONFIRM_SECONDS, now=now)
        return CONFIRM_FORGET_ALL

    async def is_admin(self, bot: Bot, chat: Chat, user: User | None, message: Message) -> bool | None:
        """Whether the sender administers the group (getChatMember); None when Telegram could not say."""
        if message.sender_chat is not None and message.sender_chat.id == chat.id:
            return True  # an anonymous administrator writes as the group itself
        if user is None:
            return False
        try:
            member = await call_with_retry(lambda: bot.get_chat_member(chat.id, user.id), self.transport.retry, "getChatMember")
        except TelegramError as exc:
            log.warning("getChatMember for %s in %s failed: %s", user.id, chat.id, exc)
            return None
        return member.status in (ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR)

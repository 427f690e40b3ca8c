"""Who may use a closed bot: the allowlist, and people who paired with an invite code.

A bot is closed when ``HUB_ALLOWED_USERS`` or ``HUB_ALLOWED_CHATS`` lists anyone. Its
owners (the users on ``HUB_ALLOWED_USERS``) invite others: ``/invite`` in a private chat
with the bot (or ``agents-hub telegram invite``) makes a code that lets one person in for
7 days, with a link ``https://t.me/<bot>?start=<code>``. Opening it sends ``/start <code>``;
the person is paired (kept in the database, so every worker lets them in) and welcomed.
Anyone else gets one polite refusal, which says how to get in, and nothing of theirs is stored.
"""

from __future__ import annotations

import logging
import re
import secrets
from typing import TYPE_CHECKING

from telegram import Bot, Chat, User
from telegram.constants import ChatType

from scopehub.hub.transports.telegram.delivery import is_allowed
from scopehub.memory import create_invite, is_paired, redeem_invite

if TYPE_CHECKING:
    from scopehub.hub.transports.telegram.bot import TelegramBot

__all__ = ["INVITE_DAYS", "Access", "invite_link", "make_invite_code"]

log = logging.getLogger(__name__)

INVITE_DAYS = 7.0
PAIRED = "Welcome! You can use this bot now. " + "Write to me, or send /help to see what I can do."
BAD_CODE = "That invite code does not let anyone in (used up, expired or mistyped). Ask whoever runs this bot for a new one."
OWNERS_ONLY = "Only the people who run this bot can invite others (their ids are in HUB_ALLOWED_USERS)."
OPEN_BOT = "This bot is open to everyone: there is nobody to invite."
_PAIR_RE = re.compile(r"^/(?:start|pair)(?:@\w+)?\s+([A-Za-z0-9_-]{1,64})\s*$")
_INVITE_RE = re.compile(r"^/invite(?:@\w+)?(?:\s+(.*))?$", re.IGNORECASE | re.DOTALL)


def make_invite_code() -> str:
    """A code nobody can guess (128 random bits), short enough for a /start link (at most 64 characters)."""
    return secrets.token_urlsafe(16)


def invite_link(username: str | None, code: str) -> str:
    """The t.me link that opens the bot and sends ``/start <code>``."""
    return f"https://t.me/{username}?start={code}" if username else f"/start {code}"


class Access:
    """The allowlist and pairings of one :class:`~.bot.TelegramBot`."""

    def __init__(self, transport: TelegramBot) -> None:
        self.transport = transport
        self._paired: set[int] = set()  # users found paired (a pairing is never taken back here)

    @property
    def closed(self) -> bool:
        settings = self.transport.settings
        return bool(settings.allowed_user_ids or settings.allowed_chat_ids)

    def allowed(self, user_id: int | None, chat_id: int) -> bool:
        """The allowlist (for a supergroup also under the id its group had), or a pairing."""
        settings = self.transport.settings
        if is_allowed(settings, user_id, chat_id):
            return True
        old = self.transport.migrated_from(chat_id)
        if old is not None and is_allowed(settings, user_id, old):
            return True
        return user_id is not None and self.paired(user_id)

    def paired(self, user_id: int) -> bool:
        if user_id in self._paired:
            return True
        try:
            found = is_paired(self.transport.hub.store, user_id)
        except Exception as exc:  # closed stays closed while the database is away
            log.warning("cannot check whether user %s paired (%s); refusing for now", user_id, exc)
            return False
        if found:
            self._paired.add(user_id)
        return found

    async def try_pairing(self, bot: Bot, chat: Chat, user: User | None, text: str) -> bool:
        """``/start <code>`` from someone not allowed, in a private chat: pair them; True when it was such a message."""
        match = _PAIR_RE.match(text.strip())
        if match is None or user is None or chat.type != ChatType.PRIVATE:
            return False
        hub = self.transport.hub
        if redeem_invite(hub.store, match.group(1), user.id, now=hub.deps.clock()):
            self._paired.add(user.id)
            log.info("user %s paired with an invite code", user.id)
            await self.transport.outbox.send_text(bot, chat.id, PAIRED, what="welcome")
        else:
            log.info("user %s sent an invite code that lets nobody in", user.id)
            await self.transport.outbox.send_text(bot, chat.id, BAD_CODE, what="invite refusal")
        return True

    async def invite(self, bot: Bot, chat: Chat, user: User | None, text: str) -> bool:
        """``/invite [note]`` from an owner in a private chat: a new code and its link; True when it was one."""
        match = _INVITE_RE.match(text.strip())
        if match is None:
            return False
        settings = self.transport.settings
        if not self.closed:
            answer = OPEN_BOT
        elif user is None or user.id not in settings.allowed_user_ids or chat.type != ChatType.PRIVATE:
            answer = OWNERS_ONLY
        else:
            hub = self.transport.hub
            now = hub.deps.clock()
            code = make_invite_code()
            note = (match.group(1) or "").strip()[:200]
            create_invite(hub.store, code, uses=1, expires=now + INVITE_DAYS * 86400, note=note, created_by=f"telegram:{user.id}", now=now)
            answer = (
                f"An invite for one person, valid for {INVITE_DAYS:.0f} days:\n{invite_link(bot.username, code)}\n"
                f"(or they send me: /start {code})"
            )
        await self.transport.outbox.send_text(bot, chat.id, answer, what="invite")
        return True

"""The Telegram transport: python-telegram-bot in front of the :class:`~scopehub.hub.orchestrator.Hub`.

``build_application(hub, settings)`` returns a ready, not yet running, PTB ``Application``
(the tests drive it against a loopback Bot API); ``agents-hub telegram`` runs it with
long polling or a webhook.

What it does with an update:

* scope: a private chat is the customer's (``user:<user id>``), a group or supergroup
  is its own (``group:<chat id>``); the Telegram id ``"<chat id>:<message id>"`` is the
  message's ``ext_id``, so a later reply to one of the bot's messages routes to the agent
  that wrote it;
* groups: every text message is stored, but only a mention (``@bot``), a reply to the
  bot, or a command gets an answer; the mention is stripped;
* access: ``HUB_ALLOWED_USERS`` / ``HUB_ALLOWED_CHATS`` (both empty = everyone); a message
  passes when its sender *or* its chat is listed; anyone else gets one polite refusal
  per chat and process, and nothing of theirs is stored;
* order: the updates of one scope are handled one after another (:mod:`.delivery`);
* replies: plain text, the agent's name on the first line, split under Telegram's limit,
  the typing action while the agent works, retried with a bound (:mod:`.delivery`);
* reminders: delivered by the JobQueue at their due time (:mod:`.reminders`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import OrderedDict
from typing import Any

from telegram import Bot, BotCommand, Message, MessageEntity, ReplyParameters, Update
from telegram.constants import ChatAction, ChatType
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    NetworkError,
    TelegramError,
)
from telegram.ext import (
    Application,
    ApplicationBuilder,
    ContextTypes,
    MessageHandler,
    filters,
)

from scopehub.hub.errors import ConfigError
from scopehub.hub.orchestrator import Hub, Inbound, Reply
from scopehub.hub.settings import Settings
from scopehub.hub.transports.telegram.delivery import (
    TELEGRAM_LIMIT,
    RetryPolicy,
    ScopeOrderedProcessor,
    bot_url,
    call_with_retry,
    file_url,
    is_allowed,
    scope_for,
    split_message,
    trim_text,
)
from scopehub.hub.transports.telegram.reminders import ReminderScheduler
from scopehub.memory import Store

log = logging.getLogger(__name__)


BOT_DATA_KEY = "agents_hub"  # application.bot_data[BOT_DATA_KEY] is the TelegramBot

REFUSAL = "Sorry, this bot is private and you are not on its list of allowed users. Nothing you send here is stored."
APOLOGY_SAVED = "Sorry, something went wrong; your message is saved."
APOLOGY = "Sorry, something went wrong; please send your message again."
TEXT_ONLY = "I can only read text messages for now."
REFLECT_FIRST_S = 60.0  # the first reflection check after start: scopes due since the last run


# setMyCommands descriptions of the hub's own commands (agents bring their description).
HUB_COMMANDS: dict[str, str] = {
    "start": "Start: what I can do",
    "help": "How to talk to me",
    "agents": "Who is on the team",
    "remember": "Keep a fact: /remember <fact>",
    "facts": "What I keep about this chat",
    "forget": "Drop a fact, or /forget all to erase this chat",
    "search": "Search older messages: /search <words>",
    "usage": "Tokens sent against full history",
}
_COMMAND_NAME_RE = re.compile(r"^[a-z0-9_]{1,32}$")
_LEADING_COMMAND_RE = re.compile(r"^/([A-Za-z0-9_-]{1,64})(?:@([A-Za-z0-9_]{3,64}))?(?=\s|$)")
_SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")


class _ReplyOwed(Exception):
    """Raised from the message handler when it failed before answering someone who is owed an answer."""

    def __init__(self, chat_id: int, thread_id: int | None, saved: bool) -> None:
        super().__init__(f"handling a message in chat {chat_id} failed")
        self.chat_id = chat_id
        self.thread_id = thread_id
        self.saved = saved


class TelegramBot:
    """The handlers and state behind one Application (kept in ``bot_data[BOT_DATA_KEY]``)."""

    def __init__(
        self,
        hub: Hub,
        settings: Settings,
        *,
        retry: RetryPolicy | None = None,
        typing_interval: float = 4.0,
        reminder_interval: float = 20.0,
    ) -> None:
        self.hub = hub
        self.settings = settings
        self.retry = retry or RetryPolicy()
        self.typing_interval = typing_interval
        self.reminders = ReminderScheduler(self, reminder_interval)
        self._refused: set[int] = set()  # chats that got their one refusal
        # Telegram ids of the 2nd.. chunks of split replies -> the first chunk's id, so a
        # reply to any chunk routes to the agent (bounded; lost on restart, then the router decides).
        self._chunk_alias: OrderedDict[tuple[str, str], str] = OrderedDict()

    # -- lifecycle ----------------------------------------------------------------------
    async def post_init(self, application: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Register the commands, start the reminder sweep, hook /forget all."""
        if self.reminders.cancel_scope not in self.hub.erase_hooks:
            self.hub.erase_hooks.append(self.reminders.cancel_scope)
        try:
            await call_with_retry(
                lambda: application.bot.set_my_commands(self.bot_commands()), self.retry, "setMyCommands"
            )
        except TelegramError as exc:  # the bot works without the command menu
            log.warning("could not register the command list: %s", exc)
        assert application.job_queue is not None
        self.reminders.start(application.job_queue)
        self.start_reflection(application.job_queue)

    def start_reflection(self, job_queue: Any) -> None:
        """Reflect the scopes that are due soon after start, then check every hour (or more often)."""
        hours = self.settings.reflect_every_hours
        if hours <= 0 or self.hub.deps.reflector is None:
            return
        job_queue.run_repeating(
            self._reflect_job, interval=min(3600.0, hours * 3600), first=REFLECT_FIRST_S, name="reflection:due"
        )

    async def _reflect_job(self, context: Any) -> None:
        # Each scope is reflected at most every HUB_REFLECT_EVERY_HOURS, under its claim: with
        # several workers on one database only one reflects a scope. Never raises.
        await self.hub.reflect_due()

    async def post_stop(self, application: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Unhook from the hub (the hub may outlive this Application)."""
        if self.reminders.cancel_scope in self.hub.erase_hooks:
            self.hub.erase_hooks.remove(self.reminders.cancel_scope)

    def bot_commands(self) -> list[BotCommand]:
        """The hub's commands and one ``/<agent>`` per agent, as Telegram accepts them."""
        names: dict[str, str] = {}
        for name in ("start", "help", "agents"):
            if name in self.hub.commands:
                names[name] = HUB_COMMANDS[name]
        for spec in self.hub.registry:
            if _COMMAND_NAME_RE.match(spec.name):
                names[spec.name] = (spec.description or f"Ask the {spec.name} agent")[:256]
            else:
                log.warning("agent %r cannot be a Telegram command (a-z, 0-9, _ only); use @%s", spec.name, spec.name)
        for name in self.hub.commands:
            if name not in names and _COMMAND_NAME_RE.match(name):
                names[name] = HUB_COMMANDS.get(name, f"/{name}")
        return [BotCommand(name, description) for name, description in list(names.items())[:100]]

    # -- addressing ---------------------------------------------------------------------
    def addressing(self, message: Message, bot: Bot) -> tuple[bool | None, str]:
        """``(addressed, text for the hub)``; ``addressed`` is None for a command meant for another bot."""
        text = message.text or ""
        username = (bot.username or "").lower()
        command = _LEADING_COMMAND_RE.match(text)
        if command is not None:
            name, target = command.group(1).lower(), command.group(2)
            if target is not None and target.lower() != username:
                return None, text  # /cmd@otherbot: not ours at all
            normalised = f"/{command.group(1)}{text[command.end():]}"  # drop our @username
            if message.chat.type == ChatType.PRIVATE or target is not None:
                return True, normalised
            if name in self.hub.commands or name in self.hub.registry:
                return True, normalised
            # an unknown /word without @us in a group: ordinary text
        if message.chat.type == ChatType.PRIVATE:
            return True, text
        mentioned = _mentions(message, bot.id, username)
        if mentioned and username:
            stripped = re.sub(rf"(?i)(?<![\w@])@{re.escape(username)}\b", " ", text)
            stripped = re.sub(r"[ \t]{2,}", " ", stripped).strip().lstrip(",:;").strip()
            text = stripped or text
        parent = message.reply_to_message
        replied = parent is not None and parent.from_user is not None and parent.from_user.id == bot.id
        return mentioned or replied, text

    # -- handlers -----------------------------------------------------------------------
    async def on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """One text message: store it, answer it when addressed."""
        message, chat, user = update.effective_message, update.effective_chat, update.effective_user
        if message is None or chat is None or message.text is None:
            return
        bot = context.bot
        addressed, text = self.addressing(message, bot)
        if addressed is None:
            return  # a command for another bot in the group: neither ours to store nor to run
        user_id = user.id if user else None
        private = chat.type == ChatType.PRIVATE
        thread_id = message.message_thread_id if message.is_topic_message else None
        if not is_allowed(self.settings, user_id, chat.id):
            if private or addressed:
                await self.refuse_once(bot, chat.id, thread_id)
            return
        scope = scope_for(chat.type, chat.id, user_id)
        ext_id = f"{chat.id}:{message.message_id}"
        existing = self.hub.store.find_ext(scope, ext_id)
        if existing is not None and self.hub.store.is_answered(existing.id):
            log.info("update for %s in %s already handled; skipping the redelivery", ext_id, scope)
            return  # stored but unanswered (a crash in between) goes on: the hub answers it
        reply_to_ext = None
        if message.reply_to_message is not None:
            reply_to_ext = f"{chat.id}:{message.reply_to_message.message_id}"
            reply_to_ext = self._chunk_alias.get((scope, reply_to_ext), reply_to_ext)
        inbound = Inbound(
            scope=scope,
            text=text,
            chat=str(chat.id),
            sender=(user.full_name or user.username or str(user.id)) if user else None,
            ext_id=ext_id,
            reply_to_ext=reply_to_ext,
            addressed=bool(addressed),
        )
        stop_typing = asyncio.Event()
        typing = self._start_typing(bot, chat.id, thread_id, stop_typing) if addressed else None
        try:
            reply = await self.hub.handle(inbound)
        except Exception as exc:
            if addressed:
                saved = self.hub.store.find_ext(scope, ext_id) is not None
                raise _ReplyOwed(chat.id, thread_id, saved) from exc
            raise
        finally:
            if typing is not None:
                # Let an action already on its way land first, or it would show "typing…"
                # again after the answer; a hung one is cut off.
                stop_typing.set()
                _, pending = await asyncio.wait([typing], timeout=1.0)
                for task in pending:
                    task.cancel()
        if reply is None:
            return
        await self.deliver(bot, chat.id, reply, reply_to=None if private else message.message_id, thread_id=thread_id)
        if reply.kind == "agent":
            self.reminders.sweep()  # the answer may have set a reminder due before the next sweep

    async def on_other(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A private non-text message (photo, sticker, voice): say what we can read."""
        chat, user = update.effective_chat, update.effective_user
        if chat is None:
            return
        if not is_allowed(self.settings, user.id if user else None, chat.id):
            await self.refuse_once(context.bot, chat.id, None)
            return
        await self.send_text(context.bot, chat.id, TEXT_ONLY, what="text-only note")

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """The one error handler: log with the traceback, never show it in a chat."""
        error = context.error
        if update is None and isinstance(error, NetworkError):
            log.warning("Telegram connection problem: %s", error)  # polling retries on its own
            return
        where = ""
        if isinstance(update, Update):
            chat = update.effective_chat
            where = f" (update {update.update_id}, chat {chat.id if chat else '?'})"
        log.error("error while handling an update%s", where, exc_info=error)
        if isinstance(error, _ReplyOwed):
            await self.send_text(
                context.bot, error.chat_id, APOLOGY_SAVED if error.saved else APOLOGY, thread_id=error.thread_id, what="apology"
            )

    # -- sending ------------------------------------------------------------------------
    async def refuse_once(self, bot: Bot, chat_id: int, thread_id: int | None) -> None:
        """One polite refusal per chat and process (not one per message)."""
        if chat_id in self._refused:
            return
        self._refused.add(chat_id)
        log.info("refused chat %s (not in HUB_ALLOWED_USERS / HUB_ALLOWED_CHATS)", chat_id)
        await self.send_text(bot, chat_id, REFUSAL, thread_id=thread_id, what="refusal")

    def render(self, reply: Reply) -> str:
        """The text to send: an agent's answer carries the agent's name on its first line."""
        if reply.kind == "agent" and reply.agent:
            return f"[{reply.agent}]\n{reply.text}"
        return reply.text

    async def deliver(self, bot: Bot, chat_id: int, reply: Reply, *, reply_to: int | None, thread_id: int | None) -> list[int]:
        """Send a reply in as many messages as it needs; returns the sent message ids.

        Each chunk is sent on its own, so one that fails never loses the rest. The first
        sent id becomes the stored reply's ext_id (a reply to it routes to this agent).
        """
        sent_ids: list[int] = []
        for chunk in split_message(self.render(reply)) or ["(empty reply)"]:
            sent = await self.send_text(
                bot, chat_id, chunk, reply_to=reply_to if not sent_ids else None, thread_id=thread_id, what="reply"
            )
            if sent is not None:
                sent_ids.append(sent.message_id)
        if not sent_ids:
            return sent_ids
        if reply.kind == "agent" and reply.reply_id is not None and reply.scope:
            first = f"{chat_id}:{sent_ids[0]}"
            _set_ext_id(self.hub.store, reply.reply_id, first)
            for other in sent_ids[1:]:
                self._chunk_alias[(reply.scope, f"{chat_id}:{other}")] = first
            while len(self._chunk_alias) > 10_000:
                self._chunk_alias.popitem(last=False)
        self.hub.schedule_after_send(reply)
        return sent_ids

    async def send_text(
        self,
        bot: Bot,
        chat_id: int,
        text: str,
        *,
        reply_to: int | None = None,
        thread_id: int | None = None,
        what: str = "message",
    ) -> Message | None:
        """Send plain text with bounded retries; None when Telegram would not take it.

        A BadRequest (too long by Telegram's count, a vanished thread...) gets one trimmed
        fallback without reply or thread; ChatMigrated (a group became a supergroup) is
        followed once.
        """
        reply_parameters = ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) if reply_to else None
        try:
            return await call_with_retry(
                lambda: bot.send_message(chat_id, text, reply_parameters=reply_parameters, message_thread_id=thread_id),
                self.retry,
                f"sending {what} to {chat_id}",
            )
        except ChatMigrated as exc:
            log.info("chat %s migrated to %s", chat_id, exc.new_chat_id)
            return await self.send_text(bot, int(exc.new_chat_id), text, thread_id=thread_id, what=what)
        except BadRequest as exc:
            log.warning("Telegram refused %s to %s (%s); sending a trimmed plain fallback", what, chat_id, exc)
            try:
                return await call_with_retry(
                    lambda: bot.send_message(chat_id, trim_text(text, TELEGRAM_LIMIT - 96)), self.retry, f"fallback {what}"
                )
            except TelegramError as again:
                log.error("the fallback %s to %s failed too: %s", what, chat_id, again)
                return None
        except Forbidden as exc:
            log.warning("cannot send %s to %s: %s", what, chat_id, exc)
            return None
        except TelegramError as exc:
            log.error("sending %s to %s failed after retries: %s", what, chat_id, exc)
            return None

    def _start_typing(self, bot: Bot, chat_id: int, thread_id: int | None, stop: asyncio.Event) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(self._keep_typing(bot, chat_id, thread_id, stop))

    async def _keep_typing(self, bot: Bot, chat_id: int, thread_id: int | None, stop: asyncio.Event) -> None:
        # Telegram shows the action for about 5 seconds; renew it until the answer is ready.
        while not stop.is_set():
            try:
                await bot.send_chat_action(chat_id, ChatAction.TYPING, message_thread_id=thread_id)
            except TelegramError as exc:
                log.debug("typing action for %s failed: %s", chat_id, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.typing_interval)


def _mentions(message: Message, bot_id: int, username: str) -> bool:
    """True when an entity of the message names the bot (@username, or a text mention of it)."""
    for entity, value in message.parse_entities([MessageEntity.MENTION, MessageEntity.TEXT_MENTION]).items():
        if entity.type == MessageEntity.MENTION and username and value.lower() == f"@{username}":
            return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user is not None and entity.user.id == bot_id:
            return True
    return False


def _set_ext_id(store: Store, message_id: int, ext_id: str) -> None:
    """Record the Telegram id of a sent reply on the stored reply."""
    try:
        store.set_ext_id(message_id, ext_id)
    except Exception:  # a lost ext id only weakens reply routing; the reply is out already
        log.exception("could not record Telegram id %s on message %s", ext_id, message_id)


# -- building and running -----------------------------------------------------------------


def build_application(
    hub: Hub,
    settings: Settings,
    *,
    token: str | None = None,
    base_url: str | None = None,
    retry: RetryPolicy | None = None,
    typing_interval: float = 4.0,
    reminder_interval: float = 20.0,
    max_active: int = 32,
) -> Application[Any, Any, Any, Any, Any, Any]:
    """A configured PTB Application around ``hub`` (not initialised, not running).

    ``run_polling``/``run_webhook`` call its post_init (commands, reminder sweep) and
    post_stop; a caller driving it by hand calls them around ``start``/``stop``.
    """
    token = token or settings.telegram_bot_token
    if not token:
        raise ConfigError("TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather and put its token in the environment or .env")
    base_url = base_url if base_url is not None else settings.telegram_base_url
    transport = TelegramBot(hub, settings, retry=retry, typing_interval=typing_interval, reminder_interval=reminder_interval)
    builder = (
        ApplicationBuilder()
        .token(token)
        .concurrent_updates(ScopeOrderedProcessor(max_active=max_active))
        .post_init(transport.post_init)
        .post_stop(transport.post_stop)
    )
    if base_url:
        builder = builder.base_url(bot_url(base_url)).base_file_url(file_url(base_url))
    application = builder.build()
    if application.job_queue is None:
        raise ConfigError("reminders need python-telegram-bot's job queue: pip install 'python-telegram-bot[job-queue]'")
    application.bot_data[BOT_DATA_KEY] = transport
    chats = filters.ChatType.PRIVATE | filters.ChatType.GROUPS
    application.add_handler(MessageHandler(filters.UpdateType.MESSAGE & chats & filters.TEXT, transport.on_text))
    application.add_handler(MessageHandler(filters.UpdateType.MESSAGE & filters.ChatType.PRIVATE & ~filters.TEXT, transport.on_other))
    application.add_error_handler(transport.on_error)
    return application

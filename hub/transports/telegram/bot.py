"""The Telegram transport: python-telegram-bot in front of the :class:`~scopehub.hub.orchestrator.Hub`.

``build_application(hub, settings)`` returns a ready, not yet running, PTB ``Application``
(the tests drive it against a loopback Bot API); ``agents-hub telegram`` runs it with
long polling or a webhook.

What it does with an update:

* scope: a private chat is the customer's (``user:<user id>``), a group or supergroup
  is its own (``group:<chat id>``); the Telegram id ``"<chat id>:<message id>"`` is the
  message's ``ext_id``, so a later reply to one of the bot's messages routes to the agent
  that wrote it;
* groups: every message is stored, but only a mention (``@bot``), a reply to the
  bot, or a command gets an answer; the mention is stripped; the current message
  carries its sender ("Ann: ...") like the history; ``/forget all`` needs an
  administrator (getChatMember) and the same command again within 60 s;
* media: a caption is text; without one a marker is stored (``[photo]``,
  ``[document: report.pdf]``); a text document (txt, md, csv, eml, json; UTF-8; up to
  1 MB) is downloaded into the vault; what cannot be read is said so when addressed;
* edits update the stored text and its search index (no new answer); forwards are
  stored as "forwarded from <origin>: ..."; a group that becomes a supergroup takes its
  memory along (:meth:`TelegramBot.migrate`);
* access: ``HUB_ALLOWED_USERS`` / ``HUB_ALLOWED_CHATS`` (both empty = everyone); a message
  passes when its sender *or* its chat is listed; anyone else gets one polite refusal
  per chat and process, and nothing of theirs is stored;
* order and several workers: every message is stored and marked owed first; the answer
  comes from whichever process holds the scope's turn, the scope's owed messages in
  order (:mod:`scopehub.hub.turns`). With ``--webhook-url`` the worker's own server
  (:mod:`.webhook`) says "received" only once the update is stored, so any number of
  workers on one database can be killed and restarted without losing or repeating an
  answer; polling handles one scope's updates one after another (:mod:`.delivery`);
* replies: plain text, the agent's name on the first line, split under Telegram's limit,
  the typing action while the agent works, retried with a bound (:mod:`.delivery`);
* reminders: delivered by the JobQueue at their due time (:mod:`.reminders`); a chat that
  answers 403 (the bot was blocked or removed) has them paused until it writes again;
* start: slow first-use work (litellm, tiktoken) is done in a thread before polling;
  a second process polling the same token (409) is one log line, retried quietly.
* reactions: a 👍 or 👎 (and the like) on one of the bot's replies is feedback for the
  agent that wrote it, learnt into a lesson in the background; it is never answered.
  Telegram sends reactions only when ``allowed_updates`` asks for ``message_reaction``
  (:data:`ALLOWED_UPDATES`), and in groups only to a bot that is an administrator.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from telegram import (
    Bot,
    BotCommand,
    Chat,
    Message,
    MessageEntity,
    ReactionType,
    ReactionTypeEmoji,
    ReplyParameters,
    Update,
    User,
)
from telegram.constants import ChatAction, ChatMemberStatus, ChatType
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.ext import (
    Application,
    ApplicationBuilder,
    ContextTypes,
    MessageHandler,
    MessageReactionHandler,
    filters,
)
from telegram.request import HTTPXRequest

from scopehub.hub.commands import plural
from scopehub.hub.errors import ConfigError
from scopehub.hub.lessons import reaction_signal
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
from scopehub.hub.transports.telegram.media import (
    Media,
    describe_media,
    forward_origin,
    read_text_document,
)
from scopehub.hub.transports.telegram.reminders import ReminderScheduler
from scopehub.hub.transports.telegram.sender import Record, RecordingSender
from scopehub.hub.turns import DeliveryDeferred, Owed, ScopeTurns, is_transient
from scopehub.memory import (
    acquire_claim,
    add_vault_item,
    get_claim,
    pause_chat_reminders,
    release_claim,
    resume_chat_reminders,
)

log = logging.getLogger(__name__)

SENDER_READ_TIMEOUT = 30.0  # seconds the reply sender waits for Telegram's answer (PTB's default: 5)


BOT_DATA_KEY = "agents_hub"  # application.bot_data[BOT_DATA_KEY] is the TelegramBot
# What run_polling/run_webhook must ask Telegram for: without "message_reaction" in the
# list, Telegram never sends reactions (they are not in its default set).
ALLOWED_UPDATES: tuple[str, ...] = (Update.MESSAGE, Update.EDITED_MESSAGE, Update.MESSAGE_REACTION)

REFUSAL = "Sorry, this bot is private and you are not on its list of allowed users. Nothing you send here is stored."
APOLOGY_SAVED = "Sorry, something went wrong; your message is saved."
APOLOGY = "Sorry, something went wrong; please send your message again."
CANT_READ = (
    "I can't read {what} yet; I noted that you sent it. Write to me in text, or send a .txt, .md, .csv, .eml or .json file."
)
DOCUMENT_SAVED = "Saved {name} ({size}) in this chat's memory: ask me about it, or /search it."
DOCUMENT_UNREADABLE = "I kept a note that you sent {name}, but I can only read UTF-8 text files up to 1 MB."
NOT_ADMIN = "Only this group's administrators can erase its memory with /forget all. Nothing was erased."
ADMIN_UNKNOWN = "I could not check who administers this group, so nothing was erased. Please try again in a minute."
CONFIRM_FORGET_ALL = (
    "This erases everything I keep about this group, for everyone: messages, facts, notes, tasks and reminders. "
    "Send /forget all again within 60 seconds to confirm."
)
FORGET_CONFIRM_SECONDS = 60.0
FORGET_CONFIRM_KEY = "forget-all:confirm"  # the pending confirmation, a claim: every worker sees it
REFLECT_FIRST_S = 60.0  # the first reflection check after start: scopes due since the last run


# setMyCommands descriptions of the hub's own commands (agents bring their description).
HUB_COMMANDS: dict[str, str] = {
    "start": "Start: what I can do",
    "help": "How to talk to me",
    "agents": "Who is on the team; /agents <name>: what it learnt",
    "feedback": "Tell the last agent what was wrong: /feedback <text>",
    "channels": "The agents' talk channels",
    "remember": "Keep a fact: /remember <fact>",
    "facts": "What I keep about this chat",
    "forget": "Drop a fact, or /forget all to erase this chat",
    "search": "Search older messages: /search <words>",
    "usage": "Tokens sent against full history",
    "events": "What the agents did recently",
}
_COMMAND_NAME_RE = re.compile(r"^[a-z0-9_]{1,32}$")
_LEADING_COMMAND_RE = re.compile(r"^/([A-Za-z0-9_-]{1,64})(?:@([A-Za-z0-9_]{3,64}))?(?=\s|$)")
_SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
_FORGET_ALL_RE = re.compile(r"^/forget(?:@\w+)?\s+all\s*$", re.IGNORECASE)


@dataclass
class Intake:
    """What the webhook server learns from handling one update: whether it was kept.

    ``kept`` False: storing it failed (the database is down), so the server answers with an
    error and Telegram delivers the update again; nothing is lost.
    """

    kept: bool = True


# Set by the webhook server around each update (None when polling): the handlers store the
# message, mark it owed, and leave the answer to the scope's turn in the background.
INTAKE: contextvars.ContextVar[Intake | None] = contextvars.ContextVar("telegram_intake", default=None)


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
        watch_maildir: bool = False,
        max_turns: int = 32,
    ) -> None:
        self.hub = hub
        self.settings = settings
        self.retry = retry or RetryPolicy()
        self.typing_interval = typing_interval
        self.reminders = ReminderScheduler(self, reminder_interval)
        self.watch_maildir = watch_maildir
        self._maildir_watcher: Any = None
        self._refused: set[int] = set()  # chats that got their one refusal
        self._forbidden: set[int] = set()  # chats that answered 403, logged once each
        self._conflict_logged = False  # "another process is polling" said once
        # Forum topics of messages this process accepted (message id -> thread id, bounded):
        # the reply goes to the topic; a message accepted by another worker is answered as a
        # reply to it, which Telegram puts in the same topic.
        self._threads: OrderedDict[int, int] = OrderedDict()
        # Answers: each scope's owed messages in order, by whichever worker holds its turn.
        self.turns = ScopeTurns(hub.store, hub.holder, self._work_owed, ttl=hub.settings.claim_ttl, clock=hub.deps.clock)
        self._bot: Bot | None = None  # the application's bot, for answers worked off the update
        # Replies of the turns are sent and their Telegram ids recorded on a thread of its own
        # (sender.py: a worker killed between the two sends the reply twice).
        self._sender: RecordingSender | None = None
        self.bot_urls: tuple[str, str] | None = None  # (base_url, base_file_url) when not Telegram's
        self._turn_tasks: set[asyncio.Task[Any]] = set()
        # Chats answered at once by this worker's webhook: more would only slow each one
        # down (one event loop) until a turn outlives its claim. A chat waiting for a slot
        # has not taken its turn yet, so another worker's sweep may answer it meanwhile.
        self._turn_slots = asyncio.Semaphore(max_turns)
        # Groups that became supergroups during this process: old scope -> new scope, and
        # new chat id -> old chat id (an allowlisted group stays allowed under its new id).
        self.moved_scopes: dict[str, str] = {}
        self._migrated_from: dict[int, int] = {}

    # -- lifecycle ----------------------------------------------------------------------
    async def post_init(self, application: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Warm up off the loop, register the commands, start the reminder sweep, hook /forget all.

        PTB runs this before polling (or the webhook) starts, so the slow first-use work
        (importing litellm, loading the tokenizer's encoding) never blocks a chat.
        """
        await asyncio.to_thread(self.hub.warm_up)
        self._bot = application.bot
        self._sender = await self._start_sender(application.bot)
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
        # Answers claimed by a process that died mid-reply are answered once their claims run out.
        interval = max(1.0, self.hub.settings.claim_ttl / 2)
        application.job_queue.run_repeating(self._answer_stalled_job, interval=interval, first=interval, name="answers:stalled")
        if self.watch_maildir:
            from scopehub.hub.settings import maildir_root
            from scopehub.hub.transports.maildir.bridge import (
                RECURRING_CHECK,
                send_recurring,
                start_watcher,
            )

            bot = application.bot

            async def to_chat(scope: str, reply: Reply) -> None:
                await self.deliver(bot, _chat_of(scope), reply, reply_to=None, thread_id=None)

            root = maildir_root(self.settings)
            self._maildir_watcher = start_watcher(self.hub, root, sink=to_chat)
            async def recurring(context: Any) -> None:  # the job queue awaits its callbacks
                send_recurring(self.hub, root)

            application.job_queue.run_repeating(recurring, interval=RECURRING_CHECK, first=1.0, name="maildir:recurring")

        self.start_reflection(application.job_queue)

    async def _answer_stalled_job(self, context: ContextTypes.DEFAULT_TYPE) -> None:
        # Scopes whose turn holder died: their owed messages, in order, by this worker.
        await self.turns.sweep()
        for reply in await self.hub.answer_stalled():
            if reply.scope is not None:
                await self.deliver(context.bot, _chat_of(reply.scope), reply, reply_to=None, thread_id=None)

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

    async def _start_sender(self, bot: Bot) -> RecordingSender | None:
        """The reply sender, with a Bot like the application's; None (replies sent from the
        main loop, as every other message) when it cannot start."""
        urls = self.bot_urls

        def make_bot() -> Bot:
            # A read that times out after Telegram took the message is sent again by the
            # retry (at-least-once): wait long for the answer before calling it lost. Nothing
            # else waits on this thread, and the turn's leases keep the claims meanwhile.
            request = HTTPXRequest(connection_pool_size=16, read_timeout=SENDER_READ_TIMEOUT)
            if urls:
                return Bot(bot.token, base_url=urls[0], base_file_url=urls[1], request=request)
            return Bot(bot.token, request=request)

        sender = RecordingSender(make_bot)
        try:
            await asyncio.to_thread(sender.start)
        except Exception as exc:  # the main loop can send replies too
            log.warning("the reply sender did not start (%s); replies are sent from the main loop", exc)
            return None
        return sender

    async def post_stop(self, application: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Unhook from the hub (the hub may outlive this Application); stop the Maildir watcher."""
        if self._sender is not None:
            await self._sender.stop()
            self._sender = None
        if self._maildir_watcher is not None:
            await self._maildir_watcher.stop()
            self._maildir_watcher = None
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
        """``(addressed, text for the hub)``; ``addressed`` is None for a command meant for another bot.

        A caption counts as the message's text (with its own entities).
        """
        text = message.text if message.text is not None else (message.caption or "")
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
            text = strip_mention(text, username)
        parent = message.reply_to_message
        replied = parent is not None and parent.from_user is not None and parent.from_user.id == bot.id
        return mentioned or replied, text

    def allowed(self, user_id: int | None, chat_id: int) -> bool:
        """The allowlist, for a supergroup also under the id its group had."""
        if is_allowed(self.settings, user_id, chat_id):
            return True
        old = self._migrated_from.get(chat_id)
        return old is not None and is_allowed(self.settings, user_id, old)

    # -- handlers -----------------------------------------------------------------------
    async def on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """One message (text, caption, media): store it, answer it when addressed."""
        message, chat, user = update.effective_message, update.effective_chat, update.effective_user
        if message is None or chat is None:
            return
        media = describe_media(message)
        if message.text is None and message.caption is None and media is None:
            return  # a service message (members joined, pinned ...): nothing to keep
        bot = context.bot
        addressed, text = self.addressing(message, bot)
        if addressed is None:
            return  # a command for another bot in the group: neither ours to store nor to run
        user_id = user.id if user else None
        private = chat.type == ChatType.PRIVATE
        thread_id = message.message_thread_id if message.is_topic_message else None
        if not self.allowed(user_id, chat.id):
            if private or addressed:
                await self.refuse_once(bot, chat.id, thread_id)
            return
        self._note_conflict_over()
        self.chat_is_back(chat.id)
        scope = scope_for(chat.type, chat.id, user_id)
        ext_id = f"{chat.id}:{message.message_id}"
        existing = self.hub.store.find_ext(scope, ext_id)
        if existing is not None and (self.hub.store.is_answered(existing.id) or (media is not None and not text)):
            log.info("update for %s in %s already handled; skipping the redelivery", ext_id, scope)
            return  # stored but unanswered (a crash in between) goes on: the hub answers it
        if addressed and not private and _FORGET_ALL_RE.match(text.strip()):
            refusal = await self._guard_forget_all(bot, chat, user, message)
            if refusal is not None:  # not an administrator, or not confirmed yet: nothing erased
                await self.send_text(bot, chat.id, refusal, reply_to=message.message_id, thread_id=thread_id, what="forget all")
                return
        origin = forward_origin(message)
        body = text or (media.marker if media is not None else "")
        if origin is not None:
            body = f"forwarded from {origin}: {body}"
        reply_to_ext = None
        parent = message.reply_to_message
        if parent is not None:
            from_bot = parent.from_user is not None and parent.from_user.id == bot.id
            parent_text = parent.text if parent.text is not None else parent.caption
            reply_to_ext = self.reply_target(scope, chat.id, parent.message_id, parent_text if from_bot else None)
        # Media without a caption is stored as its marker and never goes to an agent: what
        # it says is "this came", and the person is told what the bot made of it.
        answerable = bool(addressed) and bool(text)
        inbound = Inbound(
            scope=scope,
            text=body,
            chat=str(chat.id),
            sender=(user.full_name or user.username or str(user.id)) if user else None,
            ext_id=ext_id,
            reply_to_ext=reply_to_ext,
            addressed=answerable,
        )
        saved_document = await self._keep_document(bot, scope, media) if media is not None and media.is_text_document else None
        intake = INTAKE.get()
        try:
            stored = self.accept(inbound, thread_id)
        except Exception as exc:
            if intake is not None:  # webhook: an error status, and Telegram delivers the update again
                intake.kept = False
                log.warning("update for %s in %s not stored (%s); Telegram will deliver it again", ext_id, scope, exc)
                return
            if addressed:
                raise _ReplyOwed(chat.id, thread_id, False) from exc
            raise
        reply_to = None if private else message.message_id
        # A caption is answered as text; the note is for what has no words of its own, and
        # for a kept document (the person should know where it went).
        if media is not None and addressed and (not text or saved_document is not None):
            note = _media_note(media, saved_document)
            await self.send_text(bot, chat.id, note, reply_to=reply_to, thread_id=thread_id, what="media note")
        if stored is None:
            return  # a redelivery of something handled (or being handled) already
        if intake is not None:
            self.start_turn(scope)  # the webhook answers "received" now; the turn answers
        else:
            await self.turns.run(scope)

    def accept(self, inbound: Inbound, thread_id: int | None = None) -> Any:
        """Store the message and mark it owed (answer, or only tag); None when it needs nothing more.

        This is all a webhook worker does before telling Telegram "received": a worker
        killed afterwards loses nothing, the mark outlives it.
        """
        stored = self.hub.store_inbound(inbound)
        if stored is None:
            return None
        self.turns.owe(inbound.scope, stored.id, inbound.text, answer=inbound.addressed)
        if thread_id is not None:
            self._threads[stored.id] = thread_id
            while len(self._threads) > 10_000:
                self._threads.popitem(last=False)
        return stored

    def start_turn(self, scope: str) -> None:
        """Work the scope's turn in the background (the webhook's request is answered already)."""
        if self.turns.busy(scope):
            return  # our task works it and looks again before it stops
        task = asyncio.get_running_loop().create_task(self._run_turn(scope), name=f"turn:{scope}")
        self._turn_tasks.add(task)
        task.add_done_callback(self._turn_tasks.discard)

    async def _run_turn(self, scope: str) -> None:
        async with self._turn_slots:
            await self.turns.run(scope)

    async def finish_turns(self, timeout: float) -> None:
        """Let the turns in progress finish (shutdown); what is left stays owed for another worker."""
        if not self._turn_tasks:
            return
        _, pending = await asyncio.wait(list(self._turn_tasks), timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    async def _work_owed(self, scope: str, item: Owed) -> None:
        """Answer one owed message of the scope (this worker holds its turn) and send the reply.

        A reply stored but never sent (its worker died in between) is sent, not answered
        again. A failure that is not the database's is apologised for and logged; the
        database's own (a restart) is raised, and the message stays owed.
        """
        bot = self._bot
        if bot is None:
            raise RuntimeError("the Telegram application is not initialised")
        store = self.hub.store
        message = store.get(scope, item.message_id)
        if message is None:
            return  # erased (/forget all) or moved with its group
        chat_id = int(message.chat) if message.chat and message.chat.lstrip("-").isdigit() else _chat_of(scope)
        private = scope.startswith("user:")
        reply_to = None if private else _message_number(message.ext_id)
        thread_id = self._threads.get(message.id)
        if item.answer:
            earlier = self.hub.stored_reply(message)
            if earlier is not None:
                if earlier.ext_id is None:  # answered, but the worker died before sending it
                    log.warning("sending the stored reply to message %s of %s: its worker stopped before sending it", message.id, scope)
                    again = Reply(text=earlier.text, agent=earlier.agent, message_id=message.id, reply_id=earlier.id, scope=scope)
                    await self.deliver(bot, chat_id, again, reply_to=reply_to, thread_id=thread_id, defer_unsent=True)
                return
        stop_typing = asyncio.Event()
        typing = self._start_typing(bot, chat_id, thread_id, stop_typing) if item.answer else None
        try:
            reply = await self.hub.answer_queued(message, addressed=item.answer)
        except Exception as exc:
            if is_transient(exc):
                raise
            log.error("answering message %s of %s failed", message.id, scope, exc_info=exc)
            if item.answer:
                await self.send_text(bot, chat_id, APOLOGY_SAVED, reply_to=reply_to, thread_id=thread_id, what="apology")
            return
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
        await self.deliver(bot, chat_id, reply, reply_to=reply_to, thread_id=thread_id, defer_unsent=True)
        if reply.kind == "agent":
            self.reminders.sweep()  # the answer may have set a reminder due before the next sweep

    def reply_target(self, scope: str, chat_id: int, message_id: int, text: str | None, *, chunk_span: bool = False) -> str:
        """The ext id a reply (or reaction) to Telegram message ``message_id`` points at.

        A long reply goes out in chunks and only the first chunk's id is stored. A later
        chunk is traced back to the newest stored reply sent before it, when the chunk's
        text (``text``, as Telegram quotes it) is part of that reply, or, without text
        (a reaction), when the id falls within that reply's chunks. Read from the store, so
        every worker resolves it alike; otherwise the id stays as it is (the router decides).
        """
        ext_id = f"{chat_id}:{message_id}"
        store = self.hub.store
        if store.find_ext(scope, ext_id) is not None or (text is None and not chunk_span):
            return ext_id
        best: tuple[int, Any] | None = None
        for stored in store.window(scope, 200):
            if stored.role != "agent" or not stored.ext_id or not stored.ext_id.startswith(f"{chat_id}:"):
                continue
            number = _message_number(stored.ext_id)
            if number is not None and number < message_id and (best is None or number > best[0]):
                best = (number, stored)
        if best is None:
            return ext_id
        number, stored = best
        rendered = self.render(Reply(text=stored.text, agent=stored.agent))
        if text is not None:
            fits = " ".join(text.split())[:200] in " ".join(rendered.split())
        else:
            fits = message_id - number < len(split_message(rendered))
        return stored.ext_id if fits else ext_id

    async def on_reaction(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A reaction on one of the bot's replies: feedback for the agent that wrote it, never answered."""
        reaction = update.message_reaction
        if reaction is None:
            return
        chat, user = reaction.chat, reaction.user
        user_id = user.id if user else None
        if not is_allowed(self.settings, user_id, chat.id):
            return  # silently: a reaction gets nothing back, not even the refusal
        scope = scope_for(chat.type, chat.id, user_id)
        ext_id = self.reply_target(scope, chat.id, reaction.message_id, None, chunk_span=True)
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

    async def _keep_document(self, bot: Bot, scope: str, media: Media) -> tuple[str, int] | str:
        """Download a text document into the scope's vault: ``(name, characters)``, or the name when unreadable."""
        name = media.name or "document"
        try:
            file = await call_with_retry(lambda: bot.get_file(media.file_id or ""), self.retry, f"getFile {name}")
            data = await file.download_as_bytearray()
        except TelegramError as exc:
            log.warning("could not download %s in %s: %s", name, scope, exc)
            return name
        body = read_text_document(data)
        if body is None:
            return name
        # Off the loop: a 1 MB document is indexed in the same transaction.
        await asyncio.to_thread(
            add_vault_item, self.hub.store, scope, "document", body, title=name, meta={"source": "telegram"}, now=self.hub.deps.clock()
        )
        return name, len(body)

    async def on_edit(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """An edited message: its stored text and search index follow; its route stays; no new answer."""
        message, chat, user = update.edited_message, update.effective_chat, update.effective_user
        if message is None or chat is None or (message.text is None and message.caption is None):
            return
        user_id = user.id if user else None
        if not self.allowed(user_id, chat.id):
            return
        addressed, text = self.addressing(message, context.bot)
        if addressed is None or not text.strip():
            return
        scope = scope_for(chat.type, chat.id, user_id)
        stored = self.hub.store.find_ext(scope, f"{chat.id}:{message.message_id}")
        if stored is None:
            return  # never stored (sent before the bot was here): nothing to correct
        origin = forward_origin(message)
        if origin is not None:
            text = f"forwarded from {origin}: {text}"
        async with self.hub.lock_for(scope):
            self.hub.store.edit_text(scope, stored.id, text)
        log.info("message %s of %s edited", stored.id, scope)

    async def on_migrate(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A group became a supergroup: Telegram says so in both chats; either notice moves the memory."""
        message, chat = update.effective_message, update.effective_chat
        if message is None or chat is None:
            return
        if message.migrate_to_chat_id:
            await self.migrate(chat.id, int(message.migrate_to_chat_id))
        elif message.migrate_from_chat_id:
            await self.migrate(int(message.migrate_from_chat_id), chat.id)

    async def migrate(self, old_chat: int, new_chat: int) -> None:
        """Move the group's memory to its supergroup's id: one scope per chat id, everywhere.

        A move, not an alias: afterwards every row (messages, facts, vault, tasks,
        reminders, calls, search index) is under ``group:<new id>``, so every reader (the
        CLI's ``--scope``, search, erase) needs no alias lookup, and reminders go to the
        new chat. Idempotent: the second notice finds nothing left to move.
        """
        old_scope, new_scope = f"group:{old_chat}", f"group:{new_chat}"
        self._migrated_from[new_chat] = old_chat
        self.moved_scopes[old_scope] = new_scope
        async with self.hub.lock_for(old_scope), self.hub.lock_for(new_scope):
            moved = await asyncio.to_thread(
                self.hub.store.move_scope, old_scope, new_scope, old_chat=str(old_chat), new_chat=str(new_chat)
            )
        self.reminders.scope_moved(old_scope, new_scope)
        if moved:
            log.info("group %s became supergroup %s; its memory moved: %s", old_chat, new_chat, moved)
        if is_allowed(self.settings, None, old_chat) and not is_allowed(self.settings, None, new_chat):
            log.warning("allowed group %s is now supergroup %s: add %s to HUB_ALLOWED_CHATS", old_chat, new_chat, new_chat)

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
        if isinstance(error, _ReplyOwed):
            await self.send_text(
                context.bot, error.chat_id, APOLOGY_SAVED if error.saved else APOLOGY, thread_id=error.thread_id, what="apology"
            )

    def _note_conflict_over(self) -> None:
        if self._conflict_logged:
            self._conflict_logged = False
            log.info("updates arrive again: the other poller is gone")

    # -- /forget all in groups ------------------------------------------------------------
    async def _guard_forget_all(self, bot: Bot, chat: Chat, user: User | None, message: Message) -> str | None:
        """None when this /forget all may erase the group; else what to answer (nothing is erased).

        Only an administrator (or the group's anonymous admin identity) may, and only by
        sending it twice within FORGET_CONFIRM_SECONDS: a group's memory is everyone's.
        """
        admin = await self._is_admin(bot, chat, user, message)
        if admin is None:
            return ADMIN_UNKNOWN
        if not admin:
            log.info("non-admin %s asked to erase group %s; refused", user.id if user else "?", chat.id)
            return NOT_ADMIN
        # The pending confirmation is a claim of the group (its TTL is the 60 s window), so
        # the second /forget all confirms whichever worker each one reaches.
        who = f"forget-all:{user.id if user else 'anonymous'}"
        scope, now = f"group:{chat.id}", self.hub.deps.clock()
        pending = get_claim(self.hub.store, scope, FORGET_CONFIRM_KEY, now=now)
        if pending is not None and pending.holder == who:
            release_claim(self.hub.store, scope, FORGET_CONFIRM_KEY, who)
            return None
        if pending is not None:  # another administrator's request: this one replaces it
            release_claim(self.hub.store, scope, FORGET_CONFIRM_KEY, pending.holder)
        note = "hub: waiting for /forget all to be confirmed"
        acquire_claim(self.hub.store, scope, FORGET_CONFIRM_KEY, who, note=note, ttl=FORGET_CONFIRM_SECONDS, now=now)
        return CONFIRM_FORGET_ALL

    async def _is_admin(self, bot: Bot, chat: Chat, user: User | None, message: Message) -> bool | None:
        """Whether the sender administers the group (getChatMember); None when Telegram could not say."""
        if message.sender_chat is not None and message.sender_chat.id == chat.id:
            return True  # an anonymous administrator writes as the group itself
        if user is None:
            return False
        try:
            member = await call_with_retry(lambda: bot.get_chat_member(chat.id, user.id), self.retry, "getChatMember")
        except TelegramError as exc:
            log.warning("getChatMember for %s in %s failed: %s", user.id, chat.id, exc)
            return None
        return member.status in (ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR)

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

    async def deliver(
        self, bot: Bot, chat_id: int, reply: Reply, *, reply_to: int | None, thread_id: int | None, defer_unsent: bool = False
    ) -> list[int]:
        """Send a reply in as many messages as it needs; returns the sent message ids.

        Each chunk is sent on its own, so one that fails never loses the rest. The first
        sent id becomes the stored reply's ext_id (a reply to it routes to this agent).
        ``defer_unsent`` (a stored reply, sent from a scope's turn): when Telegram cannot
        be reached for the first chunk even after the retries, raise
        :class:`DeliveryDeferred` so the message stays owed and the stored reply is sent
        later, rather than dropped.
        """
        sent_ids: list[int] = []
        record = self._reply_record(reply)
        for chunk in split_message(self.render(reply)) or ["(empty reply)"]:
            sent = await self.send_text(
                bot,
                chat_id,
                chunk,
                reply_to=reply_to if not sent_ids else None,
                thread_id=thread_id,
                what="reply",
                defer=defer_unsent and not sent_ids and reply.reply_id is not None,
                record=record if not sent_ids else None,
            )
            if sent is not None:
                sent_ids.append(sent.message_id)
                chat_id = sent.chat_id  # a migrated group answers from its new id
        if not sent_ids:
            return sent_ids
        # Only the first chunk's id is kept; a reply to a later chunk is traced back to it from
        # the store (reply_target), so every worker resolves it alike. The reply sender has
        # recorded it already unless the database was away for a moment.
        if record is not None and reply.reply_id is not None and not self.took_recorded(record.key):
            await self._record_sent(reply.reply_id, f"{chat_id}:{sent_ids[0]}")
        self.hub.schedule_after_send(reply)
        return sent_ids

    def _reply_record(self, reply: Reply) -> Record | None:
        """A stored agent reply records its Telegram id (the first chunk's); None for other replies."""
        reply_id = reply.reply_id
        if reply.kind != "agent" or reply_id is None or not reply.scope:
            return None
        store = self.hub.store
        return Record(("reply", reply_id), lambda sent: store.set_ext_id(reply_id, f"{sent.chat_id}:{sent.message_id}"))

    def took_recorded(self, key: Any) -> bool:
        """Whether the reply sender already wrote the record ``key`` of a message it sent."""
        return self._sender is not None and self._sender.take_recorded(key)

    async def _record_sent(self, reply_id: int, ext_id: str) -> None:
        """Record the Telegram id of a sent reply; it also says "sent" to every worker.

        A reply stored without it is sent again by the next holder of the scope's turn (its
        worker died before sending), so when the database is briefly away (a restart) this
        tries again for up to half a claim TTL before giving up: the reply is out already.
        """
        deadline = asyncio.get_running_loop().time() + max(1.0, self.hub.settings.claim_ttl / 2)
        while True:
            try:
                self.hub.store.set_ext_id(reply_id, ext_id)
                return
            except Exception as exc:
                if not is_transient(exc) or asyncio.get_running_loop().time() > deadline:
                    log.exception("could not record Telegram id %s on message %s", ext_id, reply_id)
                    return
                await asyncio.sleep(0.25)

    async def send_text(
        self,
        bot: Bot,
        chat_id: int,
        text: str,
        *,
        reply_to: int | None = None,
        thread_id: int | None = None,
        what: str = "message",
        defer: bool = False,
        record: Record | None = None,
    ) -> Message | None:
        """Send plain text with bounded retries; None when Telegram would not take it
        (``defer``: raise :class:`DeliveryDeferred` instead when it could not be reached).

        A BadRequest (too long by Telegram's count, a vanished thread...) gets one trimmed
        fallback without reply or thread; ChatMigrated (a group became a supergroup) moves
        the group's memory and is followed once; Forbidden (blocked, removed) pauses the
        chat's reminders. ``record``: what the reply sender writes as soon as Telegram took
        the message (when it runs and ``bot`` is the application's; see :meth:`took_recorded`).
        """
        reply_parameters = ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) if reply_to else None
        sender = self._sender if bot is self._bot else None

        def send() -> Awaitable[Message]:
            if sender is not None and record is not None:
                return sender.send(record, chat_id, text, reply_parameters=reply_parameters, message_thread_id=thread_id)
            return bot.send_message(chat_id, text, reply_parameters=reply_parameters, message_thread_id=thread_id)

        try:
            return await call_with_retry(send, self.retry, f"sending {what} to {chat_id}")
        except ChatMigrated as exc:
            new_chat = int(exc.new_chat_id)
            log.info("chat %s migrated to %s", chat_id, new_chat)
            await self.migrate(chat_id, new_chat)
            return await self.send_text(bot, new_chat, text, thread_id=thread_id, what=what)
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
            self.chat_refused(chat_id, exc)
            return None
        except TelegramError as exc:
            # BadRequest is a NetworkError in PTB, but sending it again cannot help.
            if defer and isinstance(exc, (NetworkError, RetryAfter)) and not isinstance(exc, BadRequest):
                log.warning("sending %s to %s failed after retries (%s); it is sent again later", what, chat_id, exc)
                raise DeliveryDeferred(f"{what} to {chat_id} not sent: {exc}") from exc
            log.error("sending %s to %s failed after retries: %s", what, chat_id, exc)
            return None

    def chat_refused(self, chat_id: int, exc: TelegramError) -> None:
        """403: the person blocked the bot or it was removed. Pause the chat's reminders (kept in
        the store, so a restart does not try again), log it once."""
        paused = pause_chat_reminders(self.hub.store, str(chat_id), self.hub.deps.clock())
        if chat_id not in self._forbidden:
            self._forbidden.add(chat_id)
            log.warning(
                "chat %s refuses messages (%s): the bot was blocked or removed; %s paused until it writes again",
                chat_id,
                exc,
                plural(paused, "reminder"),
            )

    def chat_is_back(self, chat_id: int) -> None:
        """The chat wrote: whatever 403 paused resumes."""
        self._forbidden.discard(chat_id)
        resumed = resume_chat_reminders(self.hub.store, str(chat_id))
        if resumed:
            log.info("chat %s writes again; %s resumed", chat_id, plural(resumed, "paused reminder"))
            self.reminders.sweep()

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


def strip_mention(text: str, username: str) -> str:
    """``text`` without ``@username``, and without the spaces and punctuation it leaves behind.

    "hey @bot, list tasks" -> "hey, list tasks"; "hey @bot , list" -> "hey, list";
    "@bot: list tasks" -> "list tasks"; "milk, @bot, please" -> "milk, please". Only the
    seam where the mention was is touched; the rest of the text stays as written.
    """
    pattern = re.compile(rf"(?<![\w@])@{re.escape(username)}\b", re.IGNORECASE)
    out = text
    while (match := pattern.search(out)) is not None:
        before, after = out[: match.start()], out[match.end() :]
        if not before.strip():  # it opened the message: drop what separated it from the rest
            before, after = "", after.lstrip(" \t,:;.!-")
        else:
            before, rest = before.rstrip(" \t"), after.lstrip(" \t")
            if rest[:1] in (",", ":", ";", ".", "!", "?"):
                if before[-1:] in (",", ":", ";"):  # two marks meet: "milk, please", "big?"
                    if rest[0] in ".!?":
                        before, after = before[:-1], rest
                    else:
                        after = rest[1:]
                else:
                    after = rest
            else:
                after = f" {rest}" if rest else ""
        out = before + after
    return out.strip() or text


def _media_note(media: Media, document: tuple[str, int] | str | None) -> str:
    """What the person is told about an attachment."""
    if isinstance(document, tuple):
        return DOCUMENT_SAVED.format(name=document[0], size=plural(document[1], "character"))
    if document is not None or media.kind == "document":
        return DOCUMENT_UNREADABLE.format(name=media.name or "a document")
    what = {"audio": "audio", "dice": "dice", "location": "locations", "venue": "places", "contact": "contacts"}.get(
        media.kind, media.kind + "s"
    )
    return CANT_READ.format(what=what)


def _mentions(message: Message, bot_id: int, username: str) -> bool:
    """True when an entity of the message (or of its caption) names the bot (@username, or a text mention of it)."""
    kinds = [MessageEntity.MENTION, MessageEntity.TEXT_MENTION]
    entities = message.parse_entities(kinds) if message.text is not None else message.parse_caption_entities(kinds)
    for entity, value in entities.items():
        if entity.type == MessageEntity.MENTION and username and value.lower() == f"@{username}":
            return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user is not None and entity.user.id == bot_id:
            return True
    return False


def _emoji(reaction: ReactionType) -> str:
    """The emoji of a reaction ("" for custom emoji and paid stars, which say nothing we can read)."""
    return reaction.emoji if isinstance(reaction, ReactionTypeEmoji) else ""


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
    watch_maildir: bool = False,
) -> Application[Any, Any, Any, Any, Any, Any]:
    """A configured PTB Application around ``hub`` (not initialised, not running).

    ``run_polling``/``run_webhook`` call its post_init (commands, reminder sweep) and
    post_stop; a caller driving it by hand calls them around ``start``/``stop``.
    """
    token = token or settings.telegram_bot_token
    if not token:
        raise ConfigError("TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather and put its token in the environment or .env")
    base_url = base_url if base_url is not None else settings.telegram_base_url
    transport = TelegramBot(
        hub,
        settings,
        retry=retry,
        typing_interval=typing_interval,
        reminder_interval=reminder_interval,
        watch_maildir=watch_maildir,
        max_turns=max_active,
    )
    builder = (
        ApplicationBuilder()
        .token(token)
        .concurrent_updates(ScopeOrderedProcessor(max_active=max_active))
        .post_init(transport.post_init)
        .post_stop(transport.post_stop)
    )
    if base_url:
        builder = builder.base_url(bot_url(base_url)).base_file_url(file_url(base_url))
        transport.bot_urls = (bot_url(base_url), file_url(base_url))
    application = builder.build()
    if application.job_queue is None:
        raise ConfigError("reminders need python-telegram-bot's job queue: pip install 'python-telegram-bot[job-queue]'")
    application.bot_data[BOT_DATA_KEY] = transport
    chats = filters.ChatType.PRIVATE | filters.ChatType.GROUPS
    application.add_handler(MessageHandler(filters.StatusUpdate.MIGRATE, transport.on_migrate))
    application.add_handler(MessageHandler(filters.UpdateType.MESSAGE & chats & ~filters.StatusUpdate.ALL, transport.on_text))
    application.add_handler(MessageHandler(filters.UpdateType.EDITED_MESSAGE & chats, transport.on_edit))
    application.add_handler(MessageReactionHandler(transport.on_reaction))
    application.add_error_handler(transport.on_error)
    return application


def _message_number(ext_id: str | None) -> int | None:
    """The Telegram message id in an ext id ``"<chat id>:<message id>"`` (None for another form)."""
    if not ext_id or ":" not in ext_id:
        return None
    number = ext_id.rsplit(":", 1)[1]
    return int(number) if number.isdigit() else None


def _chat_of(scope: str) -> int:
    """The Telegram chat of a scope: a private chat's id is its user's id; a group's is in its scope."""
    return int(scope.split(":", 1)[1])

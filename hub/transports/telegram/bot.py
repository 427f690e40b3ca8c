"""The Telegram transport: python-telegram-bot in front of the :class:`~scopehub.hub.orchestrator.Hub`.

``build_application(hub, settings)`` (:mod:`.application`) returns a ready, not yet
running, PTB ``Application`` (the tests drive it against a loopback Bot API);
``agents-hub telegram`` runs it with long polling or a webhook (:mod:`.webhook`).

:class:`TelegramBot` holds what one Application shares and its lifecycle; the work is
split by what it handles:

* :mod:`.inbox`: messages in (scopes, addressing in groups, media, documents, forwards);
* :mod:`.answers`: each scope's owed messages answered in order by whichever worker holds
  the scope's turn (:mod:`scopehub.hub.turns`);
* :mod:`.outbox`: replies out (split under the limit, retried, the Telegram id recorded,
  the typing action, blocked chats);
* :mod:`.updates`: edits, reactions (feedback for lessons), group migrations, errors;
* :mod:`.groups`: administrator checks for what erases a group's memory;
* :mod:`.reminders`: reminders delivered by the JobQueue at their due time.

Scope: a private chat is the customer's (``user:<user id>``), a group or supergroup is
its own (``group:<chat id>``); the Telegram id ``"<chat id>:<message id>"`` is the
message's ``ext_id``, so a later reply to one of the bot's messages routes to the agent
that wrote it. Access: ``HUB_ALLOWED_USERS`` / ``HUB_ALLOWED_CHATS`` (both empty =
everyone); a message passes when its sender *or* its chat is listed; anyone else gets
one polite refusal per chat and process, and nothing of theirs is stored.

Start: slow first-use work (litellm, tiktoken) is done in a thread before polling; a
second process polling the same token (409) is one log line, retried quietly.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from telegram import Bot, BotCommand, Update
from telegram.error import TelegramError
from telegram.ext import Application

from scopehub.hub.orchestrator import Hub, Reply
from scopehub.hub.settings import Settings
from scopehub.hub.transports.telegram.access import Access
from scopehub.hub.transports.telegram.answers import Answers
from scopehub.hub.transports.telegram.buttons import Buttons
from scopehub.hub.transports.telegram.delivery import (
    RetryPolicy,
    call_with_retry,
    chat_of,
    is_allowed,
)
from scopehub.hub.transports.telegram.groups import GroupGuard
from scopehub.hub.transports.telegram.inbox import Inbox
from scopehub.hub.transports.telegram.logs import quiet_library_logs
from scopehub.hub.transports.telegram.outbox import TYPING_DELAY, Outbox
from scopehub.hub.transports.telegram.reminders import ReminderScheduler
from scopehub.hub.transports.telegram.streaming import ReplyStream, stream_mode
from scopehub.hub.transports.telegram.texts import HUB_COMMANDS
from scopehub.hub.transports.telegram.topics import AgentTopics
from scopehub.hub.transports.telegram.updates import ChatUpdates
from scopehub.hub.transports.telegram.voice import Transcriber

__all__ = ["ALLOWED_UPDATES", "BOT_DATA_KEY", "TelegramBot"]

log = logging.getLogger(__name__)

BOT_DATA_KEY = "agents_hub"  # application.bot_data[BOT_DATA_KEY] is the TelegramBot
# What run_polling/run_webhook must ask Telegram for: without "message_reaction" in the
# list, Telegram never sends reactions (they are not in its default set).
ALLOWED_UPDATES: tuple[str, ...] = (Update.MESSAGE, Update.EDITED_MESSAGE, Update.MESSAGE_REACTION, Update.CALLBACK_QUERY)
REFLECT_FIRST_S = 60.0  # the first reflection check after start: scopes due since the last run

_COMMAND_NAME_RE = re.compile(r"^[a-z0-9_]{1,32}$")


class TelegramBot:
    """The handlers and state behind one Application (kept in ``bot_data[BOT_DATA_KEY]``)."""

    def __init__(
        self,
        hub: Hub,
        settings: Settings,
        *,
        retry: RetryPolicy | None = None,
        typing_interval: float = 4.0,
        typing_delay: float | None = None,
        reminder_interval: float = 20.0,
        watch_maildir: bool = False,
        max_turns: int = 32,
        stream_every: float | None = None,
    ) -> None:
        self.hub = hub
        self.settings = settings
        self.retry = retry or RetryPolicy()
        self.typing_interval = typing_interval
        # How long an answer may take before "typing…" shows (outbox.TYPING_DELAY, at most one interval).
        self.typing_delay = min(TYPING_DELAY, typing_interval) if typing_delay is None else typing_delay
        self.reminders = ReminderScheduler(self, reminder_interval)
        self.watch_maildir = watch_maildir
        self._maildir_watcher: Any = None
        self._bot: Bot | None = None  # the application's bot, for answers worked off the update
        self.bot_urls: tuple[str, str] | None = None  # (base_url, base_file_url) when not Telegram's
        # Groups that became supergroups during this process: old scope -> new scope, and
        # new chat id -> old chat id (an allowlisted group stays allowed under its new id).
        self.moved_scopes: dict[str, str] = {}
        self._migrated_from: dict[int, int] = {}
        self.stream_every = stream_every  # seconds between streamed updates (None: streaming.py's defaults)
        self.drafts_work = True  # sendMessageDraft answered; False once the server refused it
        self.outbox = Outbox(self)
        self.answers = Answers(self, max_turns)
        self.inbox = Inbox(self)
        self.updates = ChatUpdates(self)
        self.groups = GroupGuard(self)
        self.buttons = Buttons(self)
        self.access = Access(self)
        self.transcriber = Transcriber(settings)
        self.topics = AgentTopics(self)

    # -- lifecycle ----------------------------------------------------------------------
    async def post_init(self, application: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Warm up off the loop, register the commands, start the reminder sweep, hook /forget all.

        PTB runs this before polling (or the webhook) starts, so the slow first-use work
        (importing litellm, loading the tokenizer's encoding) never blocks a chat.
        """
        await asyncio.to_thread(self.hub.warm_up)
        await asyncio.to_thread(self.transcriber.warm_up)
        quiet_library_logs()  # litellm, imported by the warm-up, adds a stdout handler of its own
        self._bot = application.bot
        self.topics.start(application.bot)
        await self.outbox.start_sender(application.bot)
        if self.reminders.cancel_scope not in self.hub.erase_hooks:
            self.hub.erase_hooks.append(self.reminders.cancel_scope)
        if self.reminders.answered_in not in self.hub.recorded_hooks:
            self.hub.recorded_hooks.append(self.reminders.answered_in)
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
        application.job_queue.run_repeating(self.answers.answer_stalled_job, interval=interval, first=interval, name="answers:stalled")
        if self.watch_maildir:
            self._start_maildir(application)
        self.start_reflection(application.job_queue)

    def _start_maildir(self, application: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Files from outside programs become messages; their answers go to the scope's chat."""
        from scopehub.hub.settings import maildir_root
        from scopehub.hub.transports.maildir.bridge import (
            RECURRING_CHECK,
            send_recurring,
            start_watcher,
        )

        bot = application.bot

        async def to_chat(scope: str, reply: Reply) -> None:
            await self.deliver(bot, chat_of(scope), reply, reply_to=None, thread_id=None)

        root = maildir_root(self.settings)
        self._maildir_watcher = start_watcher(self.hub, root, sink=to_chat)

        async def recurring(context: Any) -> None:  # the job queue awaits its callbacks
            send_recurring(self.hub, root)

        assert application.job_queue is not None
        application.job_queue.run_repeating(recurring, interval=RECURRING_CHECK, first=1.0, name="maildir:recurring")

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
        """Unhook from the hub (the hub may outlive this Application); stop the Maildir watcher."""
        await self.outbox.stop_sender()
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

    # -- shared by the parts --------------------------------------------------------------
    def allowed(self, user_id: int | None, chat_id: int) -> bool:
        """The allowlist (for a supergroup also under its group's id), or a pairing (:mod:`.access`)."""
        return self.access.allowed(user_id, chat_id)

    def migrated_from(self, chat_id: int) -> int | None:
        """The id a supergroup had as a group, when it became one during this process."""
        return self._migrated_from.get(chat_id)

    def note_conflict_over(self) -> None:
        """A message arrived: a 409 from another poller is over (said once)."""
        self.updates.note_conflict_over()

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

    def reply_stream(
        self,
        bot: Bot,
        chat_id: int,
        draft_id: int,
        *,
        thread_id: int | None,
        reply_to: int | None,
        shown: asyncio.Event,
        find_thread: Callable[[], Awaitable[int | None]] | None = None,
    ) -> ReplyStream | None:
        """A stream for one answer into the chat (None: ``HUB_STREAM=off``); ``shown`` is set at its first text.

        ``find_thread``: where the answer goes, asked when its first text is shown (an agent's topic).
        """
        mode = stream_mode(self.settings.stream, private=chat_id > 0, drafts_work=self.drafts_work)
        if mode is None:
            return None
        return ReplyStream(
            self,
            bot,
            chat_id,
            mode=mode,
            draft_id=draft_id,
            thread_id=thread_id,
            reply_to=reply_to,
            every=self.stream_every,
            on_first=shown,
            find_thread=find_thread,
        )

    # The outbox and answers, as reminders, the Maildir bridge and the webhook use them.
    async def deliver(
        self, bot: Bot, chat_id: int, reply: Reply, *, reply_to: int | None, thread_id: int | None, defer_unsent: bool = False
    ) -> list[int]:
        """Send a reply in as many messages as it needs (see :meth:`.outbox.Outbox.deliver`)."""
        return await self.outbox.deliver(bot, chat_id, reply, reply_to=reply_to, thread_id=thread_id, defer_unsent=defer_unsent)

    async def send_text(self, bot: Bot, chat_id: int, text: str, **options: Any) -> Any:
        """Send plain text with bounded retries (see :meth:`.outbox.Outbox.send_text`)."""
        return await self.outbox.send_text(bot, chat_id, text, **options)

    def took_recorded(self, key: Any) -> bool:
        """Whether the reply sender already wrote the record ``key`` of a message it sent."""
        return self.outbox.took_recorded(key)

    async def finish_turns(self, timeout: float) -> None:
        """Let the turns in progress finish (shutdown); what is left stays owed for another worker."""
        await self.answers.finish_turns(timeout)


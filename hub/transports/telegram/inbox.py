"""Messages in: text, captions and media, from private chats and groups, stored before anything else.

:class:`Inbox` handles the ``message`` updates. In a private chat every message is for
the bot; in a group only a mention (``@bot``), a reply to the bot, or a command is, but
every message is stored (the mention stripped). The sender's name goes with a group
message ("Ann: ..."), a forward says where it came from, a text document is kept in the
vault, and what cannot be read is said so. The message is stored and marked owed
(:meth:`Inbox.accept`); its answer comes from the scope's turn (:mod:`.answers`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from telegram import Bot, Message, MessageEntity, Update
from telegram.constants import ChatType
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from scopehub.hub.dbwork import in_db_thread
from scopehub.hub.orchestrator import Inbound, Reply
from scopehub.hub.transports.telegram.delivery import (
    call_with_retry,
    message_number,
    scope_for,
    split_message,
)
from scopehub.hub.transports.telegram.media import (
    Media,
    describe_media,
    forward_origin,
    read_text_document,
)
from scopehub.hub.transports.telegram.outbox import render
from scopehub.hub.transports.telegram.texts import CANT_READ, DOCUMENT_SAVED, DOCUMENT_UNREADABLE
from scopehub.hub.transports.telegram.voice import (
    NO_TRANSCRIBE_MODEL,
    NOT_TRANSCRIBED,
    TranscriptionFailed,
    transcribed_marker,
)
from scopehub.hub.wording import plural
from scopehub.memory import add_vault_item, chat_settings

if TYPE_CHECKING:
    from scopehub.hub.transports.telegram.bot import TelegramBot

__all__ = ["INTAKE", "Inbox", "Intake", "ReplyOwed", "message_body", "strip_mention"]

log = logging.getLogger(__name__)

SPOKEN = ("voice note", "audio")  # media kinds a transcription model can turn into text
_LEADING_COMMAND_RE = re.compile(r"^/([A-Za-z0-9_-]{1,64})(?:@([A-Za-z0-9_]{3,64}))?(?=\s|$)")


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


class ReplyOwed(Exception):
    """Raised from the message handler when it failed before answering someone who is owed an answer."""

    def __init__(self, chat_id: int, thread_id: int | None, saved: bool) -> None:
        super().__init__(f"handling a message in chat {chat_id} failed")
        self.chat_id = chat_id
        self.thread_id = thread_id
        self.saved = saved


class Inbox:
    """The ``message`` updates of one :class:`~.bot.TelegramBot`."""

    def __init__(self, transport: TelegramBot) -> None:
        self.transport = transport

    @property
    def hub(self) -> Any:
        return self.transport.hub

    # -- addressing -----------------------------------------------------------------------
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

    # -- the handler ----------------------------------------------------------------------
    async def on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """One message (text, caption, media): store it, answer it when addressed."""
        transport = self.transport
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
        outbox = transport.outbox
        if not transport.allowed(user_id, chat.id):
            if private and await transport.access.try_pairing(bot, chat, user, text):
                return  # an invite code: paired and welcomed, or told it lets nobody in
            if private or addressed:
                await outbox.refuse_once(bot, chat.id, thread_id)
            return
        if addressed and await transport.access.invite(bot, chat, user, text):
            return  # /invite: a code for someone else (owners only), never stored
        transport.note_conflict_over()
        scope = scope_for(chat.type, chat.id, user_id)
        ext_id = f"{chat.id}:{message.message_id}"
        sender = (user.full_name or user.username or str(user.id)) if user else None
        agent = transport.topics.agent_of_thread(scope, thread_id) if private else None  # written in an agent's topic
        # Media without a caption is stored as its marker and never goes to an agent: what
        # it says is "this came", and the person is told what the bot made of it.
        answerable = bool(addressed) and bool(text)

        def inbound_of(body: str, reply_to_ext: str | None) -> Inbound:
            return Inbound(
                scope=scope, text=body, chat=str(chat.id), sender=sender, ext_id=ext_id,
                reply_to_ext=reply_to_ext, addressed=answerable, agent=agent,
            )  # fmt: skip

        intake = INTAKE.get()
        parent = message.reply_to_message
        # The store's part off the event loop where its calls wait on the network
        # (scopehub.hub.dbwork): every other chat's work would wait for these round trips.
        # A plain message (no media, no reply to trace, no command to guard) arrives and is
        # stored in one step, one thread hop on PostgreSQL; any other in two, with what it
        # needs in between.
        transcribing, spoken, saved_document, stored = False, False, None, None
        plain = media is None and parent is None and not (addressed and transport.groups.may_hold(text, private))
        if plain:
            try:
                resumed, handled, stored = await in_db_thread(
                    self.hub.store, self._arrive_and_store, chat.id, scope, ext_id, inbound_of(message_body(message, None, text), None)
                )
            except Exception as exc:
                self._not_stored(exc, ext_id, scope, bool(addressed), chat.id, thread_id)
                return
        else:
            resumed, handled, _ = await in_db_thread(self.hub.store, self._arrived, chat.id, scope, ext_id, media is not None and not text)
        outbox.chat_is_back(chat.id, resumed=resumed)
        if handled:
            log.info("update for %s in %s already handled; skipping the redelivery", ext_id, scope)
            return  # stored but unanswered (a crash in between) goes on: the hub answers it
        if not plain:
            if addressed:
                held = await transport.groups.guard(bot, chat, user, message, text)
                if held is not None:  # not an administrator, or not confirmed yet: nothing erased or changed
                    words, buttons = held
                    reply_to = None if private else message.message_id
                    await outbox.send_text(bot, chat.id, words, reply_to=reply_to, thread_id=thread_id, what="admin check", markup=buttons)
                    return
            saved_document = await self._keep_document(bot, scope, media) if media is not None and media.is_text_document else None
            body = message_body(message, media, text, kept=isinstance(saved_document, tuple))
            reply_to_ext = None
            if parent is not None:
                from_bot = parent.from_user is not None and parent.from_user.id == bot.id
                parent_text = parent.text if parent.text is not None else parent.caption
                reply_to_ext = await in_db_thread(
                    self.hub.store, self.reply_target, scope, chat.id, parent.message_id, parent_text if from_bot else None
                )
            inbound = inbound_of(body, reply_to_ext)
            # A voice note (or audio) for us, with transcription on: stored as its marker first,
            # answered once its transcript is in (the model call comes after the message is kept).
            spoken = media is not None and media.kind in SPOKEN and bool(addressed) and not text
            transcribing = spoken and transport.transcriber.enabled
            try:
                if transcribing:
                    stored = await in_db_thread(self.hub.store, self.hub.store_inbound, inbound)
                else:
                    stored = await in_db_thread(self.hub.store, self._store_owed, inbound)
            except Exception as exc:
                self._not_stored(exc, ext_id, scope, bool(addressed), chat.id, thread_id)
                return
        if not transcribing and stored is not None and thread_id is not None:
            transport.answers.note_thread(stored.id, thread_id)
        reply_to = None if private else message.message_id
        if transcribing and stored is not None:
            assert media is not None
            await self._transcribe(bot, scope, stored, media, thread_id, reply_to)
        # A caption is answered as text; the note is for what has no words of its own, and
        # for a kept document (the person should know where it went).
        elif media is not None and addressed and (not text or saved_document is not None):
            note = NO_TRANSCRIBE_MODEL.format(what=_kinds(media.kind)) if spoken else _media_note(media, saved_document)
            await outbox.send_text(bot, chat.id, note, reply_to=reply_to, thread_id=thread_id, what="media note")
        if stored is None:
            return  # a redelivery of something handled (or being handled) already
        answers = transport.answers
        if intake is not None:
            answers.start_turn(scope)  # the webhook answers "received" now; the turn answers
        else:
            await answers.turns.run(scope)

    async def _transcribe(self, bot: Bot, scope: str, stored: Any, media: Media, thread_id: int | None, reply_to: int | None) -> None:
        """Download and transcribe a stored voice note; its text becomes the transcript, owed an answer.

        When it cannot be transcribed the person is told why, and the marker is only tagged.
        """
        transport = self.transport
        turns = transport.answers.turns
        stop = asyncio.Event()
        typing = transport.outbox.start_typing(bot, int(stored.chat), thread_id, stop)
        try:
            file = await call_with_retry(lambda: bot.get_file(media.file_id or ""), transport.retry, f"getFile {media.kind}")
            data = bytes(await file.download_as_bytearray())
            language = chat_settings(self.hub.store, scope).language
            spoken = await transport.transcriber.transcribe(media.name or _audio_name(file.file_path), data, language=language)
        except (TelegramError, TranscriptionFailed) as exc:
            log.warning("voice note %s of %s not transcribed: %s", stored.id, scope, exc)
            turns.owe(scope, stored.id, stored.text, answer=False)
            reason = str(exc) if isinstance(exc, TranscriptionFailed) else "Telegram did not give me the file"
            await transport.outbox.send_text(
                bot, int(stored.chat), NOT_TRANSCRIBED.format(what=media.kind, reason=reason), reply_to=reply_to, thread_id=thread_id, what="voice note"
            )
            return
        finally:
            stop.set()
            typing.cancel()
        text = f"{transcribed_marker(media.kind)} {spoken}"
        async with self.hub.lock_for(scope):
            self.hub.store.edit_text(scope, stored.id, text)
        turns.owe(scope, stored.id, text, answer=True)
        if thread_id is not None:
            transport.answers.note_thread(stored.id, thread_id)

    def accept(self, inbound: Inbound, thread_id: int | None = None) -> Any:
        """Store the message and mark it owed (answer, or only tag); None when it needs nothing more.

        This is all a webhook worker does before telling Telegram "received": a worker
        killed afterwards loses nothing, the mark outlives it.
        """
        stored = self._store_owed(inbound)
        if stored is not None and thread_id is not None:
            self.transport.answers.note_thread(stored.id, thread_id)
        return stored

    def _store_owed(self, inbound: Inbound, *, ext_id_unseen: bool = False) -> Any:
        """The store's part of :meth:`accept` (any thread): the message stored and marked owed.

        ``ext_id_unseen``: this session looked the delivery's id up already and found nothing."""
        stored = self.hub.store_inbound(inbound, ext_id_unseen=ext_id_unseen)
        if stored is not None:
            self.transport.answers.turns.owe(inbound.scope, stored.id, inbound.text, answer=inbound.addressed)
        return stored

    def _arrive_and_store(self, chat_id: int, scope: str, ext_id: str, inbound: Inbound) -> tuple[int, bool, Any]:
        """:meth:`_arrived`, then (unless handled already) :meth:`_store_owed`, in one store
        session (any thread): ``(reminders resumed, handled already, the stored message)``."""
        resumed, handled, existing = self._arrived(chat_id, scope, ext_id, False)
        return resumed, handled, (None if handled else self._store_owed(inbound, ext_id_unseen=existing is None and inbound.ext_id == ext_id))

    @staticmethod
    def _not_stored(exc: Exception, ext_id: str, scope: str, addressed: bool, chat_id: int, thread_id: int | None) -> None:
        """A message the store could not keep: in a webhook, an error status (Telegram delivers
        the update again); else the person is told it is owed an answer (raises)."""
        intake = INTAKE.get()
        if intake is not None:
            intake.kept = False
            log.warning("update for %s in %s not stored (%s); Telegram will deliver it again", ext_id, scope, exc)
            return
        if addressed:
            raise ReplyOwed(chat_id, thread_id, False) from exc
        raise exc

    def _arrived(self, chat_id: int, scope: str, ext_id: str, media_only: bool) -> tuple[int, bool, Any]:
        """The store's part of a message's arrival (any thread): ``(reminders resumed, whether
        this update was handled already, the message already stored under its id or None)``.
        The chat wrote, so what a 403 paused resumes."""
        store = self.hub.store
        resumed = self.transport.outbox.resume_chat(chat_id)
        existing = store.find_ext(scope, ext_id)
        return resumed, existing is not None and (store.is_answered(existing.id) or media_only), existing

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
            number = message_number(stored.ext_id)
            if number is not None and number < message_id and (best is None or number > best[0]):
                best = (number, stored)
        if best is None:
            return ext_id
        number, stored = best
        rendered = render(Reply(text=stored.text, agent=stored.agent))
        if text is not None:
            fits = " ".join(text.split())[:200] in " ".join(rendered.split())
        else:
            fits = message_id - number < len(split_message(rendered))
        return stored.ext_id if fits else ext_id

    async def _keep_document(self, bot: Bot, scope: str, media: Media) -> tuple[str, int] | str:
        """Download a text document into the scope's vault: ``(name, characters)``, or the name when unreadable."""
        name = media.name or "document"
        try:
            file = await call_with_retry(lambda: bot.get_file(media.file_id or ""), self.transport.retry, f"getFile {name}")
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


def _audio_name(path: str | None) -> str:
    """A file name the transcription model takes by its extension (Telegram's voice notes are Ogg Opus)."""
    name = PurePosixPath(path or "").name
    return name if "." in name else "voice.ogg"


def message_body(message: Message, media: Media | None, text: str, *, kept: bool = False) -> str:
    """What is stored (and an agent reads) for a message: its text; media as its marker,
    before the caption with what the agent can make of the file; where a forward came from."""
    if media is None:
        body = text
    elif not text:
        body = media.marker  # never sent to an agent on its own (see on_text)
    else:
        body = f"{media.for_agent(kept=kept)} {text}"
    origin = forward_origin(message)
    return f"forwarded from {origin}: {body}" if origin is not None else body


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
    return CANT_READ.format(what=_kinds(media.kind))


def _kinds(kind: str) -> str:
    """What people call several of a media kind ("photos", "voice notes", "audio")."""
    return {"audio": "audio", "dice": "dice", "location": "locations", "venue": "places", "contact": "contacts"}.get(kind, kind + "s")


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

"""The Hub: store → route → tag → build context → run the agent → store the reply.

Transports (Telegram, terminal, eval replays) normalise what they receive into an
``Inbound`` and call :meth:`Hub.handle`. The message is committed before any model
call, so a failing model never loses it. Messages of one scope are handled in order
(a lock per scope); different scopes run concurrently.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from scopehub.agents import (
    AgentRegistry,
    ToolContext,
    agent_tools,
    channels_of,
    format_channel_message,
    team_channels,
)
from scopehub.hub.context import Context, build_context
from scopehub.hub.context.awareness import (
    Awareness,
    relative_time,
    render_awareness,
    still_talked_about,
)
from scopehub.hub.context.builder import select_history
from scopehub.hub.context.lessons import render_lessons
from scopehub.hub.context.offer import wants_team
from scopehub.hub.context.prompt import agent_prompt
from scopehub.hub.context.record import SentSections, sent_record
from scopehub.hub.context.tokens import Tokenizer, get_tokenizer
from scopehub.hub.digest.service import BACKGROUND_CLAIMS, DigestSection
from scopehub.hub.errors import ModelError, ModelNotConfigured, ModelUnavailable
from scopehub.hub.models import ChatModel, price_call
from scopehub.hub.routing import AgentProfile, LocalClassifier, Route, refine_with_llm, route
from scopehub.hub.routing.correction import detect_correction
from scopehub.hub.runtime import AgentResult, run_agent
from scopehub.hub.settings import Settings
from scopehub.hub.turns import is_bookkeeping
from scopehub.memory import (
    CallRecord,
    DuplicateMessage,
    Event,
    Feedback,
    Lesson,
    Message,
    NewMessage,
    Store,
    acquire_claim,
    active_claims,
    advance_channel_cursor,
    advance_cursor,
    agent_memory,
    cursor_of,
    drop_expired_claim,
    expired_claims,
    latest_events,
    pending_feedback,
    record_feedback,
    release_claim,
    unconsumed_events,
    unseen_channel_messages,
    validate_scope,
)

__all__ = ["Deps", "DigestService", "FactsService", "Hub", "Inbound", "LessonService", "ReflectionService", "Reply"]

log = logging.getLogger(__name__)

AWARENESS_EVENTS = 20  # unconsumed events read per call; the budget decides how many are shown
AWARENESS_CONTEXT = 3  # latest events of collaborators considered...
AWARENESS_HORIZON = 6 * 3600.0  # ...when they are this recent (seconds): old news is not news
AWARENESS_EARLIER = 20  # newest consumed events checked for being still talked about (hub.context.awareness)
CHANNEL_DIGEST = 10  # unseen channel messages read per call; the awareness budget decides how many are shown
# A chat command: a slash and a lower-case word at the very start ("/usr/bin" is not one).
_COMMAND_RE = re.compile(r"^/([a-z_]+)(?:@\w+)?(?=\s|$)")

MODEL_DOWN_REPLY = "Sorry, I can't reach the language model right now. Your message is saved; please try again in a minute."
MODEL_FAILED_REPLY = "Sorry, the language model rejected this request. Your message is saved; try rephrasing it."
MODEL_SLOW_REPLY = "Sorry, the language model is taking too long to answer. Your message is saved; please try again in a minute."
UNKNOWN_COMMAND_REPLY = "unknown command /{name}; /help lists them"
NO_ANSWER_REPLY = "I have no answer to that. Could you rephrase it?"
NO_MODEL_REPLY = "No language model is configured. Set HUB_MODEL (see README). Your message is saved."


class DigestService(Protocol):
    """The scope's digest of older history: its section for a call, and its compaction after a reply."""

    def section(self, scope: str, before_id: int | None = None) -> DigestSection: ...

    async def after_reply(self, scope: str, holder: str) -> object: ...


class ReflectionService(Protocol):
    """Reflection into knowledge fragments, run by a transport's schedule or on demand."""

    async def reflect(self, scope: str, holder: str, *, now: float | None = None) -> object: ...

    async def reflect_due(self, holder: str, *, now: float | None = None) -> list[Any]: ...


class FactsService(Protocol):
    """Persistent facts: the block for every call, and learning after a reply."""

    def block(self, scope: str, tokenizer: Tokenizer, budget: int) -> str: ...

    async def after_reply(self, scope: str, message: Message) -> None: ...


class LessonService(Protocol):
    """Agent lessons: learning one from the person's feedback, after the reply is sent."""

    async def learn(self, feedback: Feedback) -> Lesson: ...


@dataclass
class Deps:
    """The services the hub uses, passed down explicitly."""

    store: Store
    settings: Settings
    model: ChatModel | None = None
    router_model: ChatModel | None = None
    tokenizer: Tokenizer = field(default_factory=get_tokenizer)
    clock: Callable[[], float] = time.time
    facts: FactsService | None = None
    # Services tools may use, by name (``ToolContext.extra``): e.g. "dispatch", which writes
    # into an outside team's Maildir outbox. The composition root fills it.
    tool_services: dict[str, Any] = field(default_factory=dict)
    lessons: LessonService | None = None  # None: the hub's LessonKeeper on ``model``
    digest: DigestService | None = None
    reflector: ReflectionService | None = None


@dataclass(frozen=True)
class Inbound:
    """A message from any transport, normalised."""

    scope: str
    text: str
    chat: str | None = None
    sender: str | None = None
    ext_id: str | None = None  # the transport's id (Telegram message id), unique per scope
    reply_to_ext: str | None = None  # the transport id of the message this replies to
    ts: float | None = None
    addressed: bool = True  # False: store and tag, but do not answer (group chatter)
    agent: str | None = None  # addressed to this agent by the transport (a Maildir inbox): no routing


@dataclass(frozen=True)
class Reply:
    """What the person gets back, with what it cost."""

    text: str
    kind: str = "agent"  # agent | command | error
    agent: str | None = None
    also_sees: tuple[str, ...] = ()
    via: str | None = None
    message_id: int | None = None  # the stored inbound message
    reply_id: int | None = None  # the stored reply
    tokens: dict[str, int] = field(default_factory=dict)
    full_history_tokens: int = 0
    scope: str | None = None


CommandHandler = Callable[["Hub", Inbound, Message, str], Awaitable[str]]


class Hub:
    """The orchestrator. Pure decisions (router, context) in, I/O (store, model) at the edges."""

    def __init__(self, deps: Deps, registry: AgentRegistry, *, commands: dict[str, CommandHandler] | None = None) -> None:
        if not len(registry):
            raise ValueError("the hub needs at least one agent")
        self.deps = deps
        self.registry = registry
        self.profiles = [
            AgentProfile(name=s.name, description=s.description, examples=s.examples, keywords=s.keywords) for s in registry
        ]
        self.classifier = self._build_classifier()
        self.prompts = {spec.name: agent_prompt(spec) for spec in registry}
        self.default_also_sees = {spec.name: spec.also_sees for spec in registry if spec.also_sees}
        # Talk channels: "team" (everyone) and those the agents declare, members resolved.
        self.channels = team_channels(registry)
        self._lessons: LessonService | None = None
        if commands is None:
            from scopehub.hub.commands import COMMANDS

            commands = COMMANDS
        self.commands = dict(commands)
        # Called after /forget all (a transport cancels that scope's scheduled reminders).
        self.erase_hooks: list[Callable[[str], Awaitable[None]]] = []
        # Who this process is when it claims work (host, pid, instance): claims say who holds them.
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._locks: dict[str, asyncio.Lock] = {}
        # Section texts already kept by a call record: later records refer to them.
        self.sent_sections = SentSections()
        self._background: set[asyncio.Task[Any]] = set()
        # Learning after a reply, per scope: the replies still to learn from, oldest first,
        # and the task working through them. A new message of the scope pauses that task.
        self._to_learn: dict[str, list[Reply]] = {}
        self._learning: dict[str, asyncio.Task[Any]] = {}

    def _build_classifier(self) -> LocalClassifier:
        """The local router's scorer as ``HUB_ROUTER_EMBEDDER`` asks (``hub.routing.defaults``)."""
        from scopehub.hub.routing.defaults import build_router

        classifier, self.router_config = build_router(self.profiles, self.deps.settings.router_embedder)
        self.embedder_name = self.router_config.embedder
        return classifier

    def warm_up(self) -> None:
        """Do the slow first-use work now: the tokenizer's encoding, the models' imports.

        Blocking; a transport runs it in a thread before it takes messages, so the first
        message does not freeze the event loop (every other chat) for seconds. A model
        without ``warm_up`` is left as it is.
        """
        self.deps.tokenizer.count("warm up")
        for model in (self.deps.model, self.deps.router_model):
            prepare = getattr(model, "warm_up", None)
            if callable(prepare):
                prepare()

    # -- helpers ----------------------------------------------------------------------
    @property
    def store(self) -> Store:
        return self.deps.store

    @property
    def settings(self) -> Settings:
        return self.deps.settings

    @property
    def lessons(self) -> LessonService:
        """The lesson learner: ``Deps.lessons``, else a LessonKeeper on the agents' model."""
        if self.deps.lessons is not None:
            return self.deps.lessons
        if self._lessons is None:
            from scopehub.hub.lessons import LessonKeeper

            deps = self.deps
            self._lessons = LessonKeeper(deps.store, deps.model, clock=deps.clock, timeout=deps.settings.model_timeout)
        return self._lessons

    def lock_for(self, scope: str) -> asyncio.Lock:
        lock = self._locks.get(scope)
        if lock is None:
            lock = self._locks[scope] = asyncio.Lock()
        return lock

    def facts_block(self, scope: str) -> str:
        """The scope's facts for every call; fail-open: a failure means no facts, logged."""
        if self.deps.facts is None:
            return ""
        try:
            return self.deps.facts.block(scope, self.deps.tokenizer, self.settings.facts_tokens)
        except Exception:
            log.exception("facts unavailable for %s; answering without them", scope)
            return ""

    def recent(self, scope: str, before_id: int) -> list[Message]:
        """The scope's last HUB_WINDOW messages before ``before_id``."""
        return self.store.window(scope, self.settings.window, up_to=before_id - 1)

    def awareness_for(
        self,
        agent: str,
        scope: str,
        *,
        window: Sequence[Message] = (),
        also_sees: Sequence[str] = (),
        text: str = "",
    ) -> Awareness:
        """What the rest of the team did, for ``agent``; fail-open: a failure means no block, logged.

        ``window`` (the scope's recent messages before this one), ``also_sees`` and ``text``
        (the message) describe the call: events its history shows are not repeated, and
        events already shown come back while the talk still names them.
        """
        budget = self.settings.awareness_tokens
        spec = self.registry[agent]
        if budget <= 0:
            return Awareness()
        try:
            now = self.deps.clock()
            settings = self.settings
            visible = {m.id for m in select_history(window, agent, also_sees, window=settings.window, tail=settings.tail)}
            in_window = [m for m in (window[-settings.window :] if settings.window > 0 else []) if m.via != "command"]
            earlier: list[Event] = []
            if in_window and spec.interests:
                cursor = cursor_of(self.store, scope, agent)
                candidates = [
                    event
                    for event in latest_events(self.store, scope, types=spec.interests, limit=AWARENESS_EARLIER, for_agent=agent)
                    if event.id <= cursor and event.message_id is not None and event.message_id >= in_window[0].id
                ]
                talk = [m.text for m in (in_window[-settings.tail :] if settings.tail > 0 else [])] + [text]
                earlier = still_talked_about(candidates, talk)
            unconsumed = unconsumed_events(self.store, scope, agent, interests=spec.interests, limit=AWARENESS_EVENTS)
            collaborators = (
                [
                    event
                    for event in latest_events(self.store, scope, agents=spec.collaborators, limit=AWARENESS_CONTEXT, for_agent=agent)
                    if now - event.ts <= AWARENESS_HORIZON
                ]
                if spec.collaborators
                else []
            )
            # Housekeeping (digest compaction, reflection) and the hub's bookkeeping (the
            # scope's turn, owed messages, a pending /forget all) are not team work: not shown.
            claims = [
                c
                for c in active_claims(self.store, scope, now=now)
                if c.key not in BACKGROUND_CLAIMS and not is_bookkeeping(c.key)
            ]
            unseen = unseen_channel_messages(
                self.store, scope, agent, channels_of(agent, self.channels), limit=CHANNEL_DIGEST
            )
            lines = [f"- {format_channel_message(m, relative_time(m.ts, now))}" for m in unseen]
            awareness = render_awareness(
                agent,
                unconsumed=unconsumed,
                collaborator_events=collaborators,
                earlier=earlier,
                visible=visible,
                claims=claims,
                channel_lines=lines,
                now=now,
                tokenizer=self.deps.tokenizer,
                budget=budget,
            )
        except Exception:
            log.exception("awareness unavailable for %s/%s; answering without it", scope, agent)
            return Awareness()
        # Channel lines are kept from the first (oldest) on: the cursor may pass what was shown.
        shown = awareness.channels_shown
        return dataclasses.replace(awareness, channel_upto=unseen[shown - 1].id) if shown else awareness

    def lessons_for(self, agent: str, scope: str) -> str:
        """``agent``'s own memory for its calls (no other agent's); fail-open: a failure means no section, logged."""
        budget = self.settings.lessons_tokens
        if budget <= 0:
            return ""
        try:
            return render_lessons(agent_memory(self.store, scope, agent), tokenizer=self.deps.tokenizer, budget=budget)
        except Exception:
            log.exception("lessons unavailable for %s/%s; answering without them", scope, agent)
            return ""

    def digest_for(self, scope: str, before_id: int | None = None) -> DigestSection:
        """The scope's digest for a call (read only); fail-open: a failure means no section, logged."""
        if self.deps.digest is None:
            return DigestSection()
        try:
            return self.deps.digest.section(scope, before_id)
        except Exception:
            log.exception("digest unavailable for %s; answering without it", scope)
            return DigestSection()

    def build_call(
        self,
        agent: str,
        scope: str,
        recent: list[Message],
        text: str,
        also_sees: tuple[str, ...] = (),
        *,
        lessons: str = "",
        awareness: str = "",
        digest: str = "",
        sender: str | None = None,
        channel_news: bool = False,
    ) -> Context:
        """The context ``agent`` is sent for ``text`` (from ``sender``) after the ``recent`` messages.

        ``lessons``, ``awareness`` and ``digest`` are ready, budgeted text for their
        sections (empty: left out); the facts block is read here. ``channel_news``: the
        awareness shows unread channel messages (the team tool is offered to answer them).
        """
        return build_context(
            self.prompts[agent],
            recent,
            text,
            tokenizer=self.deps.tokenizer,
            also_sees=also_sees,
            facts_block=self.facts_block(scope),
            lessons=lessons,
            awareness=awareness,
            digest=digest,
            window=self.settings.window,
            tail=self.settings.tail,
            message_tokens=self.settings.message_tokens,
            offer_team=wants_team(text, channel_news=channel_news),
            scope=scope,
            sender=sender,
        )

    def context_for(self, agent: str, scope: str, message: Message, also_sees: tuple[str, ...] = ()) -> Context:
        """Exactly what ``agent`` is sent for ``message`` (the ``agents-hub context`` command)."""
        recent = self.recent(scope, message.id)
        awareness = self.awareness_for(agent, scope, window=recent, also_sees=also_sees, text=message.text)
        lessons = self.lessons_for(agent, scope)
        return self.build_call(
            agent,
            scope,
            recent,
            message.text,
            also_sees,
            lessons=lessons,
            awareness=awareness.text,
            channel_news=awareness.channels_shown > 0,
            digest=self.digest_for(scope, message.id).text,
            sender=message.sender,
        )

    # -- the request path -----------------------------------------------------------------
    async def handle(self, inbound: Inbound) -> Reply | None:
        """Store, route and answer one message; ``None`` when it is stored but not answered."""
        scope = validate_scope(inbound.scope)
        # The reply comes first: learning from earlier messages of this scope (a model call
        # that may take seconds with the embedded model) stops now and resumes afterwards.
        self._pause_learning(scope)
        try:
            async with self.lock_for(scope):
                return await self._handle(inbound)
        finally:
            self._resume_learning(scope)

    async def _handle(self, inbound: Inbound) -> Reply | None:
        message = self.store_inbound(inbound)
        if message is None:
            return None
        reply_to = self.store.find_ext(inbound.scope, inbound.reply_to_ext) if inbound.reply_to_ext else None
        return await self._answer_stored(inbound, message, reply_to)

    def store_inbound(self, inbound: Inbound) -> Message | None:
        """Commit the message (before any model call); None when this delivery needs nothing more.

        A redelivery (transport retry, restart re-sending, a twin delivered to another
        worker) is never stored twice. It is worth answering only if the first delivery
        was stored but never answered (a crash in between); commands are not re-run, and
        chatter that was not addressed is not tagged again.
        """
        store = self.store
        scope = validate_scope(inbound.scope)
        message = store.find_ext(scope, inbound.ext_id) if inbound.ext_id is not None else None
        if message is None:
            reply_to = store.find_ext(scope, inbound.reply_to_ext) if inbound.reply_to_ext else None
            try:
                return store.append(
                    NewMessage(
                        scope=scope,
                        role="user",
                        text=inbound.text,
                        ts=inbound.ts if inbound.ts is not None else self.deps.clock(),
                        sender=inbound.sender,
                        chat=inbound.chat,
                        ext_id=inbound.ext_id,
                        reply_to=reply_to.id if reply_to else None,
                    )
                )
            except DuplicateMessage:
                # Another process stored the same delivery a moment ago; it answers it (or, if it
                # dies first, the transport's retry of this delivery finds it unanswered).
                log.info("message %s of %s is being handled elsewhere", inbound.ext_id, scope)
                return None
        if message.via == "command" or not inbound.addressed or store.is_answered(message.id):
            log.info("message %s of %s was already handled; ignoring the redelivery", inbound.ext_id, scope)
            return None
        log.info("message %s of %s was stored but not answered yet", inbound.ext_id, scope)
        return message

    async def answer_queued(self, message: Message, *, addressed: bool = True) -> Reply | None:
        """Answer (or, not ``addressed``, only route and tag) a stored message of the scope's queue.

        For a transport that holds the scope's turn (:mod:`scopehub.hub.turns`): the turn is
        the exclusive right to answer the scope, so no per-message claim is taken. None when
        there is nothing to send (answered already, a command already run, or not addressed).
        """
        scope = message.scope
        self._pause_learning(scope)
        try:
            async with self.lock_for(scope):
                current = self.store.get(scope, message.id)
                if current is None or current.via == "command" or self.store.is_answered(current.id):
                    return None
                inbound, reply_to = self._inbound_of(current, addressed=addressed)
                return await self._answer_stored(inbound, current, reply_to, claim=False)
        finally:
            self._resume_learning(scope)

    def _inbound_of(self, message: Message, *, addressed: bool = True) -> tuple[Inbound, Message | None]:
        """A stored message as it came in, and the message it replies to: for answering it
        later (from a scope's queue, or after the process answering it stopped)."""
        inbound = Inbound(
            scope=message.scope,
            text=message.text,
            chat=message.chat,
            sender=message.sender,
            ext_id=message.ext_id,
            ts=message.ts,
            addressed=addressed,
        )
        reply_to = self.store.get(message.scope, message.reply_to) if message.reply_to else None
        return inbound, reply_to

    def stored_reply(self, message: Message) -> Message | None:
        """The agent reply stored for ``message`` (None: not answered with a stored reply)."""
        for later in self.store.messages(message.scope, after=message.id, limit=200):
            if later.role == "agent" and later.reply_to == message.id:
                return later
        return None

    async def _answer_stored(
        self, inbound: Inbound, message: Message, reply_to: Message | None, *, claim: bool = True
    ) -> Reply | None:
        # Commands act only when addressed to us: "/forget@other_bot all" in a group must not erase.
        command = self._command_of(inbound.text) if inbound.addressed else None
        if command is not None:
            name, argument = command
            self.store.set_route(message.id, "hub", (), "command")
            if name not in self.commands:
                text = UNKNOWN_COMMAND_REPLY.format(name=name)
            else:
                try:
                    text = await self.commands[name](self, inbound, message, argument)
                except Exception:
                    log.exception("command /%s failed in %s", name, inbound.scope)
                    text = f"/{name} failed; nothing was lost. Please try again."
            return Reply(text=text, kind="command", agent="hub", via="command", message_id=message.id, scope=inbound.scope)

        return await self._route_and_answer(inbound, message, reply_to, claim=claim)

    async def _route_and_answer(
        self, inbound: Inbound, message: Message, reply_to: Message | None, *, claim: bool = True
    ) -> Reply | None:
        store = self.store
        window = self.recent(inbound.scope, message.id)
        if inbound.agent is not None and inbound.agent in self.registry:
            # The transport addressed an agent (a file in its inbox): as explicit as "/agent".
            also = tuple(name for name in self.default_also_sees.get(inbound.agent, ()) if name != inbound.agent)
            decision = Route(agent=inbound.agent, also_sees=also, via="explicit")
        else:
            decision = await self._route(inbound.text, window, reply_to, scope=inbound.scope, message_id=message.id, now=message.ts)
        store.set_route(message.id, decision.agent, decision.also_sees, decision.via)
        if not inbound.addressed:
            return None
        self._note_correction(inbound, message, window)
        if not claim:  # the caller holds the scope's turn: the exclusive right to answer it
            return await self._answer(inbound, message, decision, window)
        # Claim the answer: with several processes on one database, one of them answers. The
        # claim's TTL is the only expiry; a process that dies mid-reply leaves the claim to
        # run out, and then answer_stalled() (or the message's redelivery) answers it.
        key = f"message:{message.id}"
        note = f"{decision.agent}: answering {' '.join(inbound.text.split())[:60]!r}"
        if acquire_claim(store, inbound.scope, key, self.holder, note=note, ttl=self.settings.claim_ttl, now=self.deps.clock()) is None:
            log.info("message %s of %s is being answered by another process", message.id, inbound.scope)
            return None
        try:
            if store.is_answered(message.id):  # answered elsewhere while we routed
                return None
            return await self._answer(inbound, message, decision, window)
        finally:
            release_claim(store, inbound.scope, key, self.holder)

    async def answer_stalled(self, *, limit: int = 50) -> list[Reply]:
        """Answer the messages whose answer was claimed by a process that died mid-reply.

        Their claims ran out (the TTL is the only expiry) with no answer stored. Transports
        call this at start and then every so often, and send what it returns.
        """
        replies: list[Reply] = []
        for claim in expired_claims(self.store, prefix="message:", now=self.deps.clock(), limit=limit):
            try:
                message_id = int(claim.key.rsplit(":", 1)[1])
            except ValueError:
                continue
            async with self.lock_for(claim.scope):
                message = self.store.get(claim.scope, message_id)
                if message is None or self.store.is_answered(message_id):
                    drop_expired_claim(self.store, claim.scope, claim.key, now=self.deps.clock())
                    continue
                log.warning("answering message %s of %s: the process answering it stopped", message_id, claim.scope)
                inbound, reply_to = self._inbound_of(message)
                reply = await self._route_and_answer(inbound, message, reply_to)
            if reply is not None:
                replies.append(reply)
        return replies

    def _command_of(self, text: str) -> tuple[str, str] | None:
        """``(name, argument)`` of a chat command, also an unknown one; None for text and ``/<agent>``."""
        stripped = text.strip()
        if not stripped.startswith("/"):
            return None
        head, _, rest = stripped[1:].partition(" ")
        name = head.split("@", 1)[0].lower()
        if name in self.commands and name not in self.registry:
            return name, rest.strip()
        match = _COMMAND_RE.match(stripped)
        if match is not None and match.group(1) not in self.registry:
            return match.group(1), ""  # answered with "unknown command", never sent to an agent
        return None

    async def _route(
        self,
        text: str,
        window: list[Message],
        reply_to: Message | None,
        *,
        scope: str | None = None,
        message_id: int | None = None,
        now: float | None = None,
    ) -> Route:
        routing = functools.partial(
            route,
            text,
            classifier=self.classifier,
            window=window,
            reply_to=reply_to,
            tail=self.settings.tail,
            default_also_sees=self.default_also_sees,
            now=now,
        )
        # Embedding a message takes milliseconds of CPU: keep it off the event loop.
        local = await asyncio.to_thread(routing) if self.embedder_name else routing()
        if self.deps.router_model is None:
            return local
        return await refine_with_llm(
            local,
            text,
            model=self.deps.router_model,
            profiles=self.profiles,
            window=window,
            timeout=self.settings.router_timeout,
            model_name=self.settings.router_model or None,
            on_usage=(lambda p, c: self._record_overhead(scope, message_id, "router", self.settings.router_model, p, c)) if scope else None,
        )

    def _record_overhead(self, scope: str, message_id: int | None, via: str, model: str | None, prompt: int, completion: int) -> None:
        """Record a model call that is no agent's (the LLM router): its tokens count in usage too."""
        self.store.record_call(
            CallRecord(
                scope=scope,
                agent="hub",
                message_id=message_id,
                via=via,
                also_sees=(),
                tokens={},
                full_history_tokens=0,
                model=model or None,
                prompt_tokens=prompt,
                completion_tokens=completion,
            )
        )

    async def _answer(self, inbound: Inbound, message: Message, decision: Route, window: list[Message]) -> Reply:
        spec = self.registry[decision.agent]
        text_for_agent = decision.text if decision.text else inbound.text
        awareness = self.awareness_for(spec.name, inbound.scope, window=window, also_sees=decision.also_sees, text=text_for_agent)
        lessons = self.lessons_for(spec.name, inbound.scope)
        digest = self.digest_for(inbound.scope, message.id)
        context = self.build_call(
            spec.name,
            inbound.scope,
            window,
            text_for_agent,
            decision.also_sees,
            lessons=lessons,
            awareness=awareness.text,
            digest=digest.text,
            sender=inbound.sender,
            channel_news=awareness.channels_shown > 0,
        )
        base = Reply(
            text="",
            agent=spec.name,
            also_sees=decision.also_sees,
            via=decision.via,
            message_id=message.id,
            tokens=context.tokens,
            full_history_tokens=context.full_history_tokens,
            scope=inbound.scope,
        )
        model = self.deps.model
        model_name = spec.model or None
        started = time.perf_counter()
        ok = True
        failure = ""
        result: AgentResult | None = None
        try:
            if model is None:
                raise ModelNotConfigured("no model configured")
            tool_ctx = ToolContext(
                store=self.store,
                scope=inbound.scope,
                chat=inbound.chat,
                message_id=message.id,
                clock=self.deps.clock,
                extra={**self.deps.tool_services, "timezone": self.settings.timezone, "channels": self.channels},
                agent=spec.name,
            )
            # One deadline over the whole run (every model request, retry and tool round), so a
            # hung provider costs the person HUB_REPLY_DEADLINE seconds at most, on any transport.
            # In this task (asyncio.timeout, not wait_for): Ctrl-C in the terminal still stops it.
            async with asyncio.timeout(self.settings.reply_deadline):
                result = await run_agent(
                    context.messages,
                    agent_tools(spec),
                    model,
                    tool_ctx,
                    max_steps=self.settings.max_tool_steps,
                    model_name=model_name,
                    schemas=context.tools,
                )
            text = result.text or NO_ANSWER_REPLY
        except ModelNotConfigured:
            ok, text = False, NO_MODEL_REPLY
        except TimeoutError:
            log.warning("no answer for %s/%s within %ss; apologising", inbound.scope, spec.name, self.settings.reply_deadline)
            ok, text, failure = False, MODEL_SLOW_REPLY, "deadline"
        except ModelUnavailable as exc:
            log.warning("model unavailable for %s/%s: %s", inbound.scope, spec.name, exc)
            ok, text = False, MODEL_DOWN_REPLY
        except ModelError as exc:
            log.warning("model refused %s/%s: %s", inbound.scope, spec.name, exc)
            ok, text = False, MODEL_FAILED_REPLY
        latency_ms = (time.perf_counter() - started) * 1000
        # The reply is stored before the call is recorded: a crash in between must leave the
        # message looking unanswered, so that its redelivery is answered (Store.is_answered).
        stored = None
        if ok:
            stored = self.store.append(
                NewMessage(
                    scope=inbound.scope,
                    role="agent",
                    text=text,
                    ts=self.deps.clock(),
                    agent=spec.name,
                    also_sees=decision.also_sees,
                    via=decision.via,
                    chat=inbound.chat,
                    reply_to=message.id,
                )
            )
        model_used = (result.model if result else None) or model_name or (model.name if model else None)
        reported = result is not None and result.usage_reported
        price = price_call(
            model_used,
            result.prompt_tokens if reported else None,
            result.completion_tokens if reported else None,
            result.cached_tokens if result else None,
            result.cache_write_tokens if result else None,
        )
        sent = self.sent_sections.compact(
            inbound.scope,
            sent_record(context, text=text_for_agent, stored_text=message.text, message_tokens=self.settings.message_tokens),
        )
        call_id = self.store.record_call(
            CallRecord(
                scope=inbound.scope,
                agent=spec.name,
                message_id=message.id,
                via=decision.via,
                also_sees=decision.also_sees,
                tokens=context.tokens,
                full_history_tokens=context.full_history_tokens,
                model=model_used,
                latency_ms=latency_ms,
                prompt_tokens=result.prompt_tokens if reported else None,
                completion_tokens=result.completion_tokens if reported else None,
                ok=ok,
                extra={
                    **(
                        {"tool_calls": result.tool_calls}
                        if result and result.tool_calls
                        else {"error": failure, "deadline_s": self.settings.reply_deadline}
                        if failure
                        else {}
                    ),
                    # The path this call's digest took and its age: a broken cache shows here.
                    **({"digest": digest.record(context.tokens.get("digest", 0))} if self.deps.digest else {}),
                    # What was sent, so that it can be shown again exactly (agents-hub console).
                    "sent": sent,
                },
                cached_tokens=result.cached_tokens if result else None,
                cache_write_tokens=result.cache_write_tokens if result else None,
                billed_tokens=price.billed_tokens,
                cost=price.cost,
            )
        )
        self.sent_sections.remember(inbound.scope, sent, call_id)
        if ok and awareness.consumed_upto:
            # At-least-once until commit: the cursor moves only now that the call that was
            # shown these events is recorded; a crash before this line shows them again.
            try:
                advance_cursor(self.store, inbound.scope, spec.name, awareness.consumed_upto)
            except Exception:
                log.exception("cursor of %s/%s not advanced; its events will be shown again", inbound.scope, spec.name)
        if ok and awareness.channel_upto:
            try:
                advance_channel_cursor(self.store, inbound.scope, spec.name, awareness.channel_upto)
            except Exception:
                log.exception("channel cursor of %s/%s not advanced; its channel news will be shown again", inbound.scope, spec.name)
        if stored is None:
            return Reply(**{**base.__dict__, "text": text, "kind": "error"})
        return Reply(**{**base.__dict__, "text": text, "reply_id": stored.id})

    # -- after the reply is sent ------------------------------------------------------------
    async def after_send(self, reply: Reply | None) -> None:
        """Learning off the request path (lessons from feedback, fact extraction, digest compaction); never raises."""
        if reply is None or not reply.scope:
            return
        await self.learn_feedback(reply.scope)
        if reply.kind != "agent" or reply.message_id is None:
            return
        if self.deps.facts is not None:
            try:
                message = self.store.get(reply.scope, reply.message_id)
                if message is not None:
                    await self.deps.facts.after_reply(message.scope, message)
            except Exception:
                log.exception("fact extraction failed for %s; the reply was not affected", reply.scope)
        if self.deps.digest is not None:
            try:
                await self.deps.digest.after_reply(reply.scope, self.holder)
            except Exception:
                log.exception("digest compaction failed for %s; the reply was not affected", reply.scope)

    async def reflect_due(self) -> list[Any]:
        """Reflect every scope that is due (transports call this on a schedule); never raises."""
        if self.deps.reflector is None:
            return []
        try:
            return await self.deps.reflector.reflect_due(self.holder, now=self.deps.clock())
        except Exception:
            log.exception("reflection failed; nothing else was affected")
            return []

    def schedule_after_send(self, reply: Reply | None) -> None:
        """Run :meth:`after_send` in the background (transports call this once they sent).

        Never ahead of a reply: a new message of the same scope pauses it (the work in
        flight is cancelled and done again after that reply), so learning never delays
        an answer.
        """
        if reply is None or not reply.scope:
            return
        background = reply.kind == "agent" and (self.deps.facts is not None or self.deps.digest is not None)
        if not background and not self._has_pending_feedback(reply.scope):
            return
        self._to_learn.setdefault(reply.scope, []).append(reply)
        self._resume_learning(reply.scope)

    def _in_background(self, work: Awaitable[Any]) -> None:
        task = asyncio.get_running_loop().create_task(work)  # type: ignore[arg-type]
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- feedback: the person teaches the agents ---------------------------------------------
    def feedback_on(
        self, scope: str, reply: Message, text: str, *, source: str, signal: str, key: str | None = None
    ) -> Feedback | None:
        """Record the person's feedback on one agent reply (pending: it is learnt after the reply is sent).

        None when ``reply`` is no agent's reply, or ``key`` was recorded already (a redelivery).
        Fail-open: a failure is logged and the chat goes on.
        """
        if reply.role != "agent" or reply.agent not in self.registry:
            return None
        try:
            return record_feedback(
                self.store,
                scope,
                reply.agent,
                reply_id=reply.id,
                source=source,
                signal=signal,
                text=text,
                key=key,
                now=self.deps.clock(),
            )
        except Exception:
            log.exception("feedback on %s of %s not recorded", reply.id, scope)
            return None

    def last_reply(self, scope: str, before_id: int | None = None) -> Message | None:
        """The newest agent reply of the scope (before message ``before_id``), within the window."""
        window = self.store.window(scope, self.settings.window, up_to=None if before_id is None else before_id - 1)
        return next((m for m in reversed(window) if m.role == "agent" and m.agent in self.registry), None)

    def _note_correction(self, inbound: Inbound, message: Message, window: list[Message]) -> None:
        """A correction right after an agent reply ("no, I meant ...") is feedback on that reply."""
        corrected = detect_correction(inbound.text, window)
        if corrected is not None:
            self.feedback_on(inbound.scope, corrected, inbound.text, source="correction", signal="negative", key=f"correction:{message.id}")

    def _has_pending_feedback(self, scope: str) -> bool:
        try:
            return bool(pending_feedback(self.store, scope, limit=1))
        except Exception:
            log.exception("pending feedback of %s unreadable", scope)
            return False

    async def learn_feedback(self, scope: str) -> list[Lesson]:
        """Turn the scope's pending feedback into lessons, each under a claim; never raises."""
        learnt: list[Lesson] = []
        lessons = self.lessons
        try:
            pending = pending_feedback(self.store, scope)
        except Exception:
            log.exception("pending feedback of %s unreadable; learning later", scope)
            return learnt
        for feedback in pending:
            key = f"lesson:{feedback.id}"
            note = f"{feedback.agent}: learning from the person's feedback"
            try:
                if acquire_claim(self.store, scope, key, self.holder, note=note, ttl=self.settings.claim_ttl, now=self.deps.clock()) is None:
                    continue  # another process is learning it
            except Exception:
                log.exception("cannot claim feedback %s of %s; learning later", feedback.id, scope)
                continue
            try:
                learnt.append(await lessons.learn(feedback))
            except Exception:
                log.exception("lesson from feedback %s of %s failed; it stays pending", feedback.id, scope)
            finally:
                try:
                    release_claim(self.store, scope, key, self.holder)
                except Exception:
                    log.exception("claim %s of %s not released; it runs out", key, scope)
        return learnt

    def schedule_learning(self, scope: str) -> None:
        """Learn the scope's pending feedback in the background (a reaction has no reply to send first)."""
        self._in_background(self.learn_feedback(scope))

    def _pause_learning(self, scope: str) -> None:
        task = self._learning.get(scope)
        if task is not None and not task.done():
            task.cancel()

    def _resume_learning(self, scope: str) -> None:
        if not self._to_learn.get(scope):
            return
        task = self._learning.get(scope)
        if task is not None and not task.done() and not task.cancelling():
            return  # already working through the list
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self._learn(scope, task))
        self._learning[scope] = task
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _learn(self, scope: str, paused: asyncio.Task[Any] | None) -> None:
        if paused is not None and not paused.done():
            await asyncio.wait([paused])  # let the paused task unwind before the list is worked again
        queue = self._to_learn.get(scope, [])
        while queue:
            await self.after_send(queue[0])  # a pause cancels here: the reply stays queued
            queue.pop(0)
        self._to_learn.pop(scope, None)

    async def drain(self) -> None:
        """Wait for background work, learning put off included (tests, shutdown)."""
        for scope in list(self._to_learn):
            self._resume_learning(scope)
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
            for scope in list(self._to_learn):
                self._resume_learning(scope)

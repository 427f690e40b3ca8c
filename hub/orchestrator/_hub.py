"""The Hub: a turn's stages in order, per scope, for every transport.

intake (:mod:`._intake`) → route (:mod:`._route`) → context (:mod:`._sections`) →
run (:mod:`._run`) → record (:mod:`._record`) → after the reply (:mod:`._after_reply`).
Messages of one scope are handled in order (a lock per scope); different scopes run
concurrently.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from scopehub.agents import AgentRegistry, team_channels
from scopehub.hub.context import Context
from scopehub.hub.context.awareness import Awareness
from scopehub.hub.context.prompt import agent_prompt
from scopehub.hub.context.record import SentSections
from scopehub.hub.digest.service import DigestSection
from scopehub.hub.orchestrator._after_reply import AfterReply
from scopehub.hub.orchestrator._intake import (
    UNKNOWN_COMMAND_REPLY,
    command_of,
    inbound_of,
    learn_stated_facts,
    store_inbound,
)
from scopehub.hub.orchestrator._record import record_router_call, record_turn
from scopehub.hub.orchestrator._route import addressed_route, build_classifier, decide_route
from scopehub.hub.orchestrator._run import run_call
from scopehub.hub.orchestrator._sections import Sections
from scopehub.hub.orchestrator._types import CommandHandler, Deps, Inbound, LessonService, Reply
from scopehub.hub.routing import AgentProfile, Route
from scopehub.hub.settings import Settings
from scopehub.memory import (
    Feedback,
    Lesson,
    Message,
    Store,
    acquire_claim,
    drop_expired_claim,
    expired_claims,
    process_holder,
    release_claim,
    validate_scope,
)

__all__ = ["Hub"]

log = logging.getLogger(__name__)


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
        self.classifier, self.embedder_name = build_classifier(self.profiles, deps.settings)
        self.prompts = {spec.name: agent_prompt(spec) for spec in registry}
        self.default_also_sees = {spec.name: spec.also_sees for spec in registry if spec.also_sees}
        # Talk channels: "team" (everyone) and those the agents declare, members resolved.
        self.channels = team_channels(registry)
        if commands is None:
            from scopehub.hub.commands import COMMANDS

            commands = COMMANDS
        self.commands = dict(commands)
        # Called after /forget all (a transport cancels that scope's scheduled reminders).
        self.erase_hooks: list[Callable[[str], Awaitable[None]]] = []
        # Who this process is when it claims work (host, pid, instance, and what tells on this
        # machine that the process is gone): a restarted worker takes over its dead
        # predecessor's claims at once instead of waiting out their TTL.
        self.holder = process_holder()
        self._locks: dict[str, asyncio.Lock] = {}
        # Section texts already kept by a call record: later records refer to them.
        self.sent_sections = SentSections()
        self.sections = Sections(deps, registry, self.prompts, self.channels)
        self.after_reply = AfterReply(deps, registry, self.holder)

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

    @property
    def store(self) -> Store:
        return self.deps.store

    @property
    def settings(self) -> Settings:
        return self.deps.settings

    @property
    def lessons(self) -> LessonService:
        """The lesson learner: ``Deps.lessons``, else a LessonKeeper on the agents' model."""
        return self.after_reply.lessons

    def lock_for(self, scope: str) -> asyncio.Lock:
        lock = self._locks.get(scope)
        if lock is None:
            lock = self._locks[scope] = asyncio.Lock()
        return lock

    # -- the sections of a call (hub.orchestrator._sections) ----------------------------------
    def facts_block(self, scope: str) -> str:
        """The scope's facts for every call; fail-open."""
        return self.sections.facts_block(scope)

    def recent(self, scope: str, before_id: int) -> list[Message]:
        """The scope's last HUB_WINDOW messages before ``before_id``."""
        return self.sections.recent(scope, before_id)

    def awareness_for(
        self, agent: str, scope: str, *, window: Sequence[Message] = (), also_sees: Sequence[str] = (), text: str = ""
    ) -> Awareness:
        """What the rest of the team did, for ``agent``; fail-open (see :meth:`Sections.awareness_for`)."""
        return self.sections.awareness_for(agent, scope, window=window, also_sees=also_sees, text=text)

    def lessons_for(self, agent: str, scope: str) -> str:
        """``agent``'s own memory for its calls; fail-open."""
        return self.sections.lessons_for(agent, scope)

    def digest_for(self, scope: str, before_id: int | None = None) -> DigestSection:
        """The scope's digest for a call (read only); fail-open."""
        return self.sections.digest_for(scope, before_id)

    def build_call(self, agent: str, scope: str, recent: list[Message], text: str, also_sees: tuple[str, ...] = (), **sections: Any) -> Context:
        """The context ``agent`` is sent for ``text`` (see :meth:`Sections.build_call`)."""
        return self.sections.build_call(agent, scope, recent, text, also_sees, **sections)

    def context_for(self, agent: str, scope: str, message: Message, also_sees: tuple[str, ...] = ()) -> Context:
        """Exactly what ``agent`` is sent for ``message`` (the ``agents-hub context`` command)."""
        return self.sections.context_for(agent, scope, message, also_sees)

    # -- the request path -----------------------------------------------------------------
    async def handle(self, inbound: Inbound) -> Reply | None:
        """Store, route and answer one message; ``None`` when it is stored but not answered."""
        scope = validate_scope(inbound.scope)
        # The reply comes first: learning from earlier messages of this scope (a model call
        # that may take seconds with the embedded model) stops now and resumes afterwards.
        self.after_reply.pause(scope)
        try:
            async with self.lock_for(scope):
                message = self.store_inbound(inbound)
                if message is None:
                    return None
                reply_to = self.store.find_ext(inbound.scope, inbound.reply_to_ext) if inbound.reply_to_ext else None
                return await self._answer_stored(inbound, message, reply_to)
        finally:
            self.after_reply.resume(scope)

    def store_inbound(self, inbound: Inbound) -> Message | None:
        """Commit the message (before any model call); None when this delivery needs nothing more."""
        return store_inbound(self.store, inbound, self.deps.clock)

    async def answer_queued(
        self, message: Message, *, addressed: bool = True, on_text: Callable[[str], Awaitable[None]] | None = None
    ) -> Reply | None:
        """Answer (or, not ``addressed``, only route and tag) a stored message of the scope's queue.

        For a transport that holds the scope's turn (:mod:`scopehub.hub.turns`): the turn is
        the exclusive right to answer the scope, so no per-message claim is taken. None when
        there is nothing to send (answered already, a command already run, or not addressed).
        ``on_text``: the agent's answer so far while a model that can stream writes it.
        """
        scope = message.scope
        self.after_reply.pause(scope)
        try:
            async with self.lock_for(scope):
                current = self.store.get(scope, message.id)
                if current is None or current.via == "command" or self.store.is_answered(current.id):
                    return None
                inbound, reply_to = inbound_of(self.store, current, addressed=addressed)
                return await self._answer_stored(inbound, current, reply_to, claim=False, on_text=on_text)
        finally:
            self.after_reply.resume(scope)

    def stored_reply(self, message: Message) -> Message | None:
        """The agent reply stored for ``message`` (None: not answered with a stored reply)."""
        for later in self.store.messages(message.scope, after=message.id, limit=200):
            if later.role == "agent" and later.reply_to == message.id:
                return later
        return None

    async def answer_stalled(self, *, limit: int = 50) -> list[Reply]:
        """Answer the messages whose answer was claimed by a process that died mid-reply.

        Their claims ran out (the TTL is the only expiry) with no answer stored. Transports
        call this at start and then every so often, and send what it returns.
        """
        replies: list[Reply] = []
        try:
            stalled = expired_claims(self.store, prefix="message:", now=self.deps.clock(), limit=limit)
        except Exception:
            log.exception("cannot look for stalled answers (the claims table failed); trying again later")
            return replies
        for claim in stalled:
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
                inbound, reply_to = inbound_of(self.store, message)
                reply = await self._route_and_answer(inbound, message, reply_to)
            if reply is not None:
                replies.append(reply)
        return replies

    async def _answer_stored(
        self,
        inbound: Inbound,
        message: Message,
        reply_to: Message | None,
        *,
        claim: bool = True,
        on_text: Callable[[str], Awaitable[None]] | None = None,
    ) -> Reply | None:
        # Commands act only when addressed to us: "/forget@other_bot all" in a group must not erase.
        command = command_of(inbound.text, self.commands, self.registry) if inbound.addressed else None
        if command is None:
            return await self._route_and_answer(inbound, message, reply_to, claim=claim, on_text=on_text)
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

    async def _route_and_answer(
        self,
        inbound: Inbound,
        message: Message,
        reply_to: Message | None,
        *,
        claim: bool = True,
        on_text: Callable[[str], Awaitable[None]] | None = None,
    ) -> Reply | None:
        store = self.store
        if inbound.addressed:
            refusal = self.budget_refusal(inbound.scope)
            if refusal is not None:  # the day's budget is spent: no model call (the router's neither)
                return Reply(text=refusal, kind="command", agent="hub", via="budget", message_id=message.id, scope=inbound.scope)
        window = self.recent(inbound.scope, message.id)
        if inbound.agent is not None and inbound.agent in self.registry:
            decision = addressed_route(inbound.agent, self.default_also_sees)
        else:
            decision = await self._route(inbound.text, window, reply_to, scope=inbound.scope, message_id=message.id, now=message.ts)
        store.set_route(message.id, decision.agent, decision.also_sees, decision.via)
        if not inbound.addressed:
            return None
        self.after_reply.note_correction(inbound, message, window)
        if not claim:  # the caller holds the scope's turn: the exclusive right to answer it
            return await self._answer(inbound, message, decision, window, on_text)
        # Claim the answer: with several processes on one database, one of them answers. A
        # process that dies mid-reply leaves the claim to run out (at once for a restarted
        # worker on its machine), and then answer_stalled() (or the redelivery) answers it.
        key = f"message:{message.id}"
        note = f"{decision.agent}: answering {' '.join(inbound.text.split())[:60]!r}"
        try:
            claimed = acquire_claim(store, inbound.scope, key, self.holder, note=note, ttl=self.settings.claim_ttl, now=self.deps.clock())
        except Exception:
            # Fail-open: the person is answered without the claim. Only several processes
            # racing for this one message while claims are down could answer it twice.
            log.exception("cannot claim message %s of %s (the claims table failed); answering it unclaimed", message.id, inbound.scope)
            return await self._answer_unless_answered(inbound, message, decision, window, on_text)
        if claimed is None:
            log.info("message %s of %s is being answered by another process", message.id, inbound.scope)
            return None
        try:
            return await self._answer_unless_answered(inbound, message, decision, window, on_text)
        finally:
            try:
                release_claim(store, inbound.scope, key, self.holder)
            except Exception:
                log.exception("claim %s of %s not released; it runs out", key, inbound.scope)

    async def _answer_unless_answered(
        self,
        inbound: Inbound,
        message: Message,
        decision: Route,
        window: list[Message],
        on_text: Callable[[str], Awaitable[None]] | None = None,
    ) -> Reply | None:
        if self.store.is_answered(message.id):  # answered elsewhere while we routed
            return None
        return await self._answer(inbound, message, decision, window, on_text)

    def budget_refusal(self, scope: str) -> str | None:
        """What to answer instead of a model call once the scope's daily budget is spent (hub.budgets); fail-open."""
        from scopehub.hub.budgets import budget_for, budget_refusal

        if not budget_for(self.settings, scope).limited:
            return None
        timezone = self.sections.chat_settings(scope).timezone or self.settings.timezone
        try:
            return budget_refusal(self.store, self.settings, scope, now=self.deps.clock(), timezone=timezone)
        except Exception:
            log.exception("the budget of %s could not be checked; answering", scope)
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
        settings = self.settings
        on_call = (lambda call: record_router_call(self.store, settings, scope, message_id, call)) if scope else None
        return await decide_route(
            text,
            window,
            reply_to,
            classifier=self.classifier,
            embeds=bool(self.embedder_name),
            settings=settings,
            default_also_sees=self.default_also_sees,
            profiles=self.profiles,
            router_model=self.deps.router_model,
            on_call=on_call,
            agents=self.sections.allowed_agents(scope) if scope else None,
            now=now,
        )

    async def _answer(
        self,
        inbound: Inbound,
        message: Message,
        decision: Route,
        window: list[Message],
        on_text: Callable[[str], Awaitable[None]] | None = None,
    ) -> Reply:
        """Stated facts → context → run → record: the routed agent's answer to a stored message."""
        learn_stated_facts(self.deps, message)
        call = self.sections.prepare(inbound, message, decision, window)
        outcome = await run_call(self.deps, call, self.channels, on_text)
        return record_turn(self.deps, self.sent_sections, call, outcome)

    # -- after the reply is sent (hub.orchestrator._after_reply) -------------------------------
    async def after_send(self, reply: Reply | None) -> None:
        """Learning off the request path (lessons, fact extraction, digest compaction); never raises."""
        await self.after_reply.after_send(reply)

    def schedule_after_send(self, reply: Reply | None) -> None:
        """Run :meth:`after_send` in the background (transports call this once they sent).

        Never ahead of a reply: a new message of the same scope pauses it (the work in
        flight is cancelled and done again after that reply), so learning never delays
        an answer.
        """
        self.after_reply.schedule(reply)

    async def reflect_due(self) -> list[Any]:
        """Reflect every scope that is due (transports call this on a schedule); never raises."""
        return await self.after_reply.reflect_due()

    def feedback_on(
        self, scope: str, reply: Message, text: str, *, source: str, signal: str, key: str | None = None
    ) -> Feedback | None:
        """Record the person's feedback on one agent reply; None for no agent's reply or a redelivery."""
        return self.after_reply.feedback_on(scope, reply, text, source=source, signal=signal, key=key)

    def last_reply(self, scope: str, before_id: int | None = None) -> Message | None:
        """The newest agent reply of the scope (before message ``before_id``), within the window."""
        window = self.store.window(scope, self.settings.window, up_to=None if before_id is None else before_id - 1)
        return next((m for m in reversed(window) if m.role == "agent" and m.agent in self.registry), None)

    async def learn_feedback(self, scope: str) -> list[Lesson]:
        """Turn the scope's pending feedback into lessons, each under a claim; never raises."""
        return await self.after_reply.learn_feedback(scope)

    def schedule_learning(self, scope: str) -> None:
        """Learn the scope's pending feedback in the background (a reaction has no reply to send first)."""
        self.after_reply.schedule_learning(scope)

    async def drain(self) -> None:
        """Wait for background work, learning put off included (tests, shutdown)."""
        await self.after_reply.drain()

"""The Hub: a turn's stages in order, per scope, for every transport.

intake (:mod:`._intake`) → route (:mod:`._route`) → context (:mod:`._sections`) →
run (:mod:`._run`) → record (:mod:`._record`) → after the reply (:mod:`._after_reply`).
Messages of one scope are handled in order (a lock per scope); different scopes run
concurrently.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from scopehub.agents import AgentRegistry, team_channels
from scopehub.hub.context import Context
from scopehub.hub.context.awareness import Awareness
from scopehub.hub.context.prompt import agent_prompt
from scopehub.hub.context.record import SentSections
from scopehub.hub.dbwork import in_db_thread, use_db_threads
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
from scopehub.hub.orchestrator._route import (
    addressed_route,
    agent_profile,
    build_classifier,
    local_route,
    refine_route,
)
from scopehub.hub.orchestrator._run import RunOutcome, run_call
from scopehub.hub.orchestrator._sections import PreparedCall, Sections
from scopehub.hub.orchestrator._timing import StageTimes, timed
from scopehub.hub.orchestrator._types import CommandHandler, Deps, Inbound, LessonService, Reply
from scopehub.hub.routing import Route
from scopehub.hub.routing.llm_router import RouterCall
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

_T = TypeVar("_T")

REPLY_LOOKAHEAD = 200  # messages after one looked at for its stored reply (a queue's length)


@dataclass
class _Turn:
    """One message's turn as it moves through the stages (filled in by the database thread)."""

    inbound: Inbound
    message: Message
    reply_to: Message | None
    claim: bool = True  # False: the caller holds the scope's turn, the exclusive right to answer
    command: tuple[str, str] | None = None
    window: list[Message] = field(default_factory=list)
    decision: Route | None = None
    refine: bool = False  # the LLM router refines the local route (awaited) before settling
    claimed: str | None = None  # the key of the answer's claim while this turn holds it
    agents: tuple[str, ...] | None = None  # the only agents that may answer (the chat's /settings)
    call: PreparedCall | None = None
    reply: Reply | None = None  # answered without a model call (the day's budget is spent)
    done: bool = False  # nothing to send


class Hub:
    """The orchestrator. Pure decisions (router, context) in, I/O (store, model) at the edges."""

    def __init__(self, deps: Deps, registry: AgentRegistry, *, commands: dict[str, CommandHandler] | None = None) -> None:
        if not len(registry):
            raise ValueError("the hub needs at least one agent")
        self.deps = deps
        self.registry = registry
        use_db_threads(deps.settings.db_threads)
        self.profiles = [agent_profile(spec) for spec in registry]
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
        # Called with the scope once an agent's answer is recorded, in the record's own store
        # step (any thread; no step of its own): a transport schedules the reminders the
        # answer may have set due soon. A failure is logged; the answer is not affected.
        self.recorded_hooks: list[Callable[[str], None]] = []
        # Who this process is when it claims work (host, pid, instance, and what tells on this
        # machine that the process is gone): a restarted worker takes over its dead
        # predecessor's claims at once instead of waiting out their TTL.
        self.holder = process_holder()
        self._locks: dict[str, asyncio.Lock] = {}
        # Section texts already kept by a call record: later records refer to them.
        self.sent_sections = SentSections()
        self.sections = Sections(deps, registry, self.prompts, self.channels)
        self.after_reply = AfterReply(deps, registry, self.holder)
        # Per-stage CPU and wall time of every turn, when a bench sets it (agents-hub bench hub).
        self.stage_times: StageTimes | None = None
        # Where a turn's store work runs: None = the database threads on PostgreSQL, inline on
        # SQLite (see _in_db); True / False force one (benches compare them).
        self.db_threads: bool | None = None

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
        freeze_start_up_heap()

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
    # A turn's store work (intake, routing, the claim, the context; then the record) runs in
    # the database thread pool, inside one store session per stage group: one pooled
    # connection per step, and the event loop never waits for the database. Only the model
    # call, a command and the optional LLM router are awaited on the loop.
    async def handle(self, inbound: Inbound) -> Reply | None:
        """Store, route and answer one message; ``None`` when it is stored but not answered."""
        scope = validate_scope(inbound.scope)
        # The reply comes first: learning from earlier messages of this scope (a model call
        # that may take seconds with the embedded model) stops now and resumes afterwards.
        self.after_reply.pause(scope)
        try:
            async with self.lock_for(scope):
                return await self._carry(await self._in_db(self._begin_inbound, inbound, routes=True))
        finally:
            self.after_reply.resume(scope)

    def store_inbound(self, inbound: Inbound, *, ext_id_unseen: bool = False) -> Message | None:
        """Commit the message (before any model call); None when this delivery needs nothing more.

        ``ext_id_unseen``: the caller looked the delivery's id up in this session and found nothing."""
        with self._timed("intake"):
            return store_inbound(self.store, inbound, self.deps.clock, ext_id_unseen=ext_id_unseen)

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
                return await self._carry(await self._in_db(self._begin_queued, message, addressed, routes=True), on_text)
        finally:
            self.after_reply.resume(scope)

    def stored_reply(self, message: Message, later: Sequence[Message] | None = None) -> Message | None:
        """The agent reply stored for ``message`` (None: not answered with a stored reply).

        ``later``: the messages after it, read already (:meth:`stored_reply_query`)."""
        if later is None:
            later = self.store.messages(message.scope, after=message.id, limit=REPLY_LOOKAHEAD)
        for after in later:
            if after.role == "agent" and after.reply_to == message.id:
                return after
        return None

    def stored_reply_query(self, scope: str, message_id: int) -> tuple[str, tuple[Any, ...]]:
        """The read :meth:`stored_reply` makes, for a batch of reads (each row a message)."""
        return self.store.messages_query(scope, after=message_id, limit=REPLY_LOOKAHEAD)

    async def answer_stalled(self, *, limit: int = 50) -> list[Reply]:
        """Answer the messages whose answer was claimed by a process that died mid-reply.

        Their claims ran out (the TTL is the only expiry) with no answer stored. Transports
        call this at start and then every so often, and send what it returns.
        """
        replies: list[Reply] = []
        try:
            stalled = await self._in_db(self._stalled_claims, limit)
        except Exception:
            log.exception("cannot look for stalled answers (the claims table failed); trying again later")
            return replies
        for claim in stalled:
            try:
                message_id = int(claim.key.rsplit(":", 1)[1])
            except ValueError:
                continue
            async with self.lock_for(claim.scope):
                reply = await self._carry(await self._in_db(self._begin_stalled, claim.scope, claim.key, message_id, routes=True))
            if reply is not None:
                replies.append(reply)
        return replies

    # -- the stages in the database thread (sync: never await in these) ----------------------
    def _begin_inbound(self, inbound: Inbound) -> _Turn | None:
        message = self.store_inbound(inbound)
        if message is None:
            return None
        with self._timed("intake"):
            reply_to = self.store.find_ext(inbound.scope, inbound.reply_to_ext) if inbound.reply_to_ext else None
        return self._begin(_Turn(inbound, message, reply_to))

    def _begin_queued(self, message: Message, addressed: bool) -> _Turn | None:
        # The message as stored now, whether it is answered, the chat's settings and the
        # recent messages before it: one batch of reads, kept for the rest of this step.
        with self.sections.settings_read_once():
            with self._timed("intake"):
                current, answered = self.sections.read_turn_start(message.scope, message.id)
                if current is None or current.via == "command" or answered:
                    return None
                inbound, reply_to = inbound_of(self.store, current, addressed=addressed)
            return self._begin(_Turn(inbound, current, reply_to, claim=False))

    def _stalled_claims(self, limit: int) -> list[Any]:
        return expired_claims(self.store, prefix="message:", now=self.deps.clock(), limit=limit)

    def _begin_stalled(self, scope: str, key: str, message_id: int) -> _Turn | None:
        message = self.store.get(scope, message_id)
        if message is None or self.store.is_answered(message_id):
            drop_expired_claim(self.store, scope, key, now=self.deps.clock())
            return None
        log.warning("answering message %s of %s: the process answering it stopped", message_id, scope)
        inbound, reply_to = inbound_of(self.store, message)
        return self._begin(_Turn(inbound, message, reply_to), commands=False)

    def _begin(self, turn: _Turn, *, commands: bool = True) -> _Turn:
        """A command, or the local route; then, unless the LLM router is to refine it, settle."""
        with self.sections.settings_read_once():
            return self._begin_read(turn, commands=commands)

    def _begin_read(self, turn: _Turn, *, commands: bool) -> _Turn:
        inbound = turn.inbound
        # Commands act only when addressed to us: "/forget@other_bot all" in a group must not erase.
        if commands and inbound.addressed:
            turn.command = command_of(inbound.text, self.commands, self.registry)
        if turn.command is not None:
            self.store.set_route(turn.message.id, "hub", (), "command")
            return turn
        if inbound.addressed:
            refusal = self.budget_refusal(inbound.scope)
            if refusal is not None:  # the day's budget is spent: no model call (the router's neither)
                turn.reply = Reply(text=refusal, kind="command", agent="hub", via="budget", message_id=turn.message.id, scope=inbound.scope)
                return turn
        with self._timed("route"):
            turn.agents = self.sections.allowed_agents(inbound.scope)
            turn.window = self.recent(inbound.scope, turn.message.id)
            if inbound.agent is not None and inbound.agent in self.registry:
                turn.decision = addressed_route(inbound.agent, self.default_also_sees)
            else:
                turn.decision = local_route(
                    inbound.text,
                    turn.window,
                    turn.reply_to,
                    classifier=self.classifier,
                    settings=self.settings,
                    default_also_sees=self.default_also_sees,
                    agents=turn.agents,
                    now=turn.message.ts,
                )
                turn.refine = self.deps.router_model is not None
        if not turn.refine:
            self._settle(turn)
        return turn

    def _settle(self, turn: _Turn) -> None:
        """Tag the message with its route; claim its answer; read and count the agent's context."""
        inbound, message, decision = turn.inbound, turn.message, turn.decision
        assert decision is not None
        store = self.store
        with self._timed("route"):
            store.set_route(message.id, decision.agent, decision.also_sees, decision.via)
            if not inbound.addressed:
                turn.done = True
                return
            self.after_reply.note_correction(inbound, message, turn.window)
            if turn.claim:
                # Claim the answer: with several processes on one database, one of them answers.
                # A process that dies mid-reply leaves the claim to run out (at once for a
                # restarted worker on its machine), and then answer_stalled() (or the
                # redelivery) answers it.
                key = f"message:{message.id}"
                note = f"{decision.agent}: answering {' '.join(inbound.text.split())[:60]!r}"
                try:
                    claimed = acquire_claim(store, inbound.scope, key, self.holder, note=note, ttl=self.settings.claim_ttl, now=self.deps.clock())
                except Exception:
                    # Fail-open: the person is answered without the claim. Only several processes
                    # racing for this one message while claims are down could answer it twice.
                    log.exception("cannot claim message %s of %s (the claims table failed); answering it unclaimed", message.id, inbound.scope)
                else:
                    if claimed is None:
                        log.info("message %s of %s is being answered by another process", message.id, inbound.scope)
                        turn.done = True
                        return
                    turn.claimed = key
        try:
            # Claimed or not, a turn that could race another process looks whether it was
            # answered elsewhere while it routed (a queued turn holds the scope's turn).
            if turn.claim and store.is_answered(message.id):
                turn.done = True
            else:
                with self._timed("context"):
                    learn_stated_facts(self.deps, message)  # what the person states is known before the reply
                    turn.call = self.sections.prepare(inbound, message, decision, turn.window)
        except BaseException:
            self._release(turn)
            raise
        if turn.done:
            self._release(turn)

    def _record(self, turn: _Turn, outcome: RunOutcome) -> Reply:
        assert turn.call is not None
        try:
            with self._timed("record"):
                reply = record_turn(self.deps, self.sent_sections, turn.call, outcome)
            if reply.kind == "agent" and reply.scope:
                for hook in self.recorded_hooks:
                    try:
                        hook(reply.scope)
                    except Exception:
                        log.exception("after recording the answer in %s: %r failed; the answer is not affected", reply.scope, hook)
            return reply
        finally:
            self._release(turn)

    def _release(self, turn: _Turn) -> None:
        if turn.claimed is not None:
            key, turn.claimed = turn.claimed, None
            try:
                release_claim(self.store, turn.inbound.scope, key, self.holder)
            except Exception:
                log.exception("claim %s of %s not released; it runs out", key, turn.inbound.scope)

    # -- the awaited part of a turn -------------------------------------------------------------
    async def _carry(self, turn: _Turn | None, on_text: Callable[[str], Awaitable[None]] | None = None) -> Reply | None:
        """Run what a begun turn awaits: its command, or the LLM router and the model; then record.

        ``on_text``: the agent's answer so far while a model that can stream writes it."""
        if turn is None or turn.done:
            return None
        if turn.reply is not None:
            return turn.reply
        if turn.command is not None:
            return await self._run_command(turn)
        if turn.refine:
            turn.decision = await self._refine(turn)
            await self._in_db(self._settle, turn)
            if turn.done:
                return None
        assert turn.call is not None
        try:
            with self._timed("run"):
                outcome = await run_call(self.deps, turn.call, self.channels, on_text)
        except BaseException:
            self._release(turn)
            raise
        return await self._in_db(self._record, turn, outcome)

    async def _run_command(self, turn: _Turn) -> Reply:
        inbound, message = turn.inbound, turn.message
        assert turn.command is not None
        name, argument = turn.command
        if name not in self.commands:
            text = UNKNOWN_COMMAND_REPLY.format(name=name)
        else:
            try:
                text = await self.commands[name](self, inbound, message, argument)
            except Exception:
                log.exception("command /%s failed in %s", name, inbound.scope)
                text = f"/{name} failed; nothing was lost. Please try again."
        return Reply(text=text, kind="command", agent="hub", via="command", message_id=message.id, scope=inbound.scope)

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

    async def _refine(self, turn: _Turn) -> Route:
        assert turn.decision is not None and self.deps.router_model is not None
        scope, message_id, settings = turn.inbound.scope, turn.message.id, self.settings

        def on_call(call: RouterCall) -> None:
            record_router_call(self.store, settings, scope, message_id, call)

        with self._timed("route"):
            return await refine_route(
                turn.decision,
                turn.inbound.text,
                turn.window,
                settings=settings,
                profiles=self.profiles,
                router_model=self.deps.router_model,
                on_call=on_call,
                agents=turn.agents,
            )

    async def _in_db(self, work: Callable[..., _T], *args: Any, routes: bool = False) -> _T:
        """``work(*args)`` inside one store session, off the event loop where the store's calls
        wait on the network (see :func:`scopehub.hub.dbwork.in_db_thread`; ``db_threads``
        overrides). A step that ``routes`` leaves the loop with an embedder too: embedding a
        message is milliseconds of CPU every other chat would wait for."""
        threads = self.db_threads
        if threads is None and routes and self.embedder_name:
            threads = True
        return await in_db_thread(self.store, work, *args, threads=threads)

    def _timed(self, stage: str) -> AbstractContextManager[None]:
        return timed(self.stage_times, stage)

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


_freezing = threading.Lock()
_heap_frozen = False


def freeze_start_up_heap() -> bool:
    """Once per process, when start-up is done: what it built (modules, classes, the agents,
    the models' tables: about 120,000 objects) is moved out of the collector's reach, so a
    full collection scans only what turns made since. Under ``bench hub`` a full pass during
    the turns took about 70 ms, paid by one reply in full and by every turn on average; with
    the heap frozen it scans about 14,000 objects instead of 133,000. Garbage is collected
    first, so none is frozen. True when this call froze the heap."""
    global _heap_frozen
    with _freezing:
        if _heap_frozen:
            return False
        gc.collect()
        gc.freeze()
        _heap_frozen = True
        return True

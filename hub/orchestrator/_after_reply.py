"""After the reply, the last stage of a turn: learning off the request path.

Lessons from the person's feedback, fact extraction, knowledge extraction (what the
request found in the archive, kept as the agent's research) and digest compaction run
after the reply is sent, each fail-open and each (where two processes could do it twice)
under a claim or a compare-and-set. They never delay an answer: a new message of the scope pauses the work in flight
(it is cancelled and done again after that reply).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

from scopehub.agents import AgentRegistry
from scopehub.hub.dbwork import in_db_thread
from scopehub.hub.digest.findings import call_extra_query, keep_finding
from scopehub.hub.orchestrator._types import Deps, Inbound, LessonService, Reply
from scopehub.hub.routing.correction import detect_correction
from scopehub.memory import (
    AlreadyDone,
    ClaimLease,
    Feedback,
    Lesson,
    Message,
    pending_feedback,
    pending_feedback_query,
    record_feedback,
)

__all__ = ["AfterReply"]

log = logging.getLogger(__name__)


@dataclass
class _AfterRead:
    """What the first store step after a reply read (see :meth:`AfterReply.after_send`)."""

    pending: list[Feedback] = field(default_factory=list)  # the scope's feedback not learnt yet
    message: Message | None = None  # the message answered
    plan: Any = None  # what learning facts from it needs (None: nothing to learn)
    finding: tuple[list[tuple], list[tuple]] | None = None  # the rows keep_finding reads (None: not read)


class AfterReply:
    """The work a reply leaves behind, per scope: queued, paused by new messages, resumed."""

    def __init__(self, deps: Deps, registry: AgentRegistry, holder: str) -> None:
        self.deps = deps
        self.registry = registry
        self.holder = holder
        self._lessons: LessonService | None = None
        self._background: set[asyncio.Task[Any]] = set()
        # Learning after a reply, per scope: the replies still to learn from, oldest first,
        # and the task working through them. A new message of the scope pauses that task.
        self._to_learn: dict[str, list[Reply]] = {}
        self._learning: dict[str, asyncio.Task[Any]] = {}
        self._zone = ZoneInfo(deps.settings.timezone)

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

    async def after_send(self, reply: Reply | None) -> None:
        """Learning off the request path (lessons from feedback, fact extraction, digest compaction); never raises.

        The store's part is two steps (two thread hops on PostgreSQL, see
        :mod:`scopehub.hub.dbwork`): one reads what all of it needs, one writes what the
        model found, keeps the finding and reads whether the digest is due. Each part fails
        on its own, as when each took its own steps.
        """
        if reply is None or not reply.scope:
            return
        deps = self.deps
        answered = reply.kind == "agent" and reply.message_id is not None
        read = await in_db_thread(deps.store, self._read_after, reply, answered)
        await self._learn_pending(reply.scope, read.pending)
        if not answered:
            return
        exchange = None
        if read.plan is not None:
            try:
                exchange = await deps.facts.consult(read.plan)  # type: ignore[union-attr]
            except Exception:
                log.exception("fact extraction failed for %s; the reply was not affected", reply.scope)
        due = await in_db_thread(deps.store, self._keep_after, reply, read, exchange)
        if deps.digest is not None and due is not False:
            try:
                await deps.digest.after_reply(reply.scope, self.holder, due=due)
            except Exception:
                log.exception("digest compaction failed for %s; the reply was not affected", reply.scope)

    def _read_after(self, reply: Reply, answered: bool) -> _AfterRead:
        """The first store step after a reply (any thread): the scope's pending feedback, the
        message answered, and what learning facts from it needs read."""
        assert reply.scope is not None
        deps, read = self.deps, _AfterRead()
        store, scope = deps.store, reply.scope
        learns = answered and deps.facts is not None
        # The pending feedback, the message answered, and the reply with its call record
        # (keep_finding's reads): one batch, one round trip on PostgreSQL. A failing batch
        # leaves each to be read on its own, with its own failure handling.
        batch = [pending_feedback_query(scope)]
        if learns:
            batch.append(store.get_query(scope, reply.message_id))
        if self._finding_read(reply):
            batch += [store.get_query(scope, reply.reply_id), call_extra_query(scope, reply.message_id, reply.agent)]  # type: ignore[arg-type]
        try:
            rows: list[list[tuple]] | None = store.query_batch(batch)
        except Exception:
            log.debug("the reads after a reply in %s in one batch failed; reading them one by one", scope, exc_info=True)
            rows = None
        try:
            read.pending = pending_feedback(store, scope, rows=rows[0] if rows is not None else None)
        except Exception:
            log.exception("pending feedback of %s unreadable; learning later", reply.scope)
        if rows is not None and self._finding_read(reply):
            read.finding = (rows[-2], rows[-1])
        if not learns:
            return read
        try:
            if rows is not None:
                read.message = store.message_of_row(rows[1][0]) if rows[1] else None
            else:
                read.message = store.get(scope, reply.message_id)  # type: ignore[arg-type]
            if read.message is not None:
                read.plan = deps.facts.plan_learning(read.message.scope, read.message)
        except Exception:
            log.exception("fact extraction failed for %s; the reply was not affected", reply.scope)
        return read

    def _keep_after(self, reply: Reply, read: _AfterRead, exchange: Any) -> bool | None:
        """The second store step (any thread): the facts the model found kept, the finding
        kept; returns whether the digest is due (None: unknown, read it again)."""
        deps = self.deps
        if exchange is not None:
            try:
                deps.facts.keep_learnt(read.plan, exchange)  # type: ignore[union-attr]
            except Exception:
                log.exception("fact extraction failed for %s; the reply was not affected", reply.scope)
        self.keep_finding(reply, read.message, read.finding)
        if deps.digest is None:
            return None
        try:
            return deps.digest.due(reply.scope)  # type: ignore[arg-type]
        except Exception:
            log.exception("digest of %s: cannot tell whether it is due; asking again", reply.scope)
            return None

    @staticmethod
    def _finding_read(reply: Reply) -> bool:
        """Whether :meth:`keep_finding` reads the stored reply with its call record."""
        return reply.reply_id is not None and bool(reply.scope) and reply.message_id is not None and bool(reply.agent)

    def keep_finding(self, reply: Reply, question: Message | None = None, read: tuple[list[tuple], list[tuple]] | None = None) -> None:
        """Knowledge extraction: what the request found in the archive, kept as the agent's
        research (:mod:`scopehub.hub.digest.findings`); fail-open. ``question``: the message
        answered, read already. The stored reply and its call record are read in one batch
        (one round trip on PostgreSQL); ``read``: their rows, read already."""
        if reply.reply_id is None or not reply.scope:
            return
        store, settings = self.deps.store, self.deps.settings
        try:
            call_rows = None
            if self._finding_read(reply):
                answer_rows, call_rows = read if read is not None else store.query_batch(
                    [store.get_query(reply.scope, reply.reply_id), call_extra_query(reply.scope, reply.message_id, reply.agent)]  # type: ignore[arg-type]
                )
                answer = store.message_of_row(answer_rows[0]) if answer_rows else None
            else:
                answer = store.get(reply.scope, reply.reply_id)
            if answer is not None:
                # The call record read is the answer's own only for its question and agent.
                fits = answer.reply_to == reply.message_id and answer.agent == reply.agent
                keep_finding(
                    store, answer, zone=self._zone, names=tuple(self.registry.names), half_life_days=settings.search_half_life_days,
                    question=question, call_rows=call_rows if fits else None,
                )  # fmt: skip
        except Exception:
            log.exception("knowledge extraction failed for %s; the reply was not affected", reply.scope)

    async def reflect_due(self) -> list[Any]:
        """Reflect every scope that is due (transports call this on a schedule); never raises."""
        if self.deps.reflector is None:
            return []
        try:
            return await self.deps.reflector.reflect_due(self.holder, now=self.deps.clock())
        except Exception:
            log.exception("reflection failed; nothing else was affected")
            return []

    def schedule(self, reply: Reply | None) -> None:
        """Run :meth:`after_send` in the background, never ahead of a reply of the same scope."""
        if reply is None or not reply.scope:
            return
        # Every stored agent reply: at least knowledge extraction looks at what it found.
        background = reply.kind == "agent" and reply.reply_id is not None
        if not background and not self._has_pending_feedback(reply.scope):
            return
        self._to_learn.setdefault(reply.scope, []).append(reply)
        self.resume(reply.scope)

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
                self.deps.store,
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

    def note_correction(self, inbound: Inbound, message: Message, window: list[Message]) -> None:
        """A correction right after an agent reply ("no, I meant ...") is feedback on that reply."""
        corrected = detect_correction(inbound.text, window)
        if corrected is not None:
            self.feedback_on(inbound.scope, corrected, inbound.text, source="correction", signal="negative", key=f"correction:{message.id}")

    def _has_pending_feedback(self, scope: str) -> bool:
        try:
            return bool(pending_feedback(self.deps.store, scope, limit=1))
        except Exception:
            log.exception("pending feedback of %s unreadable", scope)
            return False

    async def learn_feedback(self, scope: str) -> list[Lesson]:
        """Turn the scope's pending feedback into lessons, each under a claim; never raises."""
        try:
            pending = await in_db_thread(self.deps.store, pending_feedback, self.deps.store, scope)
        except Exception:
            log.exception("pending feedback of %s unreadable; learning later", scope)
            return []
        return await self._learn_pending(scope, pending)

    async def _learn_pending(self, scope: str, pending: list[Feedback]) -> list[Lesson]:
        """Lessons from ``pending`` (the scope's feedback read as pending), each under a claim."""
        store, clock = self.deps.store, self.deps.clock
        learnt: list[Lesson] = []
        if not pending:
            return learnt
        lessons = self.lessons
        for feedback in pending:
            note = f"{feedback.agent}: learning from the person's feedback"
            # Renewed while the lesson model runs; the pending -> learnt mark is the
            # compare-and-set behind it (AlreadyDone: another worker learnt it first).
            lease = ClaimLease(
                store, scope, f"lesson:{feedback.id}", self.holder, note=note, ttl=self.deps.settings.claim_ttl, clock=clock,
                run=partial(in_db_thread, store),
            )
            try:
                async with lease:
                    if not lease.held:
                        continue  # another process is learning it
                    learnt.append(await lessons.learn(feedback))
            except AlreadyDone:
                log.info("feedback %s of %s was learnt by another worker meanwhile", feedback.id, scope)
            except Exception:
                log.exception("lesson from feedback %s of %s failed; it stays pending", feedback.id, scope)
        return learnt

    def schedule_learning(self, scope: str) -> None:
        """Learn the scope's pending feedback in the background (a reaction has no reply to send first)."""
        self._in_background(self.learn_feedback(scope))

    # -- pausing for the next reply ----------------------------------------------------------
    def pause(self, scope: str) -> None:
        """A message of ``scope`` is being answered: the learning in flight stops (it is done again later)."""
        task = self._learning.get(scope)
        if task is not None and not task.done():
            task.cancel()

    def resume(self, scope: str) -> None:
        """Work through ``scope``'s queued replies again, unless that is already under way."""
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

    def _in_background(self, work: Awaitable[Any]) -> None:
        task = asyncio.get_running_loop().create_task(work)  # type: ignore[arg-type]
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for background work, learning put off included (tests, shutdown)."""
        for scope in list(self._to_learn):
            self.resume(scope)
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
            for scope in list(self._to_learn):
                self.resume(scope)

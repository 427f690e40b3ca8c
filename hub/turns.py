"""Scope turns: several workers on one database answer each scope's messages once, in order.

Every webhook worker stores what it receives (the store's unique ``(scope, ext_id)``
refuses a second copy, whichever worker it reaches) and marks it *owed* with a claim
``owed:<message id>`` before it tells the sender "received". Answering is a separate
step that needs the scope's *turn*, the claim ``turn`` of the scope:

* the worker that gets the turn answers the scope's owed messages one after another in
  message order, sending each reply before it clears the mark, and renews the turn
  before each one; then it releases the turn and looks again, because a message marked
  by another worker between its last look and the release is its to answer;
* a worker that finds the turn taken returns at once: the holder looks again after
  releasing the turn, so the message it just marked is answered.

The claims' TTL is the only expiry across machines. A worker killed mid-reply leaves its
turn and its marks to run out; :meth:`ScopeTurns.sweep`, which every worker runs every
so often (and at start), finds marks whose TTL ran out (nobody worked the scope for a
whole TTL), takes the scope's turn and answers them. On the dead worker's own machine
the sweep does not wait: a turn whose holder's process is gone is taken over at once
(:func:`scopehub.memory.holder_gone`), so a restarted worker answers its predecessor's
chats as soon as it starts. The holder renews the marks it sees while it works, so
a long queue never looks abandoned, and while one answer takes long a thread of the
process renews the turn and that message's mark (:class:`Leases`): the TTL detects a
dead process, not an event loop kept busy by other chats. A live worker whose turn ran
out would answer beside the new holder, which sends a reply the first is still sending.

Within one process only one task works a scope's turn (a claim's holder names the
process, and re-acquiring one's own claim would only renew it).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from scopehub.hub.dbwork import in_db_thread
from scopehub.memory import (
    acquire_claim,
    claims_of,
    expired_claims,
    release_claim,
    renew_claim,
)

__all__ = ["BOOKKEEPING_PREFIXES", "OWED_PREFIX", "QUEUE_HOLDER", "TURN_KEY", "Owed", "ScopeTurns", "is_bookkeeping", "is_transient"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

TURN_KEY = "turn"
OWED_PREFIX = "owed:"  # owed:<message id> (answer it) or owed:<message id>:tag (only route and tag it)
QUEUE_HOLDER = "queue"  # the holder of marks: any turn holder may renew and clear them
_TAG_SUFFIX = ":tag"


@dataclass(frozen=True, order=True)
class Owed:
    """A stored message of the scope's queue: to answer, or (``answer=False``) only to route and tag."""

    message_id: int
    answer: bool = True

    @property
    def key(self) -> str:
        return f"{OWED_PREFIX}{self.message_id}{'' if self.answer else _TAG_SUFFIX}"

    @classmethod
    def parse(cls, key: str) -> Owed | None:
        if not key.startswith(OWED_PREFIX):
            return None
        rest = key[len(OWED_PREFIX) :]
        answer = not rest.endswith(_TAG_SUFFIX)
        number = rest if answer else rest[: -len(_TAG_SUFFIX)]
        return cls(int(number), answer) if number.isdigit() else None


# What a look at the queue read (see ScopeTurns._next_owed), or the failure that stopped it.
_Look: TypeAlias = "list[Owed] | Exception | None"
_UNREAD = object()  # no look read yet


# Claims that are the hub's own bookkeeping, not work an agent should hear about in its
# awareness block: the scope's turn, owed marks, a pending /forget all, a Maildir file taken.
BOOKKEEPING_PREFIXES = (TURN_KEY, OWED_PREFIX, "forget-all:", "maildir:")


def is_bookkeeping(key: str) -> bool:
    """Whether a claim key is the hub's own bookkeeping (never shown to agents)."""
    return key == TURN_KEY or key.startswith(BOOKKEEPING_PREFIXES[1:])


class DeliveryDeferred(Exception):
    """A reply is stored but could not be sent for now (the chat service unreachable or
    rate-limiting past the retries): its message stays owed, and a later turn (or the
    sweep, once the mark runs out) sends the stored reply instead of dropping it."""


def is_transient(exc: BaseException) -> bool:
    """A failure worth trying again later: the database connection (a restart, a lock),
    or a reply that could not be sent yet."""
    import sqlite3

    from scopehub.memory import StoreUnavailable

    if isinstance(exc, (sqlite3.OperationalError, DeliveryDeferred, StoreUnavailable)):
        return True
    return any(kind.__module__.split(".")[0] == "psycopg" for kind in type(exc).__mro__)


# What a transport does with one owed message: answer it (or resend a stored reply that
# never went out) and send the reply. Raising leaves the mark for a later turn.
Work = Callable[[str, Owed], Awaitable[None]]
# What a transport reads from the store for an owed message before it works it (in a store
# session, any thread; never None): read in the store step that found the message, so that
# working it takes no step of its own (see ScopeTurns.read_ahead).
ReadAhead = Callable[[str, Owed], Any]


def _renew_marks(store, scope: str, items: list[Owed], *, ttl: float, now: float) -> None:
    """Renew owed marks. Acquire, not renew: it renews a live mark and takes back one that
    ran out alike."""
    for item in items:
        note = f"hub: waiting to {'answer' if item.answer else 'tag'} message {item.message_id}"
        acquire_claim(store, scope, item.key, QUEUE_HOLDER, note=note, ttl=ttl, now=now)


# A loop that has not run a callback for this many TTLs is stuck, not busy: its leases are
# left to run out so that another worker takes its chats over.
LOOP_STALL_TTLS = 4.0


class Leases:
    """The turns this process is answering in, renewed from a thread of its own.

    Every TTL/3 the thread renews each held turn and the mark of the message being
    answered. It renews only while the process's event loop still runs callbacks (it asks
    the loop to note the time on each round): a loop stuck for :data:`LOOP_STALL_TTLS`
    TTLs lets its leases run out, as a dead process's do. A turn that could not be
    renewed (it ran out and was taken) is dropped, and the answer's worker learns it at
    its next step.
    """

    def __init__(self, store, holder: str, *, ttl: float, clock: Callable[[], float]) -> None:
        self.store = store
        self.holder = holder
        self.ttl = ttl
        self.clock = clock
        self._held: dict[str, Owed] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_seen = time.monotonic()

    def hold(self, scope: str, item: Owed) -> None:
        """Keep the scope's turn and ``item``'s mark until :meth:`drop` (call from the event loop)."""
        with self._lock:
            self._held[scope] = item
            self._loop = asyncio.get_running_loop()
            if self._thread is None or not self._thread.is_alive():
                self._loop_seen = time.monotonic()
                self._thread = threading.Thread(target=self._run, name="turn-leases", daemon=True)
                self._thread.start()

    def drop(self, scope: str) -> None:
        with self._lock:
            self._held.pop(scope, None)

    def _seen(self) -> None:
        self._loop_seen = time.monotonic()

    def _run(self) -> None:
        while True:
            time.sleep(self.ttl / 3)
            with self._lock:
                held, loop = dict(self._held), self._loop
                if not held:
                    self._thread = None  # nothing to keep: the next hold starts a thread again
                    return
            if loop is None or loop.is_closed():
                continue
            try:
                loop.call_soon_threadsafe(self._seen)
            except RuntimeError:  # the loop closed meanwhile
                continue
            if time.monotonic() - self._loop_seen > LOOP_STALL_TTLS * self.ttl:
                log.warning("the event loop has been stuck for %.0fs; leaving %d turns to run out", time.monotonic() - self._loop_seen, len(held))
                continue
            self._renew(held)

    def _renew(self, held: dict[str, Owed]) -> None:
        now = self.clock()
        for scope, item in held.items():
            try:
                if not renew_claim(self.store, scope, TURN_KEY, self.holder, ttl=self.ttl, now=now):
                    log.warning("the turn of %s ran out during one answer; another worker may answer the rest", scope)
                    with self._lock:
                        if self._held.get(scope) == item:
                            del self._held[scope]
                    continue
                _renew_marks(self.store, scope, [item], ttl=self.ttl, now=now)
            except Exception as exc:
                log.warning("cannot renew the turn of %s (%s); trying again", scope, exc)


class ScopeTurns:
    """The owed marks and the turn loop over one store, for one process."""

    def __init__(
        self, store, holder: str, work: Work, *, ttl: float, clock: Callable[[], float] = time.time, read: ReadAhead | None = None
    ) -> None:
        self.store = store
        self.holder = holder
        self.work = work
        self.read = read
        self._read: dict[str, tuple[Owed, Any]] = {}  # per scope: the next item and what read gave for it
        self.ttl = ttl
        self.clock = clock
        self._working: set[str] = set()  # scopes whose turn a task of this process works now
        self._turn_until: dict[str, float] = {}  # when each turn this process took or renewed expires
        self._looked: dict[str, _Look] = {}  # the queue as read with the turn just taken, for _drain
        self.leases = Leases(store, holder, ttl=ttl, clock=clock)

    # -- marks ---------------------------------------------------------------------------
    def owe(self, scope: str, message_id: int, text: str = "", *, answer: bool = True) -> None:
        """Mark a stored message owed (idempotent: a redelivery renews the same mark)."""
        item = Owed(message_id, answer)
        note = f"hub: waiting to {'answer' if answer else 'tag'} {' '.join(text.split())[:60]!r}"
        acquire_claim(self.store, scope, item.key, QUEUE_HOLDER, note=note, ttl=self.ttl, now=self.clock())

    def owed(self, scope: str) -> list[Owed]:
        """The scope's owed messages, in message order: every mark, also one whose TTL ran out.

        A mark runs out when nobody worked the scope for a TTL (its worker died, or the
        message waited that long for a free slot); it is still owed, and skipping it would
        answer a later message first.
        """
        items = (Owed.parse(c.key) for c in claims_of(self.store, scope, prefix=OWED_PREFIX))
        return sorted(item for item in items if item is not None)

    # -- the store steps of a turn (each in one store session, off the event loop where the
    #    store waits on the network: see scopehub.hub.dbwork) ---------------------------
    async def _db(self, work: Callable[..., _T], *args: object) -> _T:
        return await in_db_thread(self.store, work, *args)

    def _take_turn(self, scope: str) -> object:
        note = "hub: answering this chat's messages in order"
        claim = acquire_claim(self.store, scope, TURN_KEY, self.holder, note=note, ttl=self.ttl, now=self.clock())
        if claim is not None:
            self._turn_until[scope] = claim.expires
        return claim

    # The steps below do two things in one store session, so in one thread hop (about
    # 0.12 ms of CPU each on PostgreSQL, bench hub): the same statements in the same order
    # as two steps. The second thing's failure is handed back, not raised, so the caller
    # tells it from the first's, as when they were two steps.
    def _take_turn_and_look(self, scope: str) -> tuple[object, _Look]:
        """Take the turn and, when it is ours, the first :meth:`_next_owed`."""
        claim = self._take_turn(scope)
        return claim, (self._look(scope) if claim is not None else None)

    def _clear_and_look(self, scope: str, key: str) -> _Look:
        """Clear a worked message's mark (raises when it cannot), then the next :meth:`_next_owed`."""
        release_claim(self.store, scope, key, QUEUE_HOLDER)
        return self._look(scope)

    def _look(self, scope: str) -> _Look:
        try:
            items = self._next_owed(scope)
        except Exception as exc:
            return exc
        if items and self.read is not None:
            # The next item's own read in this step too; its failure is the work's to raise.
            try:
                self._read[scope] = (items[0], self.read(scope, items[0]))
            except Exception as exc:
                self._read[scope] = (items[0], exc)
        return items

    def read_ahead(self, scope: str, item: Owed) -> Any:
        """What ``read`` gave for ``item`` in the step that found it (taken: once), an exception
        when it failed; None when it was not read there (read it now)."""
        ahead = self._read.pop(scope, None)
        return ahead[1] if ahead is not None and ahead[0] == item else None

    def _next_owed(self, scope: str) -> list[Owed] | None:
        """The owed messages, their marks and the turn renewed; None when the turn ran out.

        Only what a third of a TTL has aged is renewed (a mark that ran out is taken back):
        renewing every mark before every message cost two round trips a mark, for a long
        queue most of them. A claim is never taken from its holder before it expires, so
        one renewed less than a third of a TTL ago is still this worker's.
        """
        now = self.clock()
        fresh = now + self.ttl * (2 / 3)
        marks = [(item, c.expires) for c in claims_of(self.store, scope, prefix=OWED_PREFIX) if (item := Owed.parse(c.key)) is not None]
        items = sorted(item for item, _ in marks)
        if not items:
            return items
        if self._turn_until.get(scope, 0.0) <= fresh:
            if not renew_claim(self.store, scope, TURN_KEY, self.holder, ttl=self.ttl, now=now):
                self._turn_until.pop(scope, None)
                return None
            self._turn_until[scope] = now + self.ttl
        _renew_marks(self.store, scope, sorted(item for item, expires in marks if expires <= fresh), ttl=self.ttl, now=now)
        return items

    def _revive_expired(self, limit: int) -> dict[str, None]:
        """The scopes whose expired marks were revived (so the turn sees them), and those
        whose turn was left by a worker of this machine that is gone."""
        stale = expired_claims(self.store, prefix=OWED_PREFIX, now=self.clock(), limit=limit)
        scopes: dict[str, None] = {}
        try:
            # A turn left by a worker of this machine whose process is gone (SIGKILL, OOM):
            # its marks are still live (it renewed them until it died), so its chats would
            # wait a whole TTL; the turn is taken over now.
            left = [c for c in expired_claims(self.store, prefix=TURN_KEY, now=self.clock(), limit=limit) if c.key == TURN_KEY]
        except Exception as exc:
            log.warning("cannot look for abandoned turns (%s); trying again at the next sweep", exc)
            left = []
        for claim in left:
            scopes.setdefault(claim.scope)
        for claim in stale:
            if Owed.parse(claim.key) is None:
                continue
            try:
                if acquire_claim(self.store, claim.scope, claim.key, QUEUE_HOLDER, note=claim.note, ttl=self.ttl, now=self.clock()):
                    scopes.setdefault(claim.scope)
            except Exception as exc:
                log.warning("cannot revive the mark %s of %s (%s)", claim.key, claim.scope, exc)
        return scopes

    # -- the turn ------------------------------------------------------------------------
    def busy(self, scope: str) -> bool:
        """Whether a task of this process works the scope's turn now."""
        return scope in self._working

    async def run(self, scope: str) -> int:
        """Work the scope's queue if its turn is free; returns how many owed messages this call worked.

        Never raises for a database failure: the marks stay and a later turn (or the
        sweep) works them.
        """
        done = 0
        while True:
            if scope in self._working:
                return done  # our own task works it and looks again before it stops
            self._working.add(scope)
            try:
                try:
                    claim, look = await self._db(self._take_turn_and_look, scope)
                    if claim is None:
                        return done  # another worker's turn: it looks again after releasing it
                except Exception as exc:
                    log.warning("cannot take the turn of %s (%s); its messages wait for a later turn", scope, exc)
                    return done
                self._looked[scope] = look
                try:
                    worked, finished = await self._drain(scope)
                    done += worked
                finally:
                    self._looked.pop(scope, None)
                    self._read.pop(scope, None)
                    self._turn_until.pop(scope, None)
                    try:
                        await self._db(release_claim, self.store, scope, TURN_KEY, self.holder)
                    except Exception as exc:
                        log.warning("turn of %s not released (%s); it runs out", scope, exc)
            finally:
                self._working.discard(scope)
            if not finished:
                return done  # the database failed: the marks stay, and run out into the sweep
            # The last look comes after _working is cleared, in a step of its own: a message
            # this process marks from now on starts its own turn, and one marked before is seen.
            try:
                if not await self._db(self.owed, scope):
                    return done
            except Exception as exc:
                log.warning("cannot look at the queue of %s (%s); the sweep will", scope, exc)
                return done
            # Marked by another worker after our last look: ours to answer.

    async def _drain(self, scope: str) -> tuple[int, bool]:
        """Work the owed messages in order: ``(how many, whether the queue was emptied)``."""
        done = 0
        look = self._looked.pop(scope, _UNREAD)  # read when the turn was taken
        while True:
            try:
                items = await self._db(self._look, scope) if look is _UNREAD else look
                if isinstance(items, Exception):
                    raise items
                if items is None:
                    log.warning("the turn of %s ran out while working it; leaving the rest to its new holder", scope)
                    return done, False
                if not items:
                    return done, True
            except Exception as exc:
                log.warning("cannot work the queue of %s (%s); its messages wait for a later turn", scope, exc)
                return done, False
            item = items[0]
            self.leases.hold(scope, item)
            try:
                await self.work(scope, item)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if is_transient(exc):
                    log.warning("message %s of %s not answered yet (%s); it stays owed", item.message_id, scope, exc)
                    return done, False
                # A message that cannot be worked must not block the scope's queue for ever.
                log.exception("message %s of %s could not be answered; dropping it from the queue", item.message_id, scope)
            finally:
                self.leases.drop(scope)
            try:
                look = await self._db(self._clear_and_look, scope, item.key)
            except Exception as exc:
                log.warning("mark of message %s of %s not cleared (%s); it is checked again", item.message_id, scope, exc)
                return done, False
            done += 1

    async def sweep(self, *, limit: int = 200, concurrency: int = 16) -> int:
        """Work the scopes whose marks ran out (their worker died, or no turn was ever taken).

        Revives each expired mark (so the turn sees it), then runs each scope's turn.
        Returns how many owed messages were worked. Never raises.
        """
        try:
            scopes = await self._db(self._revive_expired, limit)
        except Exception as exc:
            log.warning("cannot look for abandoned messages (%s); trying again at the next sweep", exc)
            return 0
        # The scopes side by side (a bounded few at a time), as their webhooks would have
        # answered them: one after another, a dead worker's ten chats waited for each
        # other's whole queues, and the sweep outlived its own interval.
        slots = asyncio.Semaphore(concurrency)

        async def answer(scope: str) -> int:
            async with slots:
                log.warning("answering the queue of %s: its marks ran out (its worker stopped, or waited too long)", scope)
                return await self.run(scope)

        return sum(await asyncio.gather(*(answer(scope) for scope in scopes)))

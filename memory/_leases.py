"""A claim held while its work runs: acquired, renewed in the background, released.

Background work (digest compaction, reflection, learning a lesson) may outlast any TTL
chosen in advance: a slow model, a long backlog. A :class:`ClaimLease` renews its claim
every third of the TTL from a task of the event loop while the work awaits, so the claim
stays live exactly as long as its holder does: a crashed worker stops renewing and its
claim runs out one TTL later (at once on the same machine, :mod:`._holders`).

A renewal can fail: the claim ran out anyway (the loop was blocked longer than the TTL,
the clock jumped) and another worker took it. The lease then says so (:attr:`lost`), and
the work checks :meth:`ClaimLease.still_held` before each write that must not happen twice;
a compare-and-set on the work's own watermark (the digest's version, reflection's
watermark) is the last guard.

Its own store calls (acquire, renew, release) run through ``run`` when one is given: the
hub passes its database threads, so a store that waits on the network (PostgreSQL) never
holds the event loop for a claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

from ._claims import Claim, acquire_claim, release_claim, renew_claim
from ._store import Store

__all__ = ["ClaimLease", "ClaimLost"]

_T = TypeVar("_T")

# How a lease runs its store calls: ``run(work, *args)`` awaits ``work(*args)``.
StoreRunner = Callable[..., Awaitable[Any]]

log = logging.getLogger(__name__)


class ClaimLost(Exception):
    """The lease's claim was taken by another worker while the work ran."""


class ClaimLease:
    """``async with ClaimLease(...) as lease:`` holds the claim (``lease.held``) until the block ends.

    ``clock`` gives the claim's time (a run "as of" another time passes its own); the
    renewals wait real seconds, ``every`` (default: a third of ``ttl``).
    """

    def __init__(
        self,
        store: Store,
        scope: str,
        key: str,
        holder: str,
        *,
        note: str,
        ttl: float,
        clock: Callable[[], float] = time.time,
        every: float | None = None,
        run: StoreRunner | None = None,
    ) -> None:
        self.store = store
        self.scope = scope
        self.key = key
        self.holder = holder
        self.note = note
        self.ttl = float(ttl)
        self.clock = clock
        self.every = float(every) if every is not None else self.ttl / 3
        self.claim: Claim | None = None
        self.lost = False
        self.renewals = 0
        self._task: asyncio.Task[None] | None = None
        self._run = run

    async def _call(self, work: Callable[..., _T], *args: Any) -> _T:
        """``work(*args)`` through the lease's runner, or right here without one."""
        return work(*args) if self._run is None else await self._run(work, *args)

    @property
    def held(self) -> bool:
        """Whether the claim was acquired and has not been lost since."""
        return self.claim is not None and not self.lost

    def still_held(self) -> None:
        """Raise :class:`ClaimLost` when another worker took the claim meanwhile."""
        if self.claim is not None and self.lost:
            raise ClaimLost(f"claim {self.key} of {self.scope} was taken by another worker")

    async def __aenter__(self) -> ClaimLease:
        self.claim = await self._call(self._acquire)
        if self.claim is not None:
            self._task = asyncio.get_running_loop().create_task(self._renew_forever())
        return self

    def _acquire(self) -> Claim | None:
        return acquire_claim(self.store, self.scope, self.key, self.holder, note=self.note, ttl=self.ttl, now=self.clock())

    def _renew(self) -> bool:
        return renew_claim(self.store, self.scope, self.key, self.holder, ttl=self.ttl, now=self.clock())

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                renewed = await self._call(self._renew)
            except Exception as exc:  # a database hiccup: the claim still has time left, try again
                log.warning("cannot renew claim %s of %s (%s); trying again", self.key, self.scope, exc)
                continue
            if not renewed:
                self.lost = True
                log.warning("claim %s of %s ran out and was taken while its work ran; stopping that work", self.key, self.scope)
                return
            self.renewals += 1

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.claim is not None and not self.lost:
            try:
                await self._call(release_claim, self.store, self.scope, self.key, self.holder)
            except Exception as failure:
                log.warning("claim %s of %s not released (%s); it runs out", self.key, self.scope, failure)

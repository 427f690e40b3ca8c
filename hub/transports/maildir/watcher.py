"""Waking the intake: inotify (watchfiles / Rust notify) on the root, polling as the fallback.

The watcher does a full pass at start (the backlog), then waits for a file to arrive in
some ``new/`` and drains again. Independently of wake-ups it ticks: every
``poll_interval`` seconds when polling, and when inotify is on at least every
``tick`` seconds and as soon as a rate-limited scope may send again. Each pass also
checks for stale inboxes (one warning per inbox while it stays stale).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from .intake import DrainReport, MaildirIntake
from .layout import RESERVED

__all__ = ["MaildirWatcher"]

log = logging.getLogger(__name__)


def _arrival_filter(root: Path):
    """Only files appearing in ``<scope>/<inbox>/new/`` wake the intake (not our own receipts, cur/...)."""
    from watchfiles import Change

    root_parts = len(root.parts)

    def wanted(change: Change, path: str) -> bool:
        parts = Path(path).parts[root_parts:]
        return (
            change != Change.deleted and len(parts) == 4 and parts[2] == "new" and parts[0] not in RESERVED
        )

    return wanted


class MaildirWatcher:
    """Runs ``intake`` whenever something arrives; ``start()`` then ``await stop()``.

    ``force_polling=True`` never tries inotify. ``mode`` is ``"inotify"`` or ``"polling"``.
    """

    def __init__(
        self,
        intake: MaildirIntake,
        *,
        poll_interval: float = 5.0,
        tick: float = 60.0,
        force_polling: bool = False,
        debounce_ms: int = 200,
    ) -> None:
        self.intake = intake
        self.root = intake.root
        self.poll_interval = poll_interval
        self.tick = tick
        self.force_polling = force_polling
        self.debounce_ms = debounce_ms
        self.mode = "polling" if force_polling else "inotify"
        self.passes = 0
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._watch_task: asyncio.Task | None = None

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> asyncio.Task:
        """Start watching in a task of the running loop; returns the task."""
        if self._task is None or self._task.done():
            self._stop = asyncio.Event()
            self._task = asyncio.create_task(self.run(), name="maildir-watcher")
        return self._task

    async def stop(self) -> None:
        """Stop watching and wait for the current pass to finish."""
        self._stop.set()
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def run(self) -> None:
        """Watch until :meth:`stop`."""
        self.root.mkdir(parents=True, exist_ok=True)
        if self.force_polling:
            self._use_polling("force_polling is set")
        else:
            log.info("maildir: watching %s with inotify", self.root)
            self._watch_task = asyncio.create_task(self._watch(), name="maildir-inotify")
        try:
            while not self._stop.is_set():
                self._wake.clear()
                report = await self.pass_once()
                timeout = self.poll_interval if self.mode == "polling" else self.tick
                if report.next_in is not None:
                    timeout = min(timeout, max(report.next_in, 0.05))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
        finally:
            self._stop.set()
            if self._watch_task is not None:
                try:
                    await asyncio.wait_for(self._watch_task, 10)
                except (TimeoutError, asyncio.CancelledError):
                    self._watch_task.cancel()
                self._watch_task = None

    async def pass_once(self) -> DrainReport:
        """One drain pass and a staleness check; never raises (a failure is a log line)."""
        self.passes += 1
        try:
            report = await self.intake.drain_once()
        except Exception:
            log.exception("maildir: an intake pass failed")
            report = DrainReport()
        try:
            await asyncio.to_thread(self.intake.check_stale)
        except Exception:
            log.exception("maildir: the staleness check failed")
        return report

    # -- waking ---------------------------------------------------------------------
    def _use_polling(self, why: str) -> None:
        self.mode = "polling"
        log.warning("maildir: polling %s every %g s (%s)", self.root, self.poll_interval, why)
        self._wake.set()  # take the new interval now

    async def _watch(self) -> None:
        from watchfiles import awatch

        root = self.root.resolve()
        try:
            async for _changes in awatch(
                root,
                watch_filter=_arrival_filter(root),
                debounce=self.debounce_ms,
                step=50,
                stop_event=self._stop,
                rust_timeout=1000,
                force_polling=False,
            ):
                self._wake.set()
            if not self._stop.is_set():
                self._use_polling("the inotify watcher ended")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not self._stop.is_set():
                self._use_polling(f"inotify unavailable: {type(exc).__name__}: {exc}")

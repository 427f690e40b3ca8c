"""The intake: turns files in ``<scope>/<agent|hub>/new/`` into dispatches for the hub.

For each file, oldest first and urgent before normal before low, within each scope's rate
limit: read it (never following symlinks, at most 1 MiB), parse the front matter, build a
:class:`Dispatch`, and ``await deliver(dispatch)``. Only after ``deliver`` returns is the
reply (if asked for) written to ``outbox/<sender>/``, the receipt written, and the file
moved ``new/ -> cur/``. A crash anywhere before the move leaves the file in ``new/``: the
next intake delivers it again with the same name, and the hub, which keys the message by
``maildir:<file name>`` within the scope, sees the duplicate and does not answer twice.

Rejected files go to ``dlq/<scope folder>/<inbox>/`` with a ``.reason`` file beside them
and a dlq receipt; nothing is deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .files import (
    Rejected,
    move_no_replace,
    parse_dispatch_text,
    read_regular,
    scalar,
    write_json_atomic,
    write_text_atomic,
)
from .layout import (
    HUB_INBOX,
    PRIORITIES,
    PRIORITY_RANK,
    check_name,
    iso,
    parse_name,
    scope_from_folder,
    stored_name,
)
from .send import dispatch_out
from .status import InboxBacklog, backlog, inboxes, remove_abandoned

__all__ = [
    "Deliver",
    "Delivered",
    "Dispatch",
    "DrainReport",
    "MaildirIntake",
    "RetryLater",
    "TokenBucket",
]

log = logging.getLogger(__name__)


class RetryLater(Exception):
    """Raised by ``deliver`` when a file cannot be settled yet: it stays in ``new/`` and is tried again.

    The hub raises it when the file's message is stored but its answer is still in flight,
    claimed by another process or by one that was killed (its claim runs out): moving the
    file to ``cur/`` then would leave it unanswered for good.
    """


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One file from an inbox, as the hub receives it.

    ``scope`` comes from the folder, never from the front matter; ``agent`` is the inbox
    (None for ``hub``: the hub routes it).
    """

    scope: str
    agent: str | None
    sender: str  # front matter `from`
    subject: str
    body: str
    priority: str  # urgent | normal | low
    name: str  # the file name: the message's key within the scope
    thread: str | None = None
    reply_to: str | None = None
    kind: str | None = None
    wants_reply: bool = False  # front matter `reply: true`: answer into outbox/<sender>/
    created: str | None = None

    @property
    def ext_id(self) -> str:
        """The external id to store the message under: ``maildir:<file name>`` (unique per scope)."""
        return f"maildir:{self.name}"

    @property
    def inbox(self) -> str:
        return self.agent or HUB_INBOX

    def text(self) -> str:
        """The message text for the chat: the subject, a blank line, the body."""
        if self.subject and self.body:
            return f"{self.subject}\n\n{self.body}"
        return self.subject or self.body


@dataclass(frozen=True, slots=True)
class Delivered:
    """What ``deliver`` may return instead of plain reply text (for the receipt and the reply)."""

    reply: str | None = None
    message_id: int | None = None  # the stored message's id, for the receipt
    agent: str | None = None  # who answered: the reply file's `from` (default: the inbox)


Deliver = Callable[[Dispatch], Awaitable["str | Delivered | None"]]


@dataclass(slots=True)
class DrainReport:
    """What one pass did."""

    delivered: int = 0
    rejected: int = 0
    waiting: int = 0  # held back by a scope's rate limit (or waiting to retry)
    failed: int = 0  # deliver raised; the file stays in new/ and is retried later
    next_in: float | None = None  # seconds until something held back may go


class TokenBucket:
    """``rate`` tokens per ``period`` seconds, at most ``rate`` saved up."""

    def __init__(self, rate: float, period: float, now: float) -> None:
        self.capacity = float(rate)
        self.per_second = rate / period
        self.tokens = float(rate)
        self.updated = now

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self.updated)  # a clock stepping back refills nothing
        self.tokens = min(self.capacity, self.tokens + elapsed * self.per_second)
        self.updated = now

    def ready(self, now: float) -> bool:
        self._refill(now)
        return self.tokens >= 1.0

    def take(self, now: float) -> bool:
        if not self.ready(now):
            return False
        self.tokens -= 1.0
        return True

    def wait(self, now: float) -> float:
        """Seconds until one token is there."""
        self._refill(now)
        return max(0.0, (1.0 - self.tokens) / self.per_second)


@dataclass(frozen=True, slots=True)
class _Entry:
    folder: str
    inbox: str
    name: str
    path: str
    order: tuple


def _reply_flag(meta: dict[str, Any]) -> bool:
    value = meta.get("reply", False)
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no"):
        return value.strip().lower() in ("true", "yes")
    raise Rejected(f"'reply' must be true or false, not {value!r}"[:200])


def build_dispatch(scope: str, agent: str | None, name: str, meta: dict[str, Any], body: str) -> Dispatch:
    """The dispatch a parsed file stands for; Rejected when a field is unusable."""
    sender = scalar(meta, "from")
    if not sender:
        raise Rejected("front matter has no 'from'")
    try:
        check_name(sender, "'from'")
    except ValueError as exc:
        raise Rejected(str(exc)[:300]) from None
    priority = scalar(meta, "priority")
    if priority is None:
        info = parse_name(name)
        priority = info.priority if info else "normal"
    if priority not in PRIORITIES:
        raise Rejected(f"bad priority {priority[:40]!r}: expected urgent, normal or low")
    for ignored in ("to", "scope"):  # informational only: the folder decides
        scalar(meta, ignored)
    return Dispatch(
        scope=scope,
        agent=agent,
        sender=sender,
        subject=scalar(meta, "subject") or "",
        body=body,
        priority=priority,
        name=name,
        thread=scalar(meta, "thread"),
        reply_to=scalar(meta, "reply_to"),
        kind=scalar(meta, "kind"),
        wants_reply=_reply_flag(meta),
        created=scalar(meta, "created"),
    )


class MaildirIntake:
    """Drains every inbox under ``root`` into ``deliver``; see the module docstring.

    ``agents``: the known agent names (the inbox ``hub`` is always known).
    ``deliver``: ``async (Dispatch) -> str | Delivered | None``; it must commit the message
    under ``dispatch.ext_id`` and return the reply text (or None for no reply). On a
    redelivery (the store says the ext id is a duplicate) it must not answer again: it
    returns the stored reply (so a reply lost in a crash is written once) or None.
    ``scope_ok``: an extra check on the scope (default: every valid scope is accepted).
    ``rate_per_scope`` files per ``rate_period`` seconds per scope (None: no limit).
    ``stale_after``: seconds after which a waiting file is logged as stale (once per inbox).
    ``retry_after``: seconds before a file whose delivery raised (or asked to
    :class:`RetryLater`) is tried again.
    ``claim`` / ``release``: with several processes on one Maildir (webhook workers on a
    shared volume), ``claim(dispatch)`` must say whether this process takes the file (a
    claim on the database); a file another process took is left to it, and ``release``
    is called once the file is settled.
    """

    def __init__(
        self,
        root: Path,
        *,
        agents: Iterable[str],
        deliver: Deliver,
        scope_ok: Callable[[str], bool] | None = None,
        rate_per_scope: int | None = 10,
        rate_period: float = 60.0,
        stale_after: float = 600.0,
        retry_after: float = 30.0,
        clock: Callable[[], float] = time.time,
        claim: Callable[[Dispatch], bool] | None = None,
        release: Callable[[Dispatch], None] | None = None,
    ) -> None:
        self.root = Path(root)
        self.claim = claim
        self.release = release
        self.agents = frozenset(agents)
        self.deliver = deliver
        self.scope_ok = scope_ok
        if rate_per_scope is not None and (rate_per_scope < 1 or rate_period <= 0):
            raise ValueError("rate_per_scope must be at least 1 and rate_period positive")
        self.rate_per_scope = rate_per_scope
        self.rate_period = rate_period
        self.stale_after = stale_after
        self.retry_after = retry_after
        self.clock = clock
        self._buckets: dict[str, TokenBucket] = {}
        self._retry_at: dict[str, float] = {}
        self._warned: set[str] = set()

    # -- scanning -------------------------------------------------------------------
    def pending(self) -> list[_Entry]:
        """Every file waiting in a ``new/``, in delivery order: urgent first, then oldest."""
        entries = []
        for folder, inbox, new in inboxes(self.root):
            try:
                with os.scandir(new) as listing:
                    found = [(entry.name, entry.path, entry) for entry in listing]
            except FileNotFoundError:
                continue
            for name, path, entry in found:
                info = parse_name(name)
                if info is not None:
                    order = (PRIORITY_RANK[info.priority], info.created, name)
                else:
                    try:
                        mtime = entry.stat(follow_symlinks=False).st_mtime
                    except FileNotFoundError:
                        continue
                    order = (PRIORITY_RANK["normal"], mtime, name)
                entries.append(_Entry(folder, inbox, name, path, order))
        entries.sort(key=lambda entry: entry.order)
        return entries

    def _bucket(self, scope: str, now: float) -> TokenBucket | None:
        if self.rate_per_scope is None:
            return None
        bucket = self._buckets.get(scope)
        if bucket is None:
            bucket = self._buckets[scope] = TokenBucket(self.rate_per_scope, self.rate_period, now)
        return bucket

    # -- one pass -------------------------------------------------------------------
    async def drain_once(self) -> DrainReport:
        """Process what may go now; the rest waits for the next pass.

        Only ``deliver`` runs on the event loop; scanning, reading, parsing, receipts and
        moves (with their fsyncs) run in a worker thread, so a backlog never blocks the loop.
        """
        report = DrainReport()
        held: set[str] = set()
        for entry in await asyncio.to_thread(self.pending):
            await self._process(entry, report, held)
        return report

    def _hold(self, report: DrainReport, wait: float) -> None:
        report.waiting += 1
        report.next_in = wait if report.next_in is None else min(report.next_in, wait)

    def _route(self, entry: _Entry) -> tuple[str | None, str | None, str | None]:
        """``(scope, agent, None)`` for a file the hub may take, or ``(scope, None, reason)``."""
        try:
            entry.name.encode("utf-8")
        except UnicodeEncodeError:
            return None, None, "file name is not UTF-8"
        try:
            scope = scope_from_folder(entry.folder)
        except ValueError:
            return None, None, f"unknown scope: folder {entry.folder!r} is no scope folder"
        if self.scope_ok is not None and not self.scope_ok(scope):
            return scope, None, f"unknown scope {scope!r}"
        if entry.inbox == HUB_INBOX:
            return scope, None, None
        if entry.inbox in self.agents:
            return scope, entry.inbox, None
        return scope, None, f"unknown agent {entry.inbox!r}"

    async def _process(self, entry: _Entry, report: DrainReport, held: set[str]) -> None:
        now = self.clock()
        scope, agent, refusal = self._route(entry)
        if refusal is not None or scope is None:
            await asyncio.to_thread(self._reject, entry, scope, None, refusal or "no scope", report)
            return
        if scope in held:
            report.waiting += 1
            return
        bucket = self._bucket(scope, now)
        if bucket is not None and not bucket.ready(now):
            held.add(scope)
            self._hold(report, bucket.wait(now))
            return
        key = f"{entry.folder}/{entry.inbox}/{entry.name}"
        retry_at = self._retry_at.get(key)
        if retry_at is not None and now < retry_at:
            self._hold(report, retry_at - now)
            return
        dispatch = await asyncio.to_thread(self._load, entry, scope, agent, report)
        if dispatch is None:
            return
        if self.claim is not None:
            try:
                taken = self.claim(dispatch)
            except Exception:
                log.exception("maildir: cannot claim %s; it stays in new/ and is tried again", key)
                taken = False
            if not taken:
                report.waiting += 1  # another process took it: it delivers, settles and moves it
                return
            if not os.path.lexists(entry.path):  # settled by the process that held it before us
                if self.release is not None:
                    self.release(dispatch)
                return
        try:
            await self._deliver_and_settle(entry, dispatch, scope, agent, key, now, bucket, report)
        finally:
            if self.release is not None:
                self.release(dispatch)

    async def _deliver_and_settle(
        self,
        entry: _Entry,
        dispatch: Dispatch,
        scope: str,
        agent: str | None,
        key: str,
        now: float,
        bucket: TokenBucket | None,
        report: DrainReport,
    ) -> None:
        if bucket is not None:
            bucket.take(now)
        try:
            result = await self.deliver(dispatch)
            reply, message_id, answered_by = _unpack(result)
            reply_path = None
            if dispatch.wants_reply and reply and reply.strip():
                reply_path = await asyncio.to_thread(self._write_reply, entry, dispatch, reply, answered_by)
        except RetryLater as exc:
            log.info("maildir: %s stays in new/ (%s); trying again in %.0f s", key, exc, self.retry_after)
            self._retry_at[key] = now + self.retry_after
            self._hold(report, self.retry_after)
            return
        except Exception:
            log.exception("maildir: delivering %s failed; it stays in new/ and is retried", key)
            self._retry_at[key] = now + self.retry_after
            report.failed += 1
            # wake the watcher for the retry (not only at its next tick)
            report.next_in = self.retry_after if report.next_in is None else min(report.next_in, self.retry_after)
            return
        self._retry_at.pop(key, None)
        await asyncio.to_thread(
            self._settle, entry, scope, answered_by or agent, message_id, reply_path.name if reply_path else None
        )
        report.delivered += 1

    def _load(self, entry: _Entry, scope: str, agent: str | None, report: DrainReport) -> Dispatch | None:
        """Read and parse one file (worker thread); None when it was rejected or is gone."""
        earlier = self._delivered_before(entry)
        if earlier is not None:
            if not os.path.lexists(entry.path):
                return None  # another intake on this Maildir delivered it and moved it since our scan
            if _same_file(earlier, entry.path):
                # a move to cur/ was cut short between link() and unlink() (or another intake
                # is in the middle of it): finish it
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                return None
            self._reject(entry, scope, agent, "a file of this name was already delivered in this scope", report)
            return None
        try:
            raw = read_regular(Path(entry.path))
        except Rejected as exc:
            self._reject(entry, scope, agent, exc.reason, report)
            return None
        except FileNotFoundError:
            return None  # moved away meanwhile (another intake); nothing to do
        except OSError as exc:
            self._reject(entry, scope, agent, f"cannot read: {exc.strerror}", report)
            return None
        try:
            meta, body = parse_dispatch_text(raw)
            return build_dispatch(scope, agent, entry.name, meta, body)
        except Rejected as exc:
            self._reject(entry, scope, agent, exc.reason, report)
            return None

    def _settle(
        self, entry: _Entry, scope: str, agent: str | None, message_id: int | None, reply: str | None
    ) -> None:
        """After ``deliver`` returned: the receipt, then new/ -> cur/ (worker thread)."""
        self._write_receipt(
            entry, scope=scope, agent=agent, outcome="drained", message_id=message_id, reply=reply
        )
        try:
            move_no_replace(Path(entry.path), Path(entry.path).parent.parent / "cur", entry.name)
        except FileNotFoundError:
            log.warning("maildir: %s/%s/%s vanished from new/ before the move to cur/", entry.folder, entry.inbox, entry.name)

    def _delivered_before(self, entry: _Entry) -> str | None:
        """The path of a file of the same name in a ``cur/`` of the same scope, if any."""
        scope_dir = self.root / entry.folder
        try:
            with os.scandir(scope_dir) as listing:
                boxes = [box.path for box in listing if box.is_dir(follow_symlinks=False)]
        except FileNotFoundError:
            return None
        for box in boxes:
            path = os.path.join(box, "cur", entry.name)
            if os.path.lexists(path):
                return path
        return None

    def _write_reply(self, entry: _Entry, dispatch: Dispatch, text: str, answered_by: str | None) -> Path | None:
        key = hashlib.sha256(f"{entry.folder}\0{entry.inbox}\0{entry.name}".encode()).hexdigest()[:10]
        subject = dispatch.subject or dispatch.name
        path = dispatch_out(
            self.root,
            dispatch.sender,
            sender=answered_by or dispatch.inbox,
            subject=subject if subject.lower().startswith("re:") else f"Re: {subject}",
            body=text,
            priority=dispatch.priority,
            thread=dispatch.thread or dispatch.name,
            reply_to=dispatch.name,
            kind="reply",
            scope=dispatch.scope,
            key=key,
        )
        if path is None:
            log.info("maildir: the reply to %s was already in outbox/%s", dispatch.name, dispatch.sender)
        return path

    # -- dlq and receipts -----------------------------------------------------------
    def _reject(
        self, entry: _Entry, scope: str | None, agent: str | None, reason: str, report: DrainReport
    ) -> None:
        """Move the entry to dlq/ with a ``.reason`` file beside it and write a dlq receipt."""
        target_dir = self.root / "dlq" / entry.folder / entry.inbox
        base = stored_name(entry.name)
        name = base
        attempt = 0
        while os.path.lexists(target_dir / name) or os.path.lexists(target_dir / f"{name}.reason"):
            attempt += 1
            name = f"{base}.{attempt}"
        note = (
            f"{reason}\n"
            f"file: {entry.folder}/{entry.inbox}/new/{entry.name}\n"
            f"rejected: {iso(self.clock())}\n"
        )
        # The reason is written first under a hidden name, and named as the entry only once the
        # file is there: a file another intake settled meanwhile leaves no reason behind (it
        # would count as a dlq entry), and a crash in between leaves the file, never a lone reason.
        pending = target_dir / f".{name[:100]}.{os.getpid()}.reason-pending"
        try:
            write_text_atomic(pending, note)
            try:
                final = move_no_replace(Path(entry.path), target_dir, name)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(pending)
                raise
            os.replace(pending, target_dir / f"{final.name}.reason")
        except FileNotFoundError:
            return  # moved away meanwhile (another intake settled it)
        except OSError:
            log.exception("maildir: cannot move %s/%s/%s to dlq/", entry.folder, entry.inbox, entry.name)
            return
        log.warning("maildir: %s/%s/%s -> dlq/: %s", entry.folder, entry.inbox, entry.name, reason)
        self._write_receipt(entry, scope=scope, agent=agent, outcome="dlq", reason=reason, dlq=final.name)
        report.rejected += 1

    def _write_receipt(
        self,
        entry: _Entry,
        *,
        scope: str | None,
        agent: str | None,
        outcome: str,
        reason: str | None = None,
        message_id: int | None = None,
        reply: str | None = None,
        dlq: str | None = None,
    ) -> None:
        receipt = {
            "name": entry.name,
            "scope": scope,
            "folder": entry.folder,
            "inbox": entry.inbox,
            "agent": agent,
            "outcome": outcome,
            "reason": reason,
            "message_id": message_id,
            "reply": reply,
            "dlq": dlq,
            "time": iso(self.clock()),
        }
        path = self.root / "receipts" / entry.folder / entry.inbox / f"{stored_name(entry.name)}.json"
        try:
            write_json_atomic(path, receipt)
        except OSError:
            log.exception("maildir: cannot write the receipt for %s", entry.name)

    # -- staleness ------------------------------------------------------------------
    def check_stale(self) -> list[InboxBacklog]:
        """Inboxes whose oldest file waits longer than ``stale_after``; warns once per inbox.

        An inbox is warned about again only after it stopped being stale.
        """
        stale = [
            row
            for row in backlog(self.root, now=self.clock(), outbox=False)
            if row.oldest_age is not None and row.oldest_age > self.stale_after
        ]
        for row in stale:
            if row.box not in self._warned:
                log.warning(
                    "maildir: %d file(s) waiting in %s/new, the oldest for %.0f s (stale after %.0f s)",
                    row.waiting,
                    row.box,
                    row.oldest_age,
                    self.stale_after,
                )
        self._warned = {row.box for row in stale}
        removed = remove_abandoned(self.root, now=self.clock())
        if removed:
            log.warning("maildir: removed %d file(s) left in tmp/ for over 36 hours by writers that died mid-write: %s",
                        len(removed), ", ".join(removed[:5]))
        return stale


def _same_file(a: str, b: str) -> bool:
    try:
        first, second = os.lstat(a), os.lstat(b)
    except FileNotFoundError:
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _unpack(result: object) -> tuple[str | None, int | None, str | None]:
    if result is None:
        return None, None, None
    if isinstance(result, str):
        return result, None, None
    if isinstance(result, Delivered):
        agent = result.agent
        if agent is not None:
            try:
                check_name(agent, "agent")
            except ValueError:
                agent = None
        return result.reply, result.message_id, agent
    raise TypeError(f"deliver must return str, Delivered or None, not {type(result).__name__}")

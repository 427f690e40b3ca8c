"""What is waiting: per inbox, how many files and how old the oldest is; the dlq count;
and what writers left behind in ``tmp/`` (a write takes milliseconds, so a file there for
an hour was left by a writer that died mid-write; Maildir's rule lets a reader delete
one untouched for 36 hours, which the intake does: :func:`remove_abandoned`)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from .layout import RESERVED, scope_from_folder

__all__ = ["ABANDONED_AFTER", "TMP_EXPIRY", "InboxBacklog", "backlog", "dlq_count", "inboxes", "remove_abandoned"]

ABANDONED_AFTER = 3600.0  # seconds in tmp/ after which a file counts as abandoned
TMP_EXPIRY = 36 * 3600.0  # Maildir's rule: a tmp/ file untouched this long may be deleted


@dataclass(frozen=True, slots=True)
class InboxBacklog:
    """One inbox (``direction="in"``) or team outbox (``"out"``) and what waits in its ``new/``."""

    box: str  # the folder under the root: "user-42/hub", "outbox/cron"
    direction: str  # "in" (to the hub) or "out" (to an outside team)
    scope: str | None  # the scope of an inbox; None for an outbox or a folder that is no scope
    inbox: str  # the agent, "hub", or the team
    waiting: int
    oldest_age: float | None  # seconds since the oldest waiting file arrived; None when empty
    abandoned: int = 0  # files in tmp/ untouched for ABANDONED_AFTER: writers that died mid-write

    def as_dict(self) -> dict:
        return asdict(self)


def subdirs(path: str) -> Iterator[os.DirEntry]:
    try:
        with os.scandir(path) as entries:
            yield from sorted(
                (entry for entry in entries if entry.is_dir(follow_symlinks=False)), key=lambda e: e.name
            )
    except (FileNotFoundError, NotADirectoryError):
        return


def inboxes(root: Path) -> Iterator[tuple[str, str, str]]:
    """``(scope folder, inbox, path of new/)`` for every inbox under ``root`` (scope or not)."""
    for top in subdirs(os.fspath(root)):
        if top.name in RESERVED or top.name.startswith("."):
            continue
        for box in subdirs(top.path):
            new = os.path.join(box.path, "new")
            if os.path.isdir(new) and not os.path.islink(new):
                yield top.name, box.name, new


def _count(new: str, now: float) -> tuple[int, float | None]:
    waiting, oldest = 0, None
    try:
        with os.scandir(new) as entries:
            for entry in entries:
                try:
                    mtime = entry.stat(follow_symlinks=False).st_mtime
                except FileNotFoundError:
                    continue
                waiting += 1
                oldest = mtime if oldest is None else min(oldest, mtime)
    except FileNotFoundError:
        pass
    return waiting, (None if oldest is None else max(0.0, now - oldest))


def backlog(root: Path, *, now: float | None = None, outbox: bool = True) -> list[InboxBacklog]:
    """Every inbox (and team outbox unless ``outbox=False``) with its waiting count and oldest age."""
    now = time.time() if now is None else now
    rows: list[InboxBacklog] = []
    for folder, inbox, new in inboxes(root):
        try:
            scope: str | None = scope_from_folder(folder)
        except ValueError:
            scope = None
        waiting, age = _count(new, now)
        left = len(_tmp_files(os.path.dirname(new), now, ABANDONED_AFTER))
        rows.append(InboxBacklog(f"{folder}/{inbox}", "in", scope, inbox, waiting, age, left))
    if outbox:
        for team in subdirs(os.path.join(root, "outbox")):
            waiting, age = _count(os.path.join(team.path, "new"), now)
            left = len(_tmp_files(team.path, now, ABANDONED_AFTER))
            rows.append(InboxBacklog(f"outbox/{team.name}", "out", None, team.name, waiting, age, left))
    return rows


def _tmp_files(box: str, now: float, older_than: float) -> list[str]:
    """The paths of the files in ``box``'s tmp/ untouched (mtime) for more than ``older_than`` seconds."""
    found: list[str] = []
    try:
        with os.scandir(os.path.join(box, "tmp")) as entries:
            for entry in entries:
                try:
                    if entry.is_file(follow_symlinks=False) and now - entry.stat(follow_symlinks=False).st_mtime > older_than:
                        found.append(entry.path)
                except FileNotFoundError:
                    continue
    except (FileNotFoundError, NotADirectoryError):
        pass
    return found


def remove_abandoned(root: Path, *, now: float | None = None, older_than: float = TMP_EXPIRY) -> list[str]:
    """Delete the files left in the inboxes' and outboxes' tmp/ for more than ``older_than``
    seconds (Maildir's 36 hours by default); the paths removed."""
    now = time.time() if now is None else now
    boxes = [os.path.dirname(new) for _, _, new in inboxes(root)]
    boxes += [team.path for team in subdirs(os.path.join(root, "outbox"))]
    removed: list[str] = []
    for box in boxes:
        for path in _tmp_files(box, now, older_than):
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            removed.append(path)
    return removed


def dlq_count(root: Path) -> int:
    """How many rejected entries are in ``dlq/<scope folder>/<inbox>/`` (one ``.reason`` file each)."""
    count = 0
    for top in subdirs(os.path.join(root, "dlq")):
        for box in subdirs(top.path):
            with os.scandir(box.path) as entries:
                count += sum(1 for entry in entries if entry.name.endswith(".reason"))
    return count

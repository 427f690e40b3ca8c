"""What is waiting: per inbox, how many files and how old the oldest is; the dlq count."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from .layout import RESERVED, scope_from_folder

__all__ = ["InboxBacklog", "backlog", "dlq_count", "inboxes"]


@dataclass(frozen=True, slots=True)
class InboxBacklog:
    """One inbox (``direction="in"``) or team outbox (``"out"``) and what waits in its ``new/``."""

    box: str  # the folder under the root: "user-42/hub", "outbox/cron"
    direction: str  # "in" (to the hub) or "out" (to an outside team)
    scope: str | None  # the scope of an inbox; None for an outbox or a folder that is no scope
    inbox: str  # the agent, "hub", or the team
    waiting: int
    oldest_age: float | None  # seconds since the oldest waiting file arrived; None when empty

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
        rows.append(InboxBacklog(f"{folder}/{inbox}", "in", scope, inbox, waiting, age))
    if outbox:
        for team in subdirs(os.path.join(root, "outbox")):
            waiting, age = _count(os.path.join(team.path, "new"), now)
            rows.append(InboxBacklog(f"outbox/{team.name}", "out", None, team.name, waiting, age))
    return rows


def dlq_count(root: Path) -> int:
    """How many rejected entries are in ``dlq/<scope folder>/<inbox>/`` (one ``.reason`` file each)."""
    count = 0
    for top in subdirs(os.path.join(root, "dlq")):
        for box in subdirs(top.path):
            with os.scandir(box.path) as entries:
                count += sum(1 for entry in entries if entry.name.endswith(".reason"))
    return count

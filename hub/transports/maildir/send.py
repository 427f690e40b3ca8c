"""Writing dispatches: into a scope's inbox (for the hub) and into a team's outbox (out)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from .files import publish, render
from .layout import (
    MAX_FILE_BYTES,
    PRIORITIES,
    check_name,
    dispatch_name,
    inbox_dir,
    iso,
    outbox_dir,
    scope_folder,
)

__all__ = ["dispatch_out", "name_taken_in_scope", "send_dispatch"]


def _check_priority(priority: str) -> str:
    if priority not in PRIORITIES:
        raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, not {priority!r}")
    return priority


def _front_matter(
    sender: str,
    to: str,
    scope: str | None,
    priority: str,
    created: float,
    subject: str,
    thread: str | None,
    reply_to: str | None,
    kind: str | None,
) -> dict[str, Any]:
    """The front matter every dispatch carries, in and out, in this order."""
    return {
        "from": sender,
        "to": to,
        "scope": scope,
        "priority": priority,
        "created": iso(created),
        "subject": " ".join(subject.split()),
        "thread": thread,
        "reply_to": reply_to,
        "kind": kind,
    }


def _encode(meta: dict, body: str) -> bytes:
    if "\x00" in body:
        raise ValueError("the body contains NUL bytes")
    data = render(meta, body).encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"the dispatch is over 1 MiB ({len(data)} bytes)")
    return data


def name_taken_in_scope(root: Path, scope: str, name: str) -> bool:
    """Whether ``name`` is in the ``new/`` or ``cur/`` of any inbox of ``scope``.

    The hub keys a delivered file by its name within the scope (``maildir:<name>``), so a
    name is used once per scope, not just once per inbox.
    """
    folder = Path(root) / scope_folder(scope)
    try:
        inboxes = [entry for entry in os.scandir(folder) if entry.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return False
    return any(
        os.path.lexists(os.path.join(entry.path, sub, name)) for entry in inboxes for sub in ("new", "cur")
    )


def send_dispatch(
    root: Path,
    scope: str,
    to: str,
    *,
    sender: str,
    body: str,
    subject: str = "",
    priority: str = "normal",
    thread: str | None = None,
    reply_to: str | None = None,
    kind: str | None = None,
    reply: bool = False,
    created: float | None = None,
    slug: str | None = None,
    if_exists: str = "suffix",
) -> Path | None:
    """Deliver a dispatch into ``<root>/<scope>/<to>/new/`` safely; returns its path.

    ``to`` is an agent name or ``hub`` (the hub routes it). ``reply=True`` asks for the
    answer back in ``outbox/<sender>/``. ``if_exists="skip"`` makes the call idempotent
    for a fixed name (``created`` + ``slug``): None when that name is already used.
    """
    check_name(to, "to")
    check_name(sender, "from")
    _check_priority(priority)
    created = time.time() if created is None else created
    meta = _front_matter(sender, to, scope, priority, created, subject, thread, reply_to, kind)
    meta["reply"] = bool(reply)
    data = _encode(meta, body)
    name = dispatch_name(created, priority, sender, slug or subject)
    return publish(
        inbox_dir(root, scope, to),
        name,
        data,
        taken=lambda candidate: name_taken_in_scope(root, scope, candidate),
        if_exists=if_exists,
    )


def _outbox_taken(box: Path, name: str) -> bool:
    return os.path.lexists(box / "cur" / name)


def dispatch_out(
    root: Path,
    team: str,
    *,
    sender: str,
    subject: str,
    body: str,
    priority: str = "normal",
    thread: str | None = None,
    reply_to: str | None = None,
    kind: str | None = None,
    scope: str | None = None,
    key: str | None = None,
) -> Path | None:
    """Write a dispatch for an outside team into ``outbox/<team>/new/`` safely; returns its path.

    ``scope`` (optional) records which conversation it came from, so ``erase_scope`` can
    find it. ``key`` makes the write idempotent: the file is named with ``.<key>.md`` and
    nothing is written (None) when a file with that key is already in the outbox.
    """
    check_name(sender, "from")
    _check_priority(priority)
    box = outbox_dir(root, team)
    if key is not None:
        check_name(key, "key")
        for sub in ("new", "cur"):
            try:
                if any(entry.endswith(f".{key}.md") for entry in os.listdir(box / sub)):
                    return None
            except FileNotFoundError:
                pass
    created = time.time()
    data = _encode(_front_matter(sender, team, scope, priority, created, subject, thread, reply_to, kind), body)
    name = dispatch_name(created, priority, sender, subject, suffix=key)
    return publish(box, name, data, taken=lambda candidate: _outbox_taken(box, candidate))


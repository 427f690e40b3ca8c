"""Outside teams drain their outbox: list what is new, read a file, ack it (new/ -> cur/)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .files import Rejected, move_no_replace, parse_dispatch_text, read_regular, scalar
from .layout import outbox_dir

__all__ = ["OutboxItem", "ack_outbox", "list_outbox", "read_outbox"]


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """One file of a team's outbox, parsed."""

    name: str
    state: str  # "new" (not acked yet) or "cur" (acked)
    sender: str | None
    subject: str | None
    priority: str | None
    thread: str | None
    reply_to: str | None
    kind: str | None
    scope: str | None
    created: str | None
    body: str
    text: str  # the whole file as written

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _plain_name(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\x00" in name or os.sep in name:
        raise ValueError(f"not a file name: {name!r}")
    return name


def list_outbox(root: Path, team: str, *, include_acked: bool = False) -> list[tuple[str, str]]:
    """``(name, state)`` of the files in ``outbox/<team>/new`` (and ``cur`` if asked), oldest name first."""
    box = outbox_dir(root, team)
    rows = []
    for state in ("new", "cur") if include_acked else ("new",):
        try:
            names = os.listdir(box / state)
        except FileNotFoundError:
            continue
        rows.extend((name, state) for name in names)
    return sorted(rows)


def read_outbox(root: Path, team: str, name: str) -> OutboxItem:
    """One file of ``outbox/<team>`` (new or acked); FileNotFoundError if there is none."""
    box = outbox_dir(root, team)
    _plain_name(name)
    for state in ("new", "cur"):
        path = box / state / name
        if os.path.lexists(path):
            break
    else:
        raise FileNotFoundError(f"no {name!r} in outbox/{team}")
    try:
        raw = read_regular(path)
    except Rejected as exc:
        raise ValueError(f"{name}: {exc.reason}") from None
    text = raw.decode("utf-8", "replace")
    try:
        meta, body = parse_dispatch_text(raw)
    except Rejected:
        meta, body = {}, text
    fields: dict[str, str | None] = {}
    for key in ("from", "subject", "priority", "thread", "reply_to", "kind", "scope", "created"):
        try:
            fields[key] = scalar(meta, key)
        except Rejected:
            fields[key] = None
    return OutboxItem(
        name=name,
        state=state,
        sender=fields["from"],
        subject=fields["subject"],
        priority=fields["priority"],
        thread=fields["thread"],
        reply_to=fields["reply_to"],
        kind=fields["kind"],
        scope=fields["scope"],
        created=fields["created"],
        body=body,
        text=text,
    )


def ack_outbox(root: Path, team: str, name: str) -> tuple[Path, bool]:
    """Move ``outbox/<team>/new/<name>`` to ``cur/``; returns ``(path in cur, moved now)``.

    Acking a file that is already in ``cur/`` is not an error (``moved now`` is False).
    """
    box = outbox_dir(root, team)
    _plain_name(name)
    source = box / "new" / name
    if not os.path.lexists(source):
        if os.path.lexists(box / "cur" / name):
            return box / "cur" / name, False
        raise FileNotFoundError(f"no {name!r} in outbox/{team}")
    return move_no_replace(source, box / "cur", name), True

"""Talk channels: threads where agents leave unstructured notes for each other (seed 000).

Which channels exist and who belongs to them is declared in code (``AgentSpec.channels``);
this module stores what is said in them, per scope: messages (threaded with
``reply_to``, pinned or not), the agents' reactions (agree, disagree, important), and
one cursor per agent, the id of the newest channel message it was shown.

Rules

- A channel keeps at most :data:`CHANNEL_LIMIT` messages: after each post the oldest
  unpinned ones go. Pinned messages survive pruning; a channel holds at most
  :data:`MAX_PINS` of them, so pins can never push out what was just said.
- Message ids are cursors (``AUTOINCREMENT``: strictly increasing, never reused), read
  like event ids: show an agent :func:`unseen_channel_messages`, record the call, then
  :func:`advance_channel_cursor` to the newest id shown. At-least-once until commit.
- Every read and write takes the scope: nothing crosses scopes.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._model import validate_scope
from ._schema import ensure_scope, lock_scope
from ._store import Store
from .errors import InvalidRecord

__all__ = [
    "CHANNEL_LIMIT",
    "CHANNEL_REACTIONS",
    "MAX_CHANNEL_TEXT",
    "MAX_PINS",
    "ChannelMessage",
    "advance_channel_cursor",
    "channel_cursor_of",
    "channel_message",
    "channel_stats",
    "count_unseen_channel_messages",
    "pin_channel_message",
    "pinned_channel_messages",
    "post_to_channel",
    "react_to_channel_message",
    "read_channel",
    "unseen_channel_messages",
    "validate_channel_name",
]

CHANNEL_LIMIT = 100  # messages kept per channel and scope (pins included, unless there are more pins)
MAX_PINS = 20
MAX_CHANNEL_TEXT = 2000
CHANNEL_REACTIONS = ("agree", "disagree", "important")
_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_COLUMNS = "id, scope, channel, agent, text, ts, reply_to, pinned"


@dataclass(frozen=True, slots=True)
class ChannelMessage:
    """One note in a channel, with its reactions counted by kind."""

    id: int
    scope: str
    channel: str
    agent: str
    text: str
    ts: float
    reply_to: int | None = None
    pinned: bool = False
    reactions: dict[str, int] = field(default_factory=dict)


def validate_channel_name(name: str) -> str:
    """Return ``name`` if it is a channel name (lower-case word, 1-32 chars), else raise."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidRecord(f"channel name {name!r}: use 1-32 lower-case letters, digits, - or _ starting with a letter")
    return name


def _check_agent(name: str) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > 64:
        raise InvalidRecord(f"a channel message needs an agent name, not {name!r}")
    return name


def _rows(store: Store, scope: str, rows: Sequence[Sequence[Any]]) -> list[ChannelMessage]:
    ids = [row[0] for row in rows]
    counts: dict[int, dict[str, int]] = {}
    if ids:
        marks = ",".join("?" * len(ids))
        for message_id, reaction, count in store.query(
            f"SELECT message_id, reaction, count(*) FROM channel_reactions WHERE scope = ? AND message_id IN ({marks})"
            " GROUP BY message_id, reaction",
            (scope, *ids),
        ):
            counts.setdefault(message_id, {})[reaction] = count
    return [
        ChannelMessage(
            id=row[0],
            scope=row[1],
            channel=row[2],
            agent=row[3],
            text=row[4],
            ts=row[5],
            reply_to=row[6],
            pinned=bool(row[7]),
            reactions={name: counts[row[0]][name] for name in CHANNEL_REACTIONS if name in counts.get(row[0], {})},
        )
        for row in rows
    ]


def post_to_channel(
    store: Store,
    scope: str,
    channel: str,
    agent: str,
    text: str,
    *,
    reply_to: int | None = None,
    now: float | None = None,
) -> ChannelMessage:
    """Post a note (a reply in a thread when ``reply_to`` names a message of that channel), then prune."""
    validate_scope(scope)
    validate_channel_name(channel)
    _check_agent(agent)
    body = " ".join(text.split()) if isinstance(text, str) else ""
    if not body:
        raise InvalidRecord("a channel message needs some text")
    if len(body) > MAX_CHANNEL_TEXT:
        body = body[: MAX_CHANNEL_TEXT - 1].rstrip() + "…"
    ts = time.time() if now is None else float(now)
    with store.transaction() as conn:
        lock_scope(conn, scope)  # the pruning counts, then deletes
        if reply_to is not None and not conn.execute(
            "SELECT 1 FROM channel_messages WHERE scope = ? AND channel = ? AND id = ?", (scope, channel, reply_to)
        ).fetchone():
            raise InvalidRecord(f"no message #{reply_to} in channel {channel} to reply to")
        ensure_scope(conn, scope, ts)
        new_id = conn.execute(
            "INSERT INTO channel_messages(scope, channel, agent, text, ts, reply_to) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (scope, channel, agent, body, ts, reply_to),
        ).fetchone()[0]
        _prune(conn, scope, channel)
    return ChannelMessage(new_id, scope, channel, agent, body, ts, reply_to)


def _prune(conn: Any, scope: str, channel: str) -> int:
    """Keep the pins and the newest unpinned messages, CHANNEL_LIMIT in all."""
    pinned = conn.execute(
        "SELECT count(*) FROM channel_messages WHERE scope = ? AND channel = ? AND pinned = 1", (scope, channel)
    ).fetchone()[0]
    keep = max(CHANNEL_LIMIT - pinned, 1)
    removed = conn.execute(
        "DELETE FROM channel_messages WHERE scope = ? AND channel = ? AND pinned = 0 AND id NOT IN"
        " (SELECT id FROM channel_messages WHERE scope = ? AND channel = ? AND pinned = 0 ORDER BY id DESC LIMIT ?)",
        (scope, channel, scope, channel, keep),
    ).rowcount
    if removed:
        conn.execute(
            "DELETE FROM channel_reactions WHERE scope = ? AND message_id NOT IN"
            " (SELECT id FROM channel_messages WHERE scope = ?)",
            (scope, scope),
        )
    return removed


def channel_message(store: Store, scope: str, message_id: int) -> ChannelMessage | None:
    """One channel message of the scope by id (another scope's id is as if it did not exist)."""
    rows = store.query(f"SELECT {_COLUMNS} FROM channel_messages WHERE scope = ? AND id = ?", (scope, message_id))
    return _rows(store, scope, rows)[0] if rows else None


def react_to_channel_message(
    store: Store, scope: str, message_id: int, agent: str, reaction: str, *, now: float | None = None
) -> ChannelMessage | None:
    """Add ``agent``'s reaction (agree, disagree, important) once; None when there is no such message."""
    _check_agent(agent)
    if reaction not in CHANNEL_REACTIONS:
        raise InvalidRecord(f"reaction {reaction!r}: use {', '.join(CHANNEL_REACTIONS)}")
    ts = time.time() if now is None else float(now)
    with store.transaction() as conn:
        if not conn.execute("SELECT 1 FROM channel_messages WHERE scope = ? AND id = ?", (scope, message_id)).fetchone():
            return None
        conn.execute(
            "INSERT INTO channel_reactions(scope, message_id, agent, reaction, ts) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (scope, message_id, agent, reaction, ts),
        )
    return channel_message(store, scope, message_id)


def pin_channel_message(store: Store, scope: str, message_id: int, *, pinned: bool = True) -> ChannelMessage | None:
    """Pin (or unpin) a message; None when there is no such message. Refuses a pin past MAX_PINS."""
    with store.transaction() as conn:
        lock_scope(conn, scope)  # the pin count and the pin as one step
        row = conn.execute(
            "SELECT channel, pinned FROM channel_messages WHERE scope = ? AND id = ?", (scope, message_id)
        ).fetchone()
        if row is None:
            return None
        channel, was = row
        if pinned and not was:
            count = conn.execute(
                "SELECT count(*) FROM channel_messages WHERE scope = ? AND channel = ? AND pinned = 1", (scope, channel)
            ).fetchone()[0]
            if count >= MAX_PINS:
                raise InvalidRecord(f"channel {channel} already has {MAX_PINS} pinned messages; unpin one first")
        conn.execute("UPDATE channel_messages SET pinned = ? WHERE scope = ? AND id = ?", (int(pinned), scope, message_id))
        if not pinned:
            _prune(conn, scope, channel)  # an unpinned old message now counts against the limit
    return channel_message(store, scope, message_id)


def read_channel(
    store: Store, scope: str, channel: str, *, limit: int = 20, thread: int | None = None
) -> list[ChannelMessage]:
    """A channel's pinned messages, then its newest ``limit`` others, each group oldest first.

    With ``thread``: that message and the replies to it, oldest first.
    """
    if thread is not None:
        rows = store.query(
            f"SELECT {_COLUMNS} FROM channel_messages WHERE scope = ? AND channel = ? AND (id = ? OR reply_to = ?)"
            " ORDER BY id",
            (scope, channel, thread, thread),
        )
        return _rows(store, scope, rows)
    pinned = store.query(
        f"SELECT {_COLUMNS} FROM channel_messages WHERE scope = ? AND channel = ? AND pinned = 1 ORDER BY id",
        (scope, channel),
    )
    recent = store.query(
        f"SELECT {_COLUMNS} FROM channel_messages WHERE scope = ? AND channel = ? AND pinned = 0 ORDER BY id DESC LIMIT ?",
        (scope, channel, max(0, int(limit))),
    )
    return _rows(store, scope, [*pinned, *reversed(recent)])


def channel_stats(store: Store, scope: str) -> dict[str, dict[str, Any]]:
    """Per channel with messages in the scope: ``messages``, ``pinned``, ``last_ts``."""
    return {
        name: {"messages": count, "pinned": pins, "last_ts": last}
        for name, count, pins, last in store.query(
            "SELECT channel, count(*), sum(pinned), max(ts) FROM channel_messages WHERE scope = ? GROUP BY channel",
            (scope,),
        )
    }


def channel_cursor_of(store: Store, scope: str, agent: str) -> int:
    """The id of the newest channel message the agent was shown in the scope (0: none yet)."""
    rows = store.query("SELECT message_id FROM channel_cursors WHERE scope = ? AND agent = ?", (scope, agent))
    return int(rows[0][0]) if rows else 0


def _unseen_where(store: Store, scope: str, agent: str, names: Sequence[str]) -> tuple[str, list[Any]]:
    marks = ",".join("?" * len(names))
    return (
        f"scope = ? AND id > ? AND channel IN ({marks}) AND agent != ?",
        [scope, channel_cursor_of(store, scope, agent), *names, agent],
    )


def unseen_channel_messages(
    store: Store, scope: str, agent: str, channels: Iterable[str], *, limit: int = 10, newest: bool = False
) -> list[ChannelMessage]:
    """Messages past the agent's channel cursor in ``channels``, written by others, oldest first.

    ``newest``: the newest ``limit`` of them (what an awareness block shows first), else
    the oldest ``limit``.
    """
    names = sorted(set(channels))
    if not names:
        return []
    where, params = _unseen_where(store, scope, agent, names)
    rows = store.query(
        f"SELECT {_COLUMNS} FROM channel_messages WHERE {where} ORDER BY id {'DESC' if newest else 'ASC'} LIMIT ?",
        (*params, int(limit)),
    )
    return channel_messages_of_rows(store, scope, rows)


def unseen_channel_query(
    scope: str, agent: str, channels: Iterable[str], *, limit: int = 10, newest: bool = False
) -> tuple[str, list[Any]]:
    """The read of :func:`unseen_channel_messages` (``channels`` not empty), the agent's channel
    cursor read inside it, for a batch of reads; :func:`channel_messages_of_rows` makes its rows messages."""
    names = sorted(set(channels))
    marks = ",".join("?" * len(names))
    return (
        f"SELECT {_COLUMNS} FROM channel_messages WHERE scope = ?"
        " AND id > coalesce((SELECT message_id FROM channel_cursors WHERE scope = ? AND agent = ?), 0)"
        f" AND channel IN ({marks}) AND agent != ? ORDER BY id {'DESC' if newest else 'ASC'} LIMIT ?",
        [scope, scope, agent, *names, agent, int(limit)],
    )


def channel_messages_of_rows(store: Store, scope: str, rows: Sequence[Sequence[Any]], *, in_id_order: bool = True) -> list[ChannelMessage]:
    """Channel messages of rows read by :func:`unseen_channel_query` (oldest first) or
    :func:`pinned_channel_query` (``in_id_order=False``: as read), with their reactions."""
    return _rows(store, scope, sorted(rows, key=lambda row: row[0]) if in_id_order else rows)


def count_unseen_channel_messages(
    store: Store, scope: str, agent: str, channels: Iterable[str], *, below: int, cap: int = 10_000
) -> int:
    """How many unseen messages of ``channels`` (see :func:`unseen_channel_messages`) have an id below ``below``."""
    names = sorted(set(channels))
    if not names:
        return 0
    where, params = _unseen_where(store, scope, agent, names)
    return store.query(
        f"SELECT count(*) FROM (SELECT 1 FROM channel_messages WHERE {where} AND id < ? LIMIT ?) AS bounded",
        (*params, int(below), int(cap)),
    )[0][0]


def pinned_channel_messages(
    store: Store, scope: str, channels: Iterable[str], *, not_by: str | None = None, limit: int = 20
) -> list[ChannelMessage]:
    """The pinned messages of ``channels`` (not those ``not_by`` wrote), newest first: they stay
    visible in every awareness block while pinned, read or not."""
    names = sorted(set(channels))
    if not names:
        return []
    return _rows(store, scope, store.query(*pinned_channel_query(scope, names, not_by=not_by, limit=limit)))


def pinned_channel_query(
    scope: str, channels: Iterable[str], *, not_by: str | None = None, limit: int = 20
) -> tuple[str, list[Any]]:
    """The read of :func:`pinned_channel_messages` (``channels`` not empty), for a batch of reads."""
    names = sorted(set(channels))
    marks = ",".join("?" * len(names))
    author, extra = (" AND agent != ?", [not_by]) if not_by is not None else ("", [])
    return (
        f"SELECT {_COLUMNS} FROM channel_messages WHERE scope = ? AND channel IN ({marks}) AND pinned = 1{author}"
        " ORDER BY id DESC LIMIT ?",
        [scope, *names, *extra, int(limit)],
    )


def advance_channel_cursor(store: Store, scope: str, agent: str, message_id: int) -> int:
    """Move the agent's channel cursor forward to ``message_id`` (never back); returns it.

    Call it only after the agent call that was shown those messages is recorded. The
    cursor never passes the scope's newest channel message.
    """
    validate_scope(scope)
    _check_agent(agent)
    if isinstance(message_id, bool) or not isinstance(message_id, int) or message_id < 0:
        raise InvalidRecord(f"a channel cursor is a non-negative message id, not {message_id!r}")
    with store.transaction() as conn:
        newest = conn.execute("SELECT coalesce(max(id), 0) FROM channel_messages WHERE scope = ?", (scope,)).fetchone()[0]
        ensure_scope(conn, scope, time.time())
        conn.execute(
            "INSERT INTO channel_cursors(scope, agent, message_id) VALUES (?, ?, ?)"
            " ON CONFLICT(scope, agent) DO UPDATE SET message_id = "
            + store.dialect.greatest("channel_cursors.message_id", "excluded.message_id"),
            (scope, agent, min(message_id, newest)),
        )
        return int(
            conn.execute("SELECT message_id FROM channel_cursors WHERE scope = ? AND agent = ?", (scope, agent)).fetchone()[0]
        )

"""What a chat and a deployment keep beside the conversation.

* per chat (a scope): its settings, changed from the chat with ``/settings`` (time zone,
  language, which agents answer; in a private chat with topics, the topic of each agent);
* per deployment: secrets every worker must share (the webhook's secret token, made once
  by whichever worker starts first), invite codes for a closed bot and the people who
  paired with one;
* updates the transport could not read, kept with the reason for an operator (scoped
  when the chat could be told, so that erasing the chat erases them too);
* a scope's spending since a moment (tokens and cost), for daily budgets.

Every function runs the same SQL on every backend.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._model import validate_scope
from ._store import Store
from .errors import InvalidRecord

__all__ = [
    "ChatSettings",
    "Invite",
    "RejectedUpdate",
    "Spending",
    "chat_settings",
    "create_invite",
    "deployment_secret",
    "invites",
    "is_paired",
    "record_rejected_update",
    "redeem_invite",
    "rejected_updates",
    "revoke_invite",
    "set_agent_topic",
    "spending_since",
    "update_chat_settings",
]

REJECTED_BODY_CHARS = 20_000  # what is kept of an unreadable update: enough to see why, never a flood

_UNSET: Any = object()  # "leave this setting as it is" (None means "back to the default")


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """A chat's own settings; None means "the deployment's default" (``HUB_TIMEZONE``, every agent...)."""

    scope: str
    timezone: str | None = None
    language: str | None = None
    agents: tuple[str, ...] | None = None  # the agents that answer here; None: all of them
    topics: dict[str, int] = field(default_factory=dict)  # agent -> forum topic (message_thread_id)
    updated: float | None = None


def chat_settings(store: Store, scope: str) -> ChatSettings:
    """The chat's settings (defaults when it never changed any)."""
    return chat_settings_of_rows(scope, store.query(*chat_settings_query(scope)))


def chat_settings_query(scope: str) -> tuple[str, tuple[Any, ...]]:
    """The read of :func:`chat_settings`, for a batch of reads; :func:`chat_settings_of_rows` after."""
    validate_scope(scope)
    return "SELECT timezone, language, agents, topics, updated FROM chat_settings WHERE scope = ?", (scope,)


def chat_settings_of_rows(scope: str, rows: Sequence[Sequence[Any]]) -> ChatSettings:
    """The chat's settings from the rows of :func:`chat_settings_query`."""
    if not rows:
        return ChatSettings(scope)
    timezone, language, agents, topics, updated = rows[0]
    return ChatSettings(
        scope,
        timezone=timezone,
        language=language,
        agents=tuple(json.loads(agents)) if agents is not None else None,
        topics={str(k): int(v) for k, v in json.loads(topics or "{}").items()},
        updated=updated,
    )


def update_chat_settings(
    store: Store,
    scope: str,
    *,
    timezone: str | None = _UNSET,
    language: str | None = _UNSET,
    agents: Sequence[str] | None = _UNSET,
    now: float,
) -> ChatSettings:
    """Change some of the chat's settings (``None``: back to the default); returns them all."""
    validate_scope(scope)
    changes: dict[str, Any] = {}
    if timezone is not _UNSET:
        changes["timezone"] = timezone or None
    if language is not _UNSET:
        changes["language"] = language or None
    if agents is not _UNSET:
        if agents is not None and not agents:
            raise InvalidRecord("a chat needs at least one agent (None means all of them)")
        changes["agents"] = json.dumps(list(dict.fromkeys(agents))) if agents is not None else None
    if changes:
        columns = ", ".join(changes)
        marks = ", ".join("?" * len(changes))
        updates = ", ".join(f"{name} = excluded.{name}" for name in changes)
        with store.transaction() as conn:
            conn.execute(
                f"INSERT INTO chat_settings(scope, {columns}, updated) VALUES (?, {marks}, ?)"
                f" ON CONFLICT(scope) DO UPDATE SET {updates}, updated = excluded.updated",
                (scope, *changes.values(), float(now)),
            )
    return chat_settings(store, scope)


def set_agent_topic(store: Store, scope: str, agent: str, thread_id: int | None, *, now: float) -> dict[str, int]:
    """Remember (``None``: forget) the forum topic of ``agent`` in the chat; returns every topic."""
    validate_scope(scope)
    with store.transaction() as conn:
        row = conn.execute("SELECT topics FROM chat_settings WHERE scope = ?", (scope,)).fetchone()
        topics = {str(k): int(v) for k, v in json.loads(row[0] if row else "{}").items()}
        if thread_id is None:
            topics.pop(agent, None)
        else:
            topics[agent] = int(thread_id)
        conn.execute(
            "INSERT INTO chat_settings(scope, topics, updated) VALUES (?, ?, ?)"
            " ON CONFLICT(scope) DO UPDATE SET topics = excluded.topics, updated = excluded.updated",
            (scope, json.dumps(topics, sort_keys=True), float(now)),
        )
    return topics


# -- the deployment -------------------------------------------------------------------------


def deployment_secret(store: Store, name: str, make: Callable[[], str], *, now: float) -> str:
    """The deployment's secret ``name``: the one stored, else ``make()``'s, stored first.

    Several workers starting at once agree: the first insert wins, and every worker reads
    the stored value back, so all of them check the same secret.
    """
    if not name.strip():
        raise InvalidRecord("a secret needs a name")
    rows = store.query("SELECT value FROM deployment_secrets WHERE name = ?", (name,))
    if rows:
        return rows[0][0]
    value = make()
    if not value:
        raise InvalidRecord(f"the secret {name!r} must not be empty")
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO deployment_secrets(name, value, created) VALUES (?, ?, ?) ON CONFLICT(name) DO NOTHING",
            (name, value, float(now)),
        )
    return store.query("SELECT value FROM deployment_secrets WHERE name = ?", (name,))[0][0]


@dataclass(frozen=True, slots=True)
class Invite:
    """An invite code for a closed bot: who made it, how many more people it lets in, until when."""

    code: str
    uses_left: int
    expires: float | None
    note: str
    created: float
    created_by: str | None


def create_invite(
    store: Store, code: str, *, uses: int = 1, expires: float | None = None, note: str = "", created_by: str | None = None, now: float
) -> Invite:
    """Store a new invite code (``uses`` people may pair with it, until ``expires`` if given)."""
    if not code or not code.isascii() or not code.replace("_", "").replace("-", "").isalnum() or len(code) > 64:
        raise InvalidRecord("an invite code is 1-64 characters of A-Z, a-z, 0-9, _ and -")
    if uses < 1:
        raise InvalidRecord("an invite lets at least one person in")
    if expires is not None and (not math.isfinite(expires) or expires <= now):
        raise InvalidRecord("an invite must expire in the future")
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO invites(code, note, created, expires, uses_left, created_by) VALUES (?, ?, ?, ?, ?, ?)",
            (code, note, float(now), expires, int(uses), created_by),
        )
    return Invite(code, uses, expires, note, float(now), created_by)


def invites(store: Store, *, now: float) -> list[Invite]:
    """The invite codes that still let someone in, newest first."""
    rows = store.query(
        "SELECT code, uses_left, expires, note, created, created_by FROM invites"
        " WHERE uses_left > 0 AND (expires IS NULL OR expires > ?) ORDER BY created DESC, code",
        (float(now),),
    )
    return [Invite(*row) for row in rows]


def revoke_invite(store: Store, code: str) -> bool:
    """Stop a code from letting anyone else in (who paired with it stays paired)."""
    with store.transaction() as conn:
        return conn.execute("UPDATE invites SET uses_left = 0 WHERE code = ? AND uses_left > 0", (code,)).rowcount > 0


def redeem_invite(store: Store, code: str, user_id: int, *, now: float) -> bool:
    """Pair ``user_id`` with the bot if ``code`` still lets someone in; True when paired (also before).

    One atomic step: the code's last use goes to exactly one of two people racing for it.
    """
    with store.transaction() as conn:
        if conn.execute("SELECT 1 FROM paired_users WHERE user_id = ?", (int(user_id),)).fetchone():
            return True
        taken = conn.execute(
            "UPDATE invites SET uses_left = uses_left - 1 WHERE code = ? AND uses_left > 0 AND (expires IS NULL OR expires > ?)"
            " RETURNING code",
            (code, float(now)),
        ).fetchone()
        if taken is None:
            return False
        conn.execute(
            "INSERT INTO paired_users(user_id, code, paired) VALUES (?, ?, ?) ON CONFLICT(user_id) DO NOTHING",
            (int(user_id), code, float(now)),
        )
    return True


def is_paired(store: Store, user_id: int) -> bool:
    """Whether the user paired with the bot through an invite code."""
    return bool(store.query("SELECT 1 FROM paired_users WHERE user_id = ?", (int(user_id),)))


# -- updates that could not be read ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RejectedUpdate:
    """An update the transport could not read: kept with why, never answered."""

    id: int
    scope: str | None
    update_id: int | None
    reason: str
    body: str
    received: float


def record_rejected_update(
    store: Store, *, update_id: int | None, scope: str | None, reason: str, body: str, now: float
) -> int:
    """Keep an unreadable update (its body cut to :data:`REJECTED_BODY_CHARS`); returns its row id."""
    if scope is not None:
        validate_scope(scope)
    with store.transaction() as conn:
        return conn.execute(
            "INSERT INTO rejected_updates(scope, update_id, reason, body, received) VALUES (?, ?, ?, ?, ?) RETURNING id",
            (scope, update_id, reason[:500], body[:REJECTED_BODY_CHARS], float(now)),
        ).fetchone()[0]


def rejected_updates(store: Store, *, limit: int = 50) -> list[RejectedUpdate]:
    """The newest unreadable updates, newest first."""
    rows = store.query(
        "SELECT id, scope, update_id, reason, body, received FROM rejected_updates ORDER BY id DESC LIMIT ?", (int(limit),)
    )
    return [RejectedUpdate(*row) for row in rows]


# -- spending ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Spending:
    """What a scope's model calls used since a moment: tokens (as the provider counted them,
    else as sent) and cost (None when no call had a known price)."""

    calls: int
    tokens: int
    cost: float | None


def spending_since(store: Store, scope: str, since: float) -> Spending:
    """Every model call of the scope since ``since`` (agents, the LLM router, fact extraction...)."""
    validate_scope(scope)
    row = store.query(
        "SELECT count(*), coalesce(sum(CASE WHEN prompt_tokens IS NULL THEN total"
        " ELSE prompt_tokens + coalesce(completion_tokens, 0) END), 0), sum(cost)"
        " FROM calls WHERE scope = ? AND ts >= ?",
        (scope, float(since)),
    )[0]
    return Spending(calls=int(row[0]), tokens=int(row[1]), cost=float(row[2]) if row[2] is not None else None)

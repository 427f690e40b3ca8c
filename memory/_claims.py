"""Claims: "I am doing this" per (scope, key), held by one holder until its TTL runs out.

A claim says in plain language what is being done ("setting a reminder: call mom"), so a
model can read it like the rest of its prompt. Acquire is one atomic upsert: it works
between threads and between processes sharing one database, and exactly one of several
racing holders gets the claim.

The TTL is the only way a claim of another machine expires: no idle expiry, and nothing
here deletes or shortens a live claim. Choose a TTL longer than the work; renew for
longer work (:class:`~._leases.ClaimLease` renews while the work runs). A crashed holder
never blocks for longer than its TTL, and on its own machine not at all: a holder made
by :func:`~._holders.process_holder` names its process (boot, pid namespace, pid, start
time), and a claim whose process is gone (:func:`~._holders.holder_gone`) is free at
once, to the restarted worker or anyone else there, by a compare-and-set on the dead
holder's row. A live process's claim is never taken: its pid answers with its own start
time. A holder name must be unique per worker (process and task): acquiring a claim one
already holds renews it. Rows of expired claims stay until someone takes the key, the
holder releases it, or the scope is erased; they are never returned as active.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._holders import holder_gone, machine_pattern
from ._model import validate_scope
from ._schema import ensure_scope
from ._store import Store
from .errors import InvalidRecord

__all__ = [
    "Claim",
    "acquire_claim",
    "active_claims",
    "claims_of",
    "drop_expired_claim",
    "expired_claims",
    "get_claim",
    "live_claims",
    "release_claim",
    "renew_claim",
]

_COLUMNS = "scope, key, holder, note, acquired, expires"

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Claim:
    """A live or past claim; live while ``now < expires``."""

    scope: str
    key: str
    holder: str
    note: str
    acquired: float  # unix seconds
    expires: float

    def is_active(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) < self.expires


def _row(row: Sequence[Any]) -> Claim:
    return Claim(scope=row[0], key=row[1], holder=row[2], note=row[3], acquired=row[4], expires=row[5])


def _now(now: float | None) -> float:
    value = time.time() if now is None else float(now)
    if not math.isfinite(value):
        raise InvalidRecord("a claim's clock must be a finite number")
    return value


def _check(key: str, holder: str) -> None:
    if not isinstance(key, str) or not key.strip():
        raise InvalidRecord("a claim needs a key")
    if not isinstance(holder, str) or not holder.strip():
        raise InvalidRecord("a claim needs a holder")


def _ttl(ttl: float) -> float:
    value = float(ttl)
    if not math.isfinite(value) or value <= 0:
        raise InvalidRecord(f"a claim's ttl must be a positive number of seconds, not {ttl!r}")
    return value


def acquire_claim(
    store: Store, scope: str, key: str, holder: str, *, note: str, ttl: float, now: float | None = None
) -> Claim | None:
    """Take the claim if it is free, expired, or already ours; None when someone else holds it.

    One ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` in a write transaction: the update
    happens only if the stored claim has expired or is ours, then the stored holder
    says who won. Re-acquiring one's own live claim renews it (new note and expiry,
    the original acquisition time).
    """
    validate_scope(scope)
    _check(key, holder)
    ts = _now(now)
    expires = ts + _ttl(ttl)
    with store.transaction() as conn:
        ensure_scope(conn, scope, ts)
        conn.execute(
            "INSERT INTO claims(scope, key, holder, note, acquired, expires) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(scope, key) DO UPDATE SET"
            "  acquired = CASE WHEN claims.holder = excluded.holder AND claims.expires > ?"
            "   THEN claims.acquired ELSE excluded.acquired END,"
            "  holder = excluded.holder, note = excluded.note, expires = excluded.expires"
            " WHERE claims.expires <= ? OR claims.holder = excluded.holder",
            (scope, key, holder, note, ts, expires, ts, ts),
        )
        found = conn.execute(f"SELECT {_COLUMNS} FROM claims WHERE scope = ? AND key = ?", (scope, key))
        # SQLite reads it here, under the store's lock; PostgreSQL once the block is done, so
        # the statements, the read and COMMIT go out together (one round trip, not two).
        row = found.fetchone() if store.dialect.is_sqlite else None
    claim = _row(row if row is not None else found.fetchone())
    if claim.holder == holder:
        return claim
    if holder_gone(claim.holder):
        return _take_over(store, claim, holder, note=note, now=ts, expires=expires)
    return None


def _take_over(store: Store, dead: Claim, holder: str, *, note: str, now: float, expires: float) -> Claim | None:
    """Take a claim whose holder's process is gone: a compare-and-set on the dead holder's
    row, so of several workers taking it over at once exactly one gets it."""
    with store.transaction() as conn:
        done = conn.execute(
            "UPDATE claims SET holder = ?, note = ?, acquired = ?, expires = ?"
            " WHERE scope = ? AND key = ? AND holder = ? AND expires = ?",
            (holder, note, now, expires, dead.scope, dead.key, dead.holder, dead.expires),
        )
    if not done.rowcount:  # read after COMMIT: on PostgreSQL the write and COMMIT are one round trip
        return None
    log.info("claim %s of %s taken over from %s: its process is gone", dead.key, dead.scope, dead.holder)
    return Claim(dead.scope, dead.key, holder, note, now, expires)


def renew_claim(
    store: Store,
    scope: str,
    key: str,
    holder: str,
    *,
    ttl: float,
    note: str | None = None,
    now: float | None = None,
) -> bool:
    """Extend one's live claim to ``now + ttl`` (and change its note if given); never shortens it.

    False when the holder does not hold it or it has already expired: an expired claim
    may have been taken, so it is acquired again, not renewed.
    """
    _check(key, holder)
    ts = _now(now)
    expires = ts + _ttl(ttl)
    with store.transaction() as conn:
        done = conn.execute(
            f"UPDATE claims SET expires = {store.dialect.greatest('expires', '?')}, note = coalesce(?, note)"
            " WHERE scope = ? AND key = ? AND holder = ? AND expires > ?",
            (expires, note, scope, key, holder, ts),
        )
    return done.rowcount > 0  # read after COMMIT: on PostgreSQL the write and COMMIT are one round trip


def release_claim(store: Store, scope: str, key: str, holder: str) -> bool:
    """Give the claim up; False when this holder does not hold it (another's is never touched)."""
    _check(key, holder)
    with store.transaction() as conn:
        done = conn.execute("DELETE FROM claims WHERE scope = ? AND key = ? AND holder = ?", (scope, key, holder))
    return done.rowcount > 0  # read after COMMIT: on PostgreSQL the write and COMMIT are one round trip


def get_claim(store: Store, scope: str, key: str, *, now: float | None = None) -> Claim | None:
    """The live claim on ``key`` in the scope, if any (one whose process is gone is not live)."""
    rows = store.query(
        f"SELECT {_COLUMNS} FROM claims WHERE scope = ? AND key = ? AND expires > ?", (scope, key, _now(now))
    )
    claims = [_row(row) for row in rows]
    return next((c for c in claims if not holder_gone(c.holder)), None)


def active_claims(store: Store, scope: str, now: float | None = None) -> list[Claim]:
    """The scope's live claims, oldest first (those whose process is gone are not live)."""
    return live_claims_of_rows(store.query(*active_claims_query(scope, now)))


def active_claims_query(scope: str, now: float | None = None) -> tuple[str, tuple[Any, ...]]:
    """The read of :func:`active_claims`, for a batch of reads (:func:`live_claims_of_rows` after)."""
    return f"SELECT {_COLUMNS} FROM claims WHERE scope = ? AND expires > ? ORDER BY acquired, key", (scope, _now(now))


def live_claims_of_rows(rows: Sequence[Sequence[Any]]) -> list[Claim]:
    """The claims of rows read by :func:`active_claims_query` whose process is not gone."""
    return [claim for claim in map(_row, rows) if not holder_gone(claim.holder)]


def live_claims(store: Store, *, scope: str | None = None, now: float | None = None, limit: int = 1000) -> list[Claim]:
    """Live claims of one scope, or of every scope (``agents-hub claims``), oldest first.

    Across scopes only when ``scope`` is None, for the operator's listing: the hub itself
    always reads one scope's claims.
    """
    where, params = ("scope = ? AND ", [scope]) if scope is not None else ("", [])
    rows = store.query(
        f"SELECT {_COLUMNS} FROM claims WHERE {where}expires > ? ORDER BY acquired, scope, key LIMIT ?",
        (*params, _now(now), int(limit)),
    )
    return [claim for claim in map(_row, rows) if not holder_gone(claim.holder)]


def _starting(prefix: str) -> str:
    """The LIKE pattern of keys starting with ``prefix`` (its own wildcards taken out)."""
    return prefix.replace("%", "").replace("_", "") + "%"


def claims_of(store: Store, scope: str, *, prefix: str = "") -> list[Claim]:
    """Every claim row of the scope whose key starts with ``prefix``, live or run out,
    oldest first (a run-out mark of work still owed is still owed)."""
    rows = store.query(
        f"SELECT {_COLUMNS} FROM claims WHERE scope = ? AND key LIKE ? ORDER BY acquired, key", (scope, _starting(prefix))
    )
    return [_row(row) for row in rows]


def expired_claims(store: Store, *, prefix: str = "", now: float | None = None, limit: int = 100) -> list[Claim]:
    """Claims of every scope left by their holder: the TTL ran out while still held, or the
    holder's process on this machine is gone. Soonest expiry first.

    Across scopes on purpose, like ``due_reminders``: recovery is global. ``prefix``
    filters keys (``"message:"`` finds answers that were in flight).
    """
    ts = _now(now)
    rows = store.query(
        f"SELECT {_COLUMNS} FROM claims WHERE expires <= ? AND key LIKE ? ORDER BY expires LIMIT ?",
        (ts, _starting(prefix), int(limit)),
    )
    found = [_row(row) for row in rows]
    pattern = machine_pattern()
    if pattern is not None:
        # Live claims whose holder says it ran here: few (work in flight), checked one by one.
        local = store.query(
            f"SELECT {_COLUMNS} FROM claims WHERE expires > ? AND key LIKE ? AND holder LIKE ? ORDER BY expires LIMIT ?",
            (ts, _starting(prefix), pattern, int(limit)),
        )
        found += [claim for claim in map(_row, local) if holder_gone(claim.holder)]
    return sorted(found, key=lambda claim: claim.expires)[: int(limit)]


def drop_expired_claim(store: Store, scope: str, key: str, *, now: float | None = None) -> bool:
    """Delete a claim only if it was left by its holder (its TTL ran out, or its process is gone).

    A live claim is never touched: the delete is conditional on the row read.
    """
    ts = _now(now)
    rows = store.query(f"SELECT {_COLUMNS} FROM claims WHERE scope = ? AND key = ?", (scope, key))
    if not rows:
        return False
    claim = _row(rows[0])
    with store.transaction() as conn:
        if claim.expires <= ts:
            removed = conn.execute(
                "DELETE FROM claims WHERE scope = ? AND key = ? AND expires <= ?", (scope, key, ts)
            ).rowcount
        elif holder_gone(claim.holder):
            removed = conn.execute(
                "DELETE FROM claims WHERE scope = ? AND key = ? AND holder = ? AND expires = ?",
                (scope, key, claim.holder, claim.expires),
            ).rowcount
        else:
            removed = 0
    return removed > 0

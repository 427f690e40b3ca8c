"""The digest of a scope's older history and the reflection records.

A digest is one row per scope, shared by every agent of the scope: its lines (each with
the ids of the messages it came from), the newest message folded in (``upto_id``), a
version that moves up by one at every compaction, and how that compaction was made
(``full``, ``incremental`` or ``full_recompact``). Cumulative counters (compactions per
kind, failures, model calls and tokens) live beside it in ``stats``.

Knowledge fragments from reflection are vault items of kind ``knowledge`` (so archive
search indexes them) with their importance and sources in ``meta``; the reflection
watermark per scope (what has been reflected so far) is a row of ``reflections``.
Both tables are scoped and erased with the scope.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._data import (
    _VAULT_COLUMNS,
    VaultItem,
    _vault_row,
    add_vault_item,
    list_vault_items,
)
from ._model import validate_scope
from ._schema import ensure_scope
from ._store import Store
from .errors import InvalidRecord

__all__ = [
    "DIGEST_KINDS",
    "DIGEST_PATHS",
    "KNOWLEDGE_KIND",
    "Digest",
    "DigestLine",
    "DigestRead",
    "Knowledge",
    "ReflectionState",
    "add_knowledge",
    "digest_usage",
    "get_digest",
    "get_reflection",
    "last_served_digest",
    "list_knowledge",
    "messages_after",
    "read_digest",
    "record_digest_failure",
    "research_of",
    "research_query",
    "save_digest",
    "save_reflection",
]

DIGEST_KINDS = ("full", "incremental", "full_recompact")
# The last second a date can be written for (31 December 9999): a stored time past it is
# no message's time and would crash every date formatting that reads it.
LATEST_TIME = 253402300799.0
# What a call can get: the four paths of a digest, or none at all.
DIGEST_PATHS = ("cached", "incremental", "full", "full_recompact", "none")
KNOWLEDGE_KIND = "knowledge"

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DigestLine:
    """One line of a digest and the messages it came from."""

    text: str
    sources: tuple[int, ...]  # message ids, oldest first
    ts: float  # the newest source's time
    who: str | None = None  # the speaker (extractive lines); model lines name people in the text
    score: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {"text": self.text, "sources": list(self.sources), "ts": self.ts, "who": self.who, "score": round(self.score, 4)}

    @classmethod
    def from_json(cls, data: Any) -> DigestLine:
        """A stored line, checked: raises InvalidRecord (saying what is wrong) for anything else.

        A line is text with the ids of its source messages and their time: a number, a
        line without sources or without a time (it would be dated 1 January 1970) is not one.
        """
        if not isinstance(data, dict):
            raise InvalidRecord(f"a digest line is an object, not {type(data).__name__} {data!r:.40}")
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InvalidRecord(f"a digest line needs its text, not {text!r:.40}")
        sources = data.get("sources")
        if not isinstance(sources, list) or not sources or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in sources):
            raise InvalidRecord(f"a digest line needs the ids of its source messages, not {sources!r:.40}")
        ts = data.get("ts")
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not 0 < ts < LATEST_TIME:
            raise InvalidRecord(f"a digest line needs the time of its sources, not {ts!r:.40}")
        who = data.get("who")
        score = data.get("score")
        return cls(
            text=text,
            sources=tuple(sources),
            ts=float(ts),
            who=who if isinstance(who, str) and who else None,
            score=float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score) else 0.0,
        )


@dataclass(frozen=True, slots=True)
class Digest:
    """The scope's digest; ``version`` 0 means none was made yet (only failures counted).

    ``broken`` says why the stored lines could not be read (corrupt or wrong-shaped):
    such a digest has no lines, is never shown, and is rebuilt from the messages at the
    next compaction. Unreadable counters (``stats``) only start again from zero.
    """

    scope: str
    lines: tuple[DigestLine, ...] = ()
    upto_id: int = 0  # the newest message folded in
    covered: int = 0  # messages folded in so far
    version: int = 0
    kind: str = ""  # how this version was made: full, incremental, full_recompact
    mode: str = ""  # extractive or model
    made: float = 0.0
    folds: int = 0  # incremental folds since the last full build
    stats: dict[str, Any] = field(default_factory=dict)
    broken: str = ""

    @property
    def exists(self) -> bool:
        return self.version > 0 and bool(self.lines) and not self.broken


_DIGEST_COLUMNS = "scope, lines, upto_id, covered, version, kind, mode, made, folds, stats"


def _number(value: Any, kind: type[int] | type[float]) -> int | float:
    """A stored counter or time, as a number (0 when the column holds something else)."""
    try:
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        return kind(0)
    if kind is int:  # ids and counters: a column past SQLite's and PostgreSQL's 64 bits is no id
        return number if 0 <= number < 2**63 else 0
    return number if math.isfinite(number) else kind(0)


def _digest_row(row: Sequence[Any]) -> Digest:
    """The stored row, checked line by line; a row that does not read is returned ``broken``, never raised."""
    try:
        stats = json.loads(row[9] or "{}")
    except ValueError:
        stats = None
    if not isinstance(stats, dict):  # counters only: they start again, the lines stay usable
        log.warning("the digest counters of %s are unreadable; they start again from zero", row[0])
        stats = {}
    broken, lines = "", ()
    try:
        raw = json.loads(row[1] or "[]")
        if not isinstance(raw, list):
            raise InvalidRecord(f"the lines are {type(raw).__name__}, not a list")
        lines = tuple(DigestLine.from_json(item) for item in raw)
    except (ValueError, InvalidRecord) as exc:  # json's errors are ValueErrors
        broken, lines = str(exc), ()
    return Digest(
        scope=row[0],
        lines=lines,
        upto_id=int(_number(row[2], int)),
        covered=int(_number(row[3], int)),
        version=int(_number(row[4], int)),
        kind=row[5] if row[5] in DIGEST_KINDS else "",
        mode=str(row[6] or ""),
        made=made if 0 < (made := float(_number(row[7], float))) < LATEST_TIME else 0.0,
        folds=int(_number(row[8], int)),
        stats=stats,
        broken=broken,
    )


def get_digest(store: Store, scope: str) -> Digest | None:
    """The scope's digest row (with its counters), or None when nothing was ever tried.

    Never raises for what the row holds: a row that does not read comes back ``broken``.
    """
    rows = store.query(f"SELECT {_DIGEST_COLUMNS} FROM digests WHERE scope = ?", (scope,))
    return _digest_row(rows[0]) if rows else None


def _count(stats: dict[str, Any], name: str) -> int:
    """A counter of ``stats`` (0 when absent or not a number: the counters never break a read)."""
    return int(_number(stats.get(name, 0), int))


def _bump(stats: dict[str, Any], usage: dict[str, int] | None) -> None:
    for name, value in (usage or {}).items():
        stats[name] = _count(stats, name) + int(value or 0)


def save_digest(
    store: Store,
    scope: str,
    lines: Iterable[DigestLine],
    *,
    upto_id: int,
    covered: int,
    kind: str,
    mode: str,
    now: float | None = None,
    usage: dict[str, int] | None = None,
    expect_version: int | None = None,
    failure: str | None = None,
) -> Digest | None:
    """Store a new version of the scope's digest; None when ``expect_version`` is stale.

    ``usage`` adds to the cumulative counters (``model_calls``, ``prompt_tokens``,
    ``completion_tokens``). ``expect_version`` makes the write conditional: a compaction
    that started from version v never overwrites a v+1 another worker wrote meanwhile.
    ``failure``: this version is a fallback (the model failed and there was no digest to
    keep): the failure is counted as well.
    """
    validate_scope(scope)
    if kind not in DIGEST_KINDS:
        raise InvalidRecord(f"digest kind must be one of {', '.join(DIGEST_KINDS)}, not {kind!r}")
    ts = time.time() if now is None else float(now)
    payload = json.dumps([line.as_json() for line in lines], ensure_ascii=False)
    with store.transaction() as conn:
        ensure_scope(conn, scope, ts)
        row = conn.execute(f"SELECT {_DIGEST_COLUMNS} FROM digests WHERE scope = ?", (scope,)).fetchone()
        old = _digest_row(row) if row else Digest(scope=scope)
        if expect_version is not None and old.version != expect_version:
            return None
        stats = dict(old.stats)
        _bump(stats, usage)
        stats[kind] = _count(stats, kind) + 1
        stats.pop("retry_after", None)
        if failure is not None:
            stats["failed"] = _count(stats, "failed") + 1
            stats["last_failure"] = failure[:200]
        folds = old.folds + 1 if kind == "incremental" else 0
        conn.execute(
            "INSERT INTO digests(scope, lines, upto_id, covered, version, kind, mode, made, folds, stats)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(scope) DO UPDATE SET lines = excluded.lines, upto_id = excluded.upto_id,"
            " covered = excluded.covered, version = excluded.version, kind = excluded.kind,"
            " mode = excluded.mode, made = excluded.made, folds = excluded.folds, stats = excluded.stats",
            (scope, payload, int(upto_id), int(covered), old.version + 1, kind, mode, ts, folds, json.dumps(stats)),
        )
        row = conn.execute(f"SELECT {_DIGEST_COLUMNS} FROM digests WHERE scope = ?", (scope,)).fetchone()
    return _digest_row(row)


def record_digest_failure(
    store: Store,
    scope: str,
    reason: str,
    *,
    retry_after: int,
    usage: dict[str, int] | None = None,
    now: float | None = None,
) -> None:
    """Count a compaction that kept the cached digest (timeout, error, untraceable output).

    ``retry_after``: the newest message id that had left the window; the next attempt
    waits until more messages have left it, so a broken model is not asked after every reply.
    """
    validate_scope(scope)
    ts = time.time() if now is None else float(now)
    with store.transaction() as conn:
        ensure_scope(conn, scope, ts)
        row = conn.execute(f"SELECT {_DIGEST_COLUMNS} FROM digests WHERE scope = ?", (scope,)).fetchone()
        stats = dict(_digest_row(row).stats) if row else {}
        _bump(stats, usage)
        stats["failed"] = _count(stats, "failed") + 1
        stats["last_failure"] = reason[:200]
        stats["retry_after"] = int(retry_after)
        conn.execute(
            "INSERT INTO digests(scope, stats) VALUES (?, ?) ON CONFLICT(scope) DO UPDATE SET stats = excluded.stats",
            (scope, json.dumps(stats)),
        )


def messages_after(store: Store, scope: str, after_id: int, *, before_id: int | None = None) -> int:
    """How many messages of the scope have an id above ``after_id`` (and below ``before_id``)."""
    if before_id is None:
        return store.query("SELECT count(*) FROM messages WHERE scope = ? AND id > ?", (scope, after_id))[0][0]
    return store.query(
        "SELECT count(*) FROM messages WHERE scope = ? AND id > ? AND id < ?", (scope, after_id, before_id)
    )[0][0]


def last_served_digest(store: Store, scope: str) -> int | None:
    """The digest version the scope's latest call with digest information was given (0: none)."""
    rows = store.query(*_last_served_query(store, scope))
    return int(rows[0][0]) if rows else None


def _last_served_query(store: Store, scope: str) -> tuple[str, tuple[Any, ...]]:
    version = store.dialect.json_number("extra", "digest", "version")
    return f"SELECT {version} FROM calls WHERE scope = ? AND {version} IS NOT NULL ORDER BY id DESC LIMIT 1", (scope,)


@dataclass(frozen=True)
class DigestRead:
    """The scope's digest with what a call or a compaction check asks of it, read together."""

    digest: Digest | None  # as get_digest reads it
    after: int  # messages_after(the digest's upto_id, or 0 without one; below before_id when given)
    served: int | None = None  # last_served_digest (when asked for)


def read_digest(store: Store, scope: str, *, before_id: int | None = None, served: bool = False) -> DigestRead:
    """:func:`get_digest`, :func:`messages_after` its ``upto_id`` (and ``before_id``) and, with
    ``served``, :func:`last_served_digest`, in one batch of reads (one round trip on
    PostgreSQL): the count reads the digest's ``upto_id`` inside its query. A row whose
    ``upto_id`` is not a plain integer has its count made apart, from the id it reads as."""
    after_digest = "id > coalesce((SELECT upto_id FROM digests WHERE scope = ?), 0)"
    below, extra = (" AND id < ?", (before_id,)) if before_id is not None else ("", ())
    batch: list[tuple[str, Sequence[Any]]] = [
        (f"SELECT {_DIGEST_COLUMNS} FROM digests WHERE scope = ?", (scope,)),
        (f"SELECT count(*) FROM messages WHERE scope = ? AND {after_digest}{below}", (scope, scope, *extra)),
    ]
    if served:
        batch.append(_last_served_query(store, scope))
    rows = store.query_batch(batch)
    digest = _digest_row(rows[0][0]) if rows[0] else None
    raw = rows[0][0][2] if rows[0] else 0
    if isinstance(raw, int) and not isinstance(raw, bool) and raw == (digest.upto_id if digest is not None else 0):
        after = int(rows[1][0][0])
    else:
        after = messages_after(store, scope, digest.upto_id if digest is not None else 0, before_id=before_id)
    last = (int(rows[2][0][0]) if rows[2] else None) if served else None
    return DigestRead(digest=digest, after=after, served=last)


def digest_usage(store: Store, scope: str) -> dict[str, Any]:
    """What the digest cost the scope: its tokens across calls, the paths taken, compaction counts and model tokens."""
    paths = {name: 0 for name in DIGEST_PATHS}
    tokens = 0
    calls = 0
    path_of = store.dialect.json_text("extra", "digest", "path")
    tokens_of = store.dialect.json_number("extra", "digest", "tokens")
    for path, count, summed in store.query(
        f"SELECT {path_of}, count(*), coalesce(sum({tokens_of}), 0) FROM calls WHERE scope = ? AND {path_of} IS NOT NULL GROUP BY 1",
        (scope,),
    ):
        paths[str(path)] = paths.get(str(path), 0) + int(count)
        tokens += int(summed)
        calls += int(count)
    digest = get_digest(store, scope)
    stats = digest.stats if digest else {}
    return {
        "calls": calls,
        "tokens": tokens,
        "paths": paths,
        "version": digest.version if digest else 0,
        "lines": len(digest.lines) if digest else 0,
        "compactions": {kind: _count(stats, kind) for kind in DIGEST_KINDS},
        "failed": _count(stats, "failed"),
        "model_calls": _count(stats, "model_calls"),
        "prompt_tokens": _count(stats, "prompt_tokens"),
        "completion_tokens": _count(stats, "completion_tokens"),
        "broken": digest.broken if digest else "",
    }


# -- reflection --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReflectionState:
    """How far reflection got in a scope: messages and events up to these ids are distilled."""

    scope: str
    message_upto: int = 0
    event_upto: int = 0
    last_run: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)


def get_reflection(store: Store, scope: str) -> ReflectionState:
    rows = store.query(
        "SELECT scope, message_upto, event_upto, last_run, stats FROM reflections WHERE scope = ?", (scope,)
    )
    if not rows:
        return ReflectionState(scope=scope)
    row = rows[0]
    return ReflectionState(row[0], int(row[1]), int(row[2]), float(row[3]), json.loads(row[4] or "{}"))


def save_reflection(
    store: Store,
    scope: str,
    *,
    message_upto: int,
    event_upto: int,
    now: float,
    usage: dict[str, int] | None = None,
    expect: tuple[int, int] | None = None,
) -> ReflectionState | None:
    """Move the watermark (never back) and add ``usage`` to the counters (runs, fragments, model calls, tokens).

    ``expect`` (message_upto, event_upto) makes the move a compare-and-set: None, and
    nothing written, when the stored watermark is no longer where the run read it (another
    worker reflected those episodes meanwhile). Call it in the transaction that keeps the
    episode's fragments, first: the fragments go only where the watermark moved.
    """
    validate_scope(scope)
    with store.transaction() as conn:
        ensure_scope(conn, scope, now)
        old = get_reflection(store, scope)
        if expect is not None and (old.message_upto, old.event_upto) != (int(expect[0]), int(expect[1])):
            return None
        stats = dict(old.stats)
        _bump(stats, usage)
        conn.execute(
            "INSERT INTO reflections(scope, message_upto, event_upto, last_run, stats) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT(scope) DO UPDATE SET message_upto = excluded.message_upto,"
            " event_upto = excluded.event_upto, last_run = excluded.last_run, stats = excluded.stats",
            (scope, max(int(message_upto), old.message_upto), max(int(event_upto), old.event_upto), float(now), json.dumps(stats)),
        )
    return get_reflection(store, scope)


@dataclass(frozen=True, slots=True)
class Knowledge:
    """A knowledge fragment: 1–2 sentences distilled from older episodes or found by a request.

    ``agent``: the agent whose research it is (a request it answered found it); None for
    reflection's fragments, which belong to the whole scope. ``vault``: notes and emails
    it came from; ``reply``: the reply that found it.
    """

    id: int
    scope: str
    text: str
    importance: float
    messages: tuple[int, ...]
    events: tuple[int, ...]
    ts: float  # the end of the episode it came from
    mode: str = ""
    agent: str | None = None
    vault: tuple[int, ...] = ()
    reply: int | None = None


def _ids(value: Any) -> tuple[int, ...]:
    return tuple(int(i) for i in value if isinstance(i, int) and not isinstance(i, bool)) if isinstance(value, list) else ()


def _knowledge(item: VaultItem) -> Knowledge:
    meta = item.meta if isinstance(item.meta, dict) else {}
    reply = meta.get("reply")
    return Knowledge(
        id=item.id,
        scope=item.scope,
        text=item.body,
        importance=float(_number(meta.get("importance", 0.0), float)),
        messages=_ids(meta.get("messages")),
        events=_ids(meta.get("events")),
        ts=item.updated,
        mode=str(meta.get("mode", "")),
        agent=item.agent,
        vault=_ids(meta.get("vault")),
        reply=reply if isinstance(reply, int) and not isinstance(reply, bool) else None,
    )


def add_knowledge(
    store: Store,
    scope: str,
    text: str,
    *,
    importance: float,
    messages: Sequence[int] = (),
    events: Sequence[int] = (),
    vault: Sequence[int] = (),
    ts: float,
    mode: str = "",
    agent: str | None = None,
    reply: int | None = None,
) -> Knowledge | None:
    """Keep a fragment in the scope's vault (kind ``knowledge``): archive search finds it.

    With ``agent`` it is that agent's research too (:func:`research_of`). With ``reply``,
    a reply keeps at most one fragment: None when it already has one (the work after a
    reply may run again after a pause).
    """
    if not messages and not events and not vault:
        raise InvalidRecord("a knowledge fragment needs the ids of its sources")
    meta: dict[str, Any] = {
        "importance": round(min(1.0, max(0.0, float(importance))), 3),
        "messages": [int(i) for i in messages],
        "events": [int(i) for i in events],
        "mode": mode,
    }
    if vault:
        meta["vault"] = [int(i) for i in vault]
    if reply is not None:
        meta["reply"] = int(reply)
    with store.transaction() as conn:
        if reply is not None:
            ensure_scope(conn, scope, ts)  # serialises the check and the insert per scope
            found = conn.execute(
                f"SELECT 1 FROM vault WHERE scope = ? AND kind = ? AND {store.dialect.json_number('meta', 'reply')} = ? LIMIT 1",
                (scope, KNOWLEDGE_KIND, int(reply)),
            ).fetchone()
            if found:
                return None
        item = add_vault_item(
            store,
            scope,
            KNOWLEDGE_KIND,
            text,
            meta=meta,
            agent=agent,
            source_message=int(messages[0]) if messages else None,
            now=ts,
        )
    return _knowledge(item)


def list_knowledge(store: Store, scope: str, *, limit: int = 1000) -> list[Knowledge]:
    """The scope's knowledge fragments, newest first."""
    return [_knowledge(item) for item in list_vault_items(store, scope, KNOWLEDGE_KIND, limit=limit)]


def research_of(store: Store, scope: str, agent: str, *, limit: int = 5, rows: Sequence[Sequence[Any]] | None = None) -> list[Knowledge]:
    """``agent``'s research in the scope: what its requests found, with the sources, newest
    first (seed 000). ``rows``: those of :func:`research_query`, read already."""
    return [_knowledge(_vault_row(row)) for row in (rows if rows is not None else store.query(*research_query(scope, agent, limit=limit)))]


def research_query(scope: str, agent: str, *, limit: int = 5) -> tuple[str, tuple[Any, ...]]:
    """The read :func:`research_of` makes, for a caller that batches it with its own: the
    items themselves (not their ids, then one read per item: six round trips on PostgreSQL
    for every agent call that shows research)."""
    return (
        f"SELECT {_VAULT_COLUMNS} FROM vault WHERE scope = ? AND kind = ? AND agent = ? ORDER BY updated DESC, id DESC LIMIT ?",
        (scope, KNOWLEDGE_KIND, agent, int(limit)),
    )

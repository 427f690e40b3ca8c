"""Benchmark of the event log: emit and ``unconsumed_events`` latency on a long log.

Fills a temporary database with N events in one scope (plus a few small other scopes),
then times single emits (each its own committed transaction, as a tool's would be) and
reads of an agent's unconsumed events, with the cursor a little behind the head (the
usual case) and with no cursor at all (an agent's first call in an old scope).

Wall-clock percentiles include whatever else the machine runs (a preempted read takes
a whole time slice); the CPU-time percentiles show the work itself.
"""

from __future__ import annotations

import json
import math
import random
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import click

from scopehub.memory import (
    Store,
    advance_cursor,
    emit_event,
    latest_events,
    unconsumed_events,
    validate_event_payload,
)

from . import _report

__all__ = ["bench_events", "events_bench_command"]

SCOPE = "user:1"
OTHER_SCOPES = ("user:2", "user:3", "group:9")
# Who emits what, and what each reader is interested in: the shape of the built-in agents.
_EMITTERS = (
    ("tasks", "task.created"),
    ("tasks", "task.done"),
    ("notes", "note.saved"),
    ("inbox", "email.received"),
    ("inbox", "draft.saved"),
    ("reminders", "reminder.set"),
    ("reminders", "reminder.cancelled"),
    ("hub", "reminder.fired"),
)
_READERS = {
    "tasks": ("email.received", "reminder.*"),
    "inbox": ("task.created", "task.done", "reminder.set"),
    "notes": ("fact.learned",),
    "general": ("fact.learned", "task.created", "note.saved", "email.received", "reminder.set"),
}
_TARGETED_SHARE = 0.05


def _percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def _payload(kind: str, i: int, rng: random.Random) -> dict[str, Any]:
    title = f"item {i} {rng.choice(['rent', 'report', 'dentist', 'groceries', 'visa'])}"
    due = 1_714_557_600 + i * 60
    return {
        "task.created": {"task_id": i, "number": i, "title": title, "due": None},
        "task.done": {"task_id": i, "number": i, "title": title},
        "note.saved": {"note_id": i, "title": title},
        "email.received": {
            "email_id": i,
            "sender": "Ram <ram@example.com>",
            "subject": title,
            "dates": [{"text": "by Friday", "day": "2024-05-03", "deadline": True}],
        },
        "draft.saved": {
            "draft_id": i,
            "to": "Ram <ram@example.com>",
            "subject": "Re: " + title,
            "reply_to": i - 1,
        },
        "reminder.set": {"reminder_id": i, "text": title, "due": due},
        "reminder.cancelled": {"reminder_id": i, "text": title},
        "reminder.fired": {"reminder_id": i, "text": title},
    }[kind]


def _rows(scope: str, count: int, rng: random.Random, start_ts: float) -> Iterator[tuple[Any, ...]]:
    readers = list(_READERS)
    for i in range(count):
        agent, kind = rng.choice(_EMITTERS)
        data = validate_event_payload(kind, _payload(kind, i, rng))
        target = rng.choice(readers) if rng.random() < _TARGETED_SHARE else None
        yield (
            scope,
            start_ts + i * 0.5,
            agent,
            target,
            kind,
            json.dumps(data, separators=(",", ":")),
            i,
        )


def _fill(store: Store, scope: str, count: int, rng: random.Random, batch: int = 5000) -> None:
    """Bulk-load validated events (the same rows emit_event writes, in large transactions)."""
    rows = _rows(scope, count, rng, 1_714_000_000.0)
    while True:
        chunk = [row for _, row in zip(range(batch), rows, strict=False)]
        if not chunk:
            return
        with store.transaction() as conn:
            conn.executemany(
                "INSERT INTO events(scope, ts, agent, target, type, payload, message_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                chunk,
            )


def _timed(ops: int, run: Callable[[int], Any]) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU milliseconds per op (CPU time shows the work without preemption)."""
    wall, cpu = [], []
    for i in range(ops):
        started, started_cpu = time.perf_counter(), time.thread_time()
        run(i)
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - started_cpu) * 1000)
    return wall, cpu


def _figures(times: tuple[Sequence[float], Sequence[float]]) -> dict[str, float]:
    wall, cpu = times
    return {
        "p50_ms": round(_percentile(wall, 0.5), 4),
        "p95_ms": round(_percentile(wall, 0.95), 4),
        "max_ms": round(max(wall, default=0.0), 4),
        "cpu_p50_ms": round(_percentile(cpu, 0.5), 4),
        "cpu_p95_ms": round(_percentile(cpu, 0.95), 4),
    }


def bench_events(
    events: int = 100_000,
    *,
    ops: int = 1000,
    limit: int = 20,
    behind: int = 200,
    seed: int = 7,
    db_path: str | Path | None = None,
) -> dict[str, Any]:
    """Time emits and reads on a scope holding ``events`` events; returns the figures.

    ``behind``: how far (in events of the scope) a reader's cursor trails the head for
    the warm reads. Each read is one ``unconsumed_events`` call for one of the agents.
    """
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(db_path) if db_path is not None else Path(tmp) / "events.db"
        if path.exists():
            raise ValueError(f"{path} exists; give a new file")
        store = Store(path)
        try:
            started = time.perf_counter()
            _fill(store, SCOPE, events, rng)
            for other in OTHER_SCOPES:
                _fill(store, other, max(1, events // 100), rng)
            fill_s = time.perf_counter() - started

            payloads = [
                (agent, kind, _payload(kind, events + i, rng))
                for i, (agent, kind) in enumerate(rng.choice(_EMITTERS) for _ in range(ops))
            ]

            def emit(i: int) -> None:
                agent, kind, payload = payloads[i]
                emit_event(store, SCOPE, agent, kind, payload, message_id=events + i)

            emit_ms = _timed(ops, emit)
            in_scope = store.query("SELECT count(*) FROM events WHERE scope = ?", (SCOPE,))[0][0]
            ids = [
                row[0]
                for row in store.query(
                    "SELECT id FROM events WHERE scope = ? ORDER BY id DESC LIMIT ?",
                    (SCOPE, behind + 1),
                )
            ]
            readers = list(_READERS.items())
            for name, _ in readers:  # warm readers trail the head by `behind` events
                advance_cursor(store, SCOPE, name, ids[-1])

            def read_warm(i: int) -> None:
                name, interests = readers[i % len(readers)]
                unconsumed_events(store, SCOPE, name, interests=interests, limit=limit)

            def read_cold(i: int) -> None:
                name, interests = readers[i % len(readers)]
                unconsumed_events(store, SCOPE, f"new_{name}", interests=interests, limit=limit)

            def latest(i: int) -> None:
                name, interests = readers[i % len(readers)]
                latest_events(store, SCOPE, types=interests, limit=8, for_agent=name)

            warm_ms = _timed(ops, read_warm)
            cold_ms = _timed(ops, read_cold)
            latest_ms = _timed(ops, latest)
            shown = unconsumed_events(
                store, SCOPE, "tasks", interests=_READERS["tasks"], limit=limit
            )
        finally:
            store.close()
    return {
        "events": events,
        "events_in_scope": in_scope,
        "other_scopes": len(OTHER_SCOPES),
        "ops": ops,
        "limit": limit,
        "cursor_behind": behind,
        "fill_s": round(fill_s, 2),
        "emit": _figures(emit_ms),
        "unconsumed_warm": _figures(warm_ms),
        "unconsumed_cold": _figures(cold_ms),
        "latest": _figures(latest_ms),
        "warm_read_returned": len(shown),
    }


@click.command("events")
@click.option(
    "--events",
    "count",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="Events in the scope.",
)
@click.option(
    "--ops",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Timed emits and reads, each.",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Events per read."
)
@click.option(
    "--behind",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="How far a reader's cursor trails the head.",
)
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Keep the database here (must not exist).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@_report.report_option
def events_bench_command(
    count: int, ops: int, limit: int, behind: int, db_path: Path | None, as_json: bool
) -> dict[str, Any]:
    """Fill a scope with N events, then time emits and unconsumed-event reads (p50/p95)."""
    try:
        result = bench_events(count, ops=ops, limit=limit, behind=behind, db_path=db_path)
    except (ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return result
    click.echo(
        f"{result['events_in_scope']:,} events in the scope (+{result['other_scopes']} other scopes), filled in {result['fill_s']} s"
    )
    rows = []
    for label, key in (
        ("emit (own transaction)", "emit"),
        (f"unconsumed, cursor {behind} behind", "unconsumed_warm"),
        ("unconsumed, no cursor yet", "unconsumed_cold"),
        ("latest by interests", "latest"),
    ):
        figures = result[key]
        rows.append([label, f"{figures['p50_ms']:.3f}", f"{figures['p95_ms']:.3f}", f"{figures['cpu_p95_ms']:.3f}"])
    click.echo(
        _report.format_table(
            ["operation", "p50 ms", "p95 ms", "CPU p95 ms"],
            rows,
            title=f"Event log at {result['events_in_scope']:,} events: {ops:,} timed operations each, {limit} events per read",
        )
    )
    return result

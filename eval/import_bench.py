"""``agents-hub bench import``: bulk writes side by side, SQLite against PostgreSQL.

``agents-hub bench import [--messages 100000] [--scopes 1] [--runs 3] [--db postgresql|URL]``

Writes a chat log of N messages (people's and the agents' answers, each answer a reply
to the message before it) in ``--scopes`` scopes, then, ``--runs`` times in turn: imports
it into a new SQLite file, imports it into a new PostgreSQL database, and migrates the
SQLite file into another new PostgreSQL database (``agents-hub migrate``'s copy). Each is
what the command runs (``read_chatlog`` + ``import_records``; ``copy_store``), timed by
the wall clock, search index included. Printed: the median seconds of each, and the
PostgreSQL / SQLite ratios (the target: at most 3).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from . import _report

__all__ = ["bench_import", "import_bench_command", "write_log"]

_TEXTS = (
    "add buy milk to my tasks",
    "remind me to call the dentist tomorrow at 9",
    "note that the wifi password is on the fridge",
    "here is an email from my boss: the quarterly report is due on Friday",
    "what did I say about the report?",
    "my sister Ana moves to Porto in March",
)


def write_log(path: Path, messages: int, scopes: int = 1) -> None:
    """A canonical JSONL chat log of ``messages`` messages over ``scopes`` scopes."""
    start = time.time() - 400 * 86400.0
    per_scope = max(1, messages // scopes)
    with path.open("w", encoding="utf-8") as out:
        written = 0
        for s in range(scopes):
            scope = f"user:{9_000_000 + s}"
            for i in range(per_scope if s < scopes - 1 else messages - written):
                user = i % 2 == 0
                record: dict[str, Any] = {
                    "id": f"m{i}",
                    "scope": scope,
                    "role": "user" if user else "agent",
                    "text": f"{_TEXTS[(i // 2) % len(_TEXTS)]} ({i})" if user else f"done: {_TEXTS[(i // 2) % len(_TEXTS)]} #{i // 2}",
                    "ts": start + i * 30,
                }
                if not user:
                    record["agent"] = ("tasks", "reminders", "notes", "inbox")[(i // 2) % 4]
                    record["reply_to"] = f"m{i - 1}"
                out.write(json.dumps(record) + "\n")
                written += 1


def _import(path: Path, target: str) -> float:
    from scopehub.memory import ImportReport, open_store, read_chatlog

    store = open_store(target)
    try:
        report = ImportReport()
        started = time.perf_counter()
        store.import_records(read_chatlog(str(path), report), report=report)
        seconds = time.perf_counter() - started
    finally:
        store.close()
    if report.invalid:
        raise click.ClickException(f"the generated log has invalid lines: {report.invalid[:3]}")
    return seconds


def _migrate(source: str, target: str) -> float:
    from scopehub.memory import open_store
    from scopehub.memory.postgres.copy import copy_store

    old, new = open_store(source, must_exist=True), open_store(target)
    try:
        started = time.perf_counter()
        report = copy_store(old, new, source_name=source)
        seconds = time.perf_counter() - started
    finally:
        old.close()
        new.close()
    if not report.ok:
        raise click.ClickException("migrate: the counts differ")
    return seconds


def bench_import(*, messages: int, scopes: int, runs: int, db: str | None, workdir: Path) -> dict[str, Any]:
    """Run the bench; returns the seconds of every run and their medians."""
    from .workers import start_postgres

    log = workdir / "chatlog.jsonl"
    write_log(log, messages, scopes)
    server = start_postgres(None if db in (None, "postgresql", "postgres") else db)
    if isinstance(server, str):
        raise click.ClickException(server)
    times: dict[str, list[float]] = {"import sqlite": [], "import postgresql": [], "migrate sqlite -> postgresql": []}
    try:
        for run in range(runs):
            sqlite = workdir / f"run{run}.db"
            times["import sqlite"].append(_import(log, str(sqlite)))
            times["import postgresql"].append(_import(log, server.new_database(f"import_{os.getpid()}_{run}")))
            times["migrate sqlite -> postgresql"].append(_migrate(str(sqlite), server.new_database(f"migrate_{os.getpid()}_{run}")))
    finally:
        server.stop()
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians["import sqlite"]
    return {
        "messages": messages,
        "scopes": scopes,
        "runs": {name: [round(v, 2) for v in values] for name, values in times.items()},
        "median_s": {name: round(value, 2) for name, value in medians.items()},
        "ratio_to_sqlite_import": {name: round(value / base, 2) for name, value in medians.items()},
    }


@click.command("import")
@_report.report_option
@click.option("--messages", default=100_000, show_default=True, type=click.IntRange(1, 10_000_000))
@click.option("--scopes", default=1, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--runs", default=3, show_default=True, type=click.IntRange(1, 20), help="runs of each, in turn")
@click.option("--db", default=None, help="a postgresql:// URL whose user creates databases (default: an embedded server)")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="write the figures as JSON here")
def import_bench_command(messages: int, scopes: int, runs: int, db: str | None, json_out: str | None) -> dict[str, Any]:
    """Import and migrate a chat log: SQLite against PostgreSQL, side by side, with the ratios."""
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="import-bench-") as tmp:
        report = bench_import(messages=messages, scopes=scopes, runs=runs, db=db, workdir=Path(tmp))
    report["load_average"] = [round(x, 2) for x in load]
    rows = [
        [name, report["median_s"][name], report["ratio_to_sqlite_import"][name], " ".join(str(v) for v in report["runs"][name])]
        for name in report["median_s"]
    ]
    title = f"{messages:,} messages in {scopes} scope(s), {runs} run(s) each in turn; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    click.echo(_report.format_table(["step", "median s", "x SQLite import", "runs (s)"], rows, title=title))
    if json_out:
        _report.write_json(json_out, report)
    return report

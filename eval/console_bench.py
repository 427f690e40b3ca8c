"""Benchmark of the web console: how fast its pages open on a long scope.

Fills a temporary database with one scope of N messages (people's messages routed to
the five agents, each answered, each answer's call recorded) and a few small other
scopes, then requests pages through the ASGI app in process (Starlette's TestClient:
routing, the store's reads, template rendering, no network) and prints the p50 and p95
of each, wall clock and CPU time: the newest page of the timeline, a page deep in its
history, the scopes list, one call's context and the scope's charts.

The last calls keep what they sent (as the hub records it), so the call page does the
whole rebuild and digest check. Wall-clock figures include whatever else the machine runs
(a preempted request waits a whole time slice); the CPU figures show the work itself.
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from scopehub.memory import CallRecord, Store

__all__ = ["bench_console", "console_bench_command", "fill_store"]

SCOPE = "user:1"
OTHER_SCOPES = ("user:2", "user:3", "group:-1009")
AGENTS = ("tasks", "notes", "inbox", "reminders", "general")
VIAS = ("local", "local", "sticky", "sticky", "reply", "explicit", "llm")
_WORDS = ["add", "buy", "milk", "to", "my", "tasks", "remind", "me", "to", "call", "Anna", "tomorrow", "at", "nine", "here", "is", "an", "email", "from", "my", "boss", "about", "the", "quarterly", "report", "deadline", "friday", "note", "that", "the", "wifi", "password", "is", "on", "the", "fridge", "what", "did", "I", "say", "about", "the", "trip"]
REAL_CALLS = 50  # the newest calls keep what they sent, built by the real context builder


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def fill_store(store: Store, messages: int, *, seed: int = 7, batch: int = 5000) -> dict[str, int]:
    """One scope of ``messages`` messages (half people's, half answers, each answer's call
    recorded) and three scopes of 100; returns the newest call's id and counts."""
    from scopehub.agents import discover_agents
    from scopehub.hub.context import agent_prompt, build_context
    from scopehub.hub.context.record import sent_record
    from scopehub.hub.context.tokens import get_tokenizer
    from scopehub.memory import NewMessage

    rng = random.Random(seed)
    prompts = {spec.name: agent_prompt(spec) for spec in discover_agents()}
    tokenizer = get_tokenizer()
    ts = time.time() - messages * 60.0
    last_call = 0
    for scope, count in ((SCOPE, messages), *((s, 100) for s in OTHER_SCOPES)):
        done = 0
        while done < count:
            with store.transaction():  # one commit per batch; each append is a savepoint in it
                for _ in range(min(batch, count - done) // 2 or 1):
                    agent, via = rng.choice(AGENTS), rng.choice(VIAS)
                    ts += 30
                    asked = store.append(
                        NewMessage(scope=scope, role="user", text=_text(rng, rng.randint(4, 30)), ts=ts, agent=agent, via=via, sender="ann")
                    )
                    reply = store.append(
                        NewMessage(scope=scope, role="agent", text=_text(rng, rng.randint(6, 40)), ts=ts + 2, agent=agent, via=via, reply_to=asked.id)
                    )
                    history, full = rng.randint(40, 400), rng.randint(900, 2600)
                    tokens = {"persona": 60, "rules": 25, "tools": 200, "facts": 40, "history": history, "message": 20}
                    tokens["total"] = sum(tokens.values())
                    extra: dict[str, Any] = {}
                    if scope == SCOPE and done >= count - 2 * REAL_CALLS:
                        recent = store.window(scope, 40, up_to=asked.id - 1)
                        context = build_context(
                            prompts[agent], recent, asked.text, tokenizer=tokenizer, facts_block="- email: ann@example.com",
                            scope=scope, sender="ann",
                        )  # fmt: skip
                        tokens, full = context.tokens, context.full_history_tokens
                        extra = {"sent": sent_record(context, text=asked.text, stored_text=asked.text, message_tokens=4000)}
                    call_id = store.record_call(
                        CallRecord(
                            scope=scope, agent=agent, message_id=asked.id, via=via, also_sees=(), tokens=tokens,
                            full_history_tokens=max(full, tokens["total"]), model="bench", prompt_tokens=tokens["total"],
                            completion_tokens=30, latency_ms=900.0, ts=ts + 2, extra=extra,
                        )
                    )  # fmt: skip
                    if scope == SCOPE:
                        last_call = call_id
                    done += 2
                    del reply
    return {"messages": store.count_messages(SCOPE), "last_call": last_call}


def _percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))] if ordered else 0.0


def _time(get: Callable[[str], Any], path: str, runs: int) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU milliseconds of each request (CPU: this process, every thread)."""
    get(path)  # warm: templates compiled, pages of the database file cached
    wall, cpu = [], []
    for _ in range(runs):
        started, started_cpu = time.perf_counter(), time.process_time()
        response = get(path)
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
        if response.status_code != 200:
            raise click.ClickException(f"{path} answered {response.status_code}")
    return wall, cpu


def bench_console(db: Path, messages: int, runs: int) -> list[dict[str, Any]]:
    """Fill ``db`` and time the console's pages; one row per page with p50/p95 in ms."""
    from starlette.testclient import TestClient

    from scopehub.hub.console import ConsoleConfig, create_app
    from scopehub.hub.settings import load_settings

    store = Store(db)
    started = time.perf_counter()
    filled = fill_store(store, messages)
    fill_s = time.perf_counter() - started
    settings = load_settings(db=str(db))
    client = TestClient(create_app(ConsoleConfig(store=store, settings=settings)), base_url="http://127.0.0.1")
    middle = filled["messages"] // 2
    pages = {
        "timeline (newest 50)": f"/scopes/{SCOPE}",
        "timeline (deep page, keyset)": f"/scopes/{SCOPE}?before={middle}",
        "scopes list": "/",
        "call context (recorded)": f"/scopes/{SCOPE}/calls/{filled['last_call']}",
        "scope charts": f"/scopes/{SCOPE}/charts",
    }
    rows = []
    for name, path in pages.items():
        wall, cpu = _time(client.get, path, runs)
        rows.append(
            {
                "page": name,
                "path": path,
                "runs": runs,
                "p50_ms": round(statistics.median(wall), 1),
                "p95_ms": round(_percentile(wall, 0.95), 1),
                "cpu_p50_ms": round(statistics.median(cpu), 1),
                "cpu_p95_ms": round(_percentile(cpu, 0.95), 1),
            }
        )
    store.close()
    rows.insert(0, {"messages": filled["messages"], "fill_seconds": round(fill_s, 1)})
    return rows


@click.command("console")
@click.option("--messages", default=100_000, show_default=True, type=click.IntRange(2, 10_000_000), help="messages in the long scope")
@click.option("--runs", default=20, show_default=True, type=click.IntRange(1, 10_000), help="timed requests per page")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None, help="keep the filled database here (default: a temporary file)")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def console_bench_command(messages: int, runs: int, db_path: str | None, as_json: bool) -> None:
    """Time the console's pages on a scope of MESSAGES messages: p50/p95 per page (target: timeline under 300 ms)."""
    with tempfile.TemporaryDirectory(prefix="console_bench_") as tmp:
        db = Path(db_path) if db_path else Path(tmp) / "bench.db"
        if db.exists():
            raise click.ClickException(f"{db} exists: the bench fills a new database")
        rows = bench_console(db, messages, runs)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    head = rows[0]
    click.echo(f"{head['messages']:,} messages in {SCOPE} (+3 scopes of 100), filled in {head['fill_seconds']} s; {runs} runs per page")
    for row in rows[1:]:
        click.echo(
            f"  {row['page']:<30} p50 {row['p50_ms']:>7.1f} ms   p95 {row['p95_ms']:>7.1f} ms"
            f"   (CPU p50 {row['cpu_p50_ms']:>6.1f} ms, p95 {row['cpu_p95_ms']:>6.1f} ms)"
        )

"""Benchmark of the web console: how fast every page opens on a long scope, and how many
clicks an operator needs to find a message by a word or by a date.

Fills a temporary database with one scope of N messages (people's messages routed to the
five agents, each answered, each answer's call recorded; some calls failed, some used
tools round by round, some went through the LLM router, some through the fact extractor)
and a few small other scopes, then requests pages through the ASGI app in process
(Starlette's TestClient: routing, the store's reads, template rendering, no network) and
prints the p50 and p95 of each, wall clock and CPU time, with the load average.

Every call keeps a record of what it sent the size of a real one; the newest ones are real
(built by the context builder), so the call page does the whole rebuild and digest check.
Wall-clock figures include whatever else the machine runs (a preempted request waits a
whole time slice); the CPU figures show the work itself.
"""

from __future__ import annotations

import json
import os
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click

from scopehub.memory import CallRecord, NewMessage, Store

from . import _report

__all__ = ["Filled", "bench_console", "console_bench_command", "fill_store"]

SCOPE = "user:1"
OTHER_SCOPES = ("user:2", "user:3", "group:-1009")
AGENTS = ("tasks", "notes", "inbox", "reminders", "general")
VIAS = ("local", "local", "sticky", "sticky", "reply", "explicit", "llm")
_WORDS = tuple(
    ["add", "buy", "milk", "to", "my", "tasks", "remind", "me", "to", "call", "Anna", "tomorrow", "at", "nine", "here", "is", "an", "email", "from", "my", "boss", "about", "the", "quarterly", "report", "deadline", "friday", "note", "that", "the", "wifi", "password", "is", "on", "the", "fridge", "what", "did", "I", "say", "about", "the", "trip", "dentist", "invoice", "plumber", "garage", "tickets", "concert", "passport", "renewal", "flight", "hotel", "budget", "meeting", "agenda", "slides", "laptop", "charger", "gym", "birthday", "present", "recipe", "lasagne", "garden", "tomatoes", "insurance", "bank", "transfer", "rent", "landlord"]
)
NEEDLE = "zanzibar"  # one message of the long scope, a third of the way in, holds this word
REAL_CALLS = 50  # the newest calls keep what they sent, built by the real context builder
FAILED_EVERY, TOOLS_EVERY, EXTRACTOR_EVERY = 50, 7, 9
_SECRET_ERROR = "provider returned 503 Service Unavailable for key sk-bench-0123456789abcdefXYZ"


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


class Filled(dict):
    """What :func:`fill_store` made: ``messages``, ``last_call``, ``needle_id``, ``needle_day``, ``needle_moment``,
    ``tool_call``, ``router_call``, ``extractor_call``, ``failed_call``, ``middle``."""


def _filler_record(rng: random.Random, history: Sequence[int]) -> dict[str, Any]:
    # What a real call record keeps, at its size: history ids, a section by reference, digests.
    return {
        "v": 1, "sections": {"facts": {"same_as": 1, "sha": f"{rng.getrandbits(64):016x}"}}, "history": list(history),
        "optional_tools": False, "message_tokens": 4000, "sha": f"{rng.getrandbits(256):064x}", "stable_sha": f"{rng.getrandbits(256):064x}",
    }  # fmt: skip


def _hub_calls(store: Store, rng: random.Random, scope: str, asked: Any, agent: str, via: str, ts: float, n: int) -> dict[str, int]:
    """The LLM router's call before an ``llm`` route, the extractor's after some messages."""
    made: dict[str, int] = {}
    if via == "llm":
        made["router_call"] = store.record_call(
            CallRecord(
                scope=scope, agent="hub", message_id=asked.id, via="router", also_sees=(), tokens={}, full_history_tokens=0,
                model="bench-router", prompt_tokens=310, completion_tokens=12, latency_ms=420.0, ts=ts + 1,
                extra={"prompt": [{"role": "system", "content": "Route the new message to one agent. Reply with JSON only."},
                                  {"role": "user", "content": f"New message: {asked.text}"}],
                       "answer": json.dumps({"agent": agent}), "route": {"agent": agent, "also_sees": []},
                       "local": {"agent": rng.choice(AGENTS), "via": "local"}},
            )
        )  # fmt: skip
    if n % EXTRACTOR_EVERY == 0:
        fact = f"User's {rng.choice(_WORDS)} is {rng.choice(_WORDS)}"
        made["extractor_call"] = store.record_call(
            CallRecord(
                scope=scope, agent="hub", message_id=asked.id, via="extractor", also_sees=(), tokens={}, full_history_tokens=0,
                model="bench-extractor", prompt_tokens=480, completion_tokens=40, latency_ms=650.0, ts=ts + 3,
                extra={"prompt": {"system_sha": "0" * 16, "user": f"Known facts: none\nMessage: {json.dumps(asked.text)}"},
                       "answer": json.dumps({"facts": [{"text": fact, "op": "add"}]}), "proposed": [{"text": fact, "kind": "other", "key": None, "op": "add"}],
                       "refused": [{"text": fact, "kind": "other", "key": None, "op": "add", "reason": "not in the person's own words"}],
                       "own_sentences": False, "decisions": []},
            )
        )  # fmt: skip
    return made


def fill_store(store: Store, messages: int, *, seed: int = 7, batch: int = 5000, scope: str = SCOPE, others: Sequence[str] = OTHER_SCOPES) -> Filled:
    """One scope of ``messages`` messages (half people's, half answers, each answer's call
    recorded) and small scopes of 100; returns ids of what the pages need."""
    from scopehub.agents import discover_agents
    from scopehub.hub.context import agent_prompt, build_context
    from scopehub.hub.context.record import sent_record
    from scopehub.hub.context.tokens import get_tokenizer

    rng = random.Random(seed)
    prompts = {spec.name: agent_prompt(spec) for spec in discover_agents()}
    tokenizer = get_tokenizer()
    ts = time.time() - messages * 60.0  # a message a minute: 100,000 span about ten weeks
    made = Filled(messages=0, last_call=0)
    for name, count in ((scope, messages), *((s, 100) for s in others)):
        done = pairs = 0
        recent: list[int] = []
        while done < count:
            with store.transaction():  # one commit per batch; each append is a savepoint in it
                for _ in range(min(batch, count - done) // 2 or 1):
                    agent, via = rng.choice(AGENTS), rng.choice(VIAS)
                    ts += 120
                    n, pairs = pairs, pairs + 1
                    text = _text(rng, rng.randint(4, 30))
                    if name == scope and n == count // 6:
                        text = f"the {NEEDLE} ferry tickets are in the blue folder"
                    asked = store.append(NewMessage(scope=name, role="user", text=text, ts=ts, agent=agent, via=via, sender="ann"))
                    if NEEDLE in text:
                        made["needle_id"] = asked.id
                        made["needle_day"] = datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d")
                        made["needle_moment"] = datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M")
                    if name == scope and n == count // 4:
                        made["middle"] = asked.id
                    # A failed call leaves its message unanswered (the person got an apology); the last
                    # message, when one place is left, too: the scope holds exactly ``count``.
                    failed = n % FAILED_EVERY == FAILED_EVERY - 1 or count - done == 1
                    if not failed:
                        store.append(NewMessage(scope=name, role="agent", text=_text(rng, rng.randint(6, 40)), ts=ts + 2, agent=agent, via=via, reply_to=asked.id))
                    hub_calls = _hub_calls(store, rng, name, asked, agent, via, ts, n)
                    if name == scope:
                        made.update(hub_calls)
                    history, full = rng.randint(40, 400), rng.randint(900, 2600)
                    tokens = {"persona": 60, "rules": 25, "tools": 200, "facts": 40, "history": history, "message": 20}
                    tokens["total"] = sum(tokens.values())
                    extra: dict[str, Any] = {"sent": _filler_record(rng, recent[-12:])}
                    if n % TOOLS_EVERY == 0 and not failed:
                        extra["tool_calls"] = [
                            {"name": "add_task", "arguments": json.dumps({"title": text[:40], "due": "friday"}), "ok": True, "result": f"Added #{n} {text[:40]}", "round": 0},
                            {"name": "list_tasks", "arguments": "{}", "ok": True, "result": "#1 buy milk\n#2 call Anna", "round": 1},
                        ]  # fmt: skip
                        extra["rounds"] = [
                            {"latency_ms": 610.0, "prompt_tokens": 520, "completion_tokens": 22, "tool_calls": 1},
                            {"latency_ms": 480.0, "prompt_tokens": 560, "completion_tokens": 18, "tool_calls": 1},
                            {"latency_ms": 530.0, "prompt_tokens": 600, "completion_tokens": 30, "tool_calls": 0},
                        ]  # fmt: skip
                    if name == scope and done >= count - 2 * REAL_CALLS:
                        context = build_context(
                            prompts[agent], store.window(name, 40, up_to=asked.id - 1), asked.text, tokenizer=tokenizer,
                            facts_block="- email: ann@example.com", scope=name, sender="ann",
                        )  # fmt: skip
                        tokens, full = context.tokens, context.full_history_tokens
                        extra["sent"] = sent_record(context, text=asked.text, stored_text=asked.text, message_tokens=4000)
                    call_id = store.record_call(
                        CallRecord(
                            scope=name, agent=agent, message_id=asked.id, via=via, also_sees=(), tokens=tokens,
                            full_history_tokens=max(full, tokens["total"]), model="bench", prompt_tokens=tokens["total"],
                            completion_tokens=30, latency_ms=rng.uniform(600, 2400), ts=ts + 2, extra=extra, ok=not failed,
                            error_class="ModelUnavailable" if failed else None, error_message=_SECRET_ERROR if failed else None,
                            cost=0.00012,
                        )
                    )  # fmt: skip
                    recent.append(asked.id)
                    if name == scope:
                        made["last_call"] = call_id
                        if failed:
                            made["failed_call"] = call_id
                        if "tool_calls" in extra:
                            made["tool_call"] = call_id
                    done += 1 if failed else 2
                    if done >= count:
                        break
    made["messages"] = store.count_messages(scope)
    return made


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
        if response.status_code not in (200, 303):
            raise click.ClickException(f"{path} answered {response.status_code}")
    return wall, cpu


def _pages(filled: Filled) -> dict[str, str]:
    s = f"/scopes/{SCOPE}"
    return {
        "scopes list (by last activity)": "/",
        "scopes list (by cost)": "/?sort=cost",
        "timeline (newest 50)": s,
        "timeline (deep page, keyset)": f"{s}?before={filled['middle']}",
        "timeline (oldest page)": f"{s}?after=0",
        "timeline (around a message)": f"{s}?around={filled['needle_id']}",
        "timeline (agent filter)": f"{s}?agent=notes",
        "timeline (route filter: llm)": f"{s}?via=llm&before={filled['middle']}",
        "timeline (failed calls)": f"{s}?failed=1",
        "timeline (used a tool)": f"{s}?tools=1",
        "timeline (one day)": f"{s}?from={filled['needle_day']}&to={filled['needle_day']}",
        "jump to a date (redirect)": f"{s}?go={filled['needle_day']}",
        "timeline (at a date and time)": f"{s}?after={filled['needle_id'] - 1}",
        "jump to a message id (redirect)": f"{s}?go=%23{filled['needle_id']}",
        "search (a word)": f"{s}/search?q={NEEDLE}",
        "search (common words)": f"{s}/search?q=quarterly+report+deadline",
        "search (words and a date)": f"{s}/search?q=tickets+on+{filled['needle_day']}",
        "call (recorded context)": f"{s}/calls/{filled['last_call']}",
        "call (tool loop)": f"{s}/calls/{filled['tool_call']}",
        "call (failed)": f"{s}/calls/{filled['failed_call']}",
        "call (LLM router)": f"{s}/calls/{filled['router_call']}",
        "call (fact extractor)": f"{s}/calls/{filled['extractor_call']}",
        "memory": f"{s}/memory",
        "scope charts": f"{s}/charts",
        "all charts": "/charts",
        "replay a message": f"{s}/messages/{filled['needle_id']}/replay",
        "fact form": f"{s}/facts/new",
        "sandbox": "/sandbox",
    }


def clicks_to_find(get: Callable[[str], Any], filled: Filled) -> dict[str, Any]:
    """An operator's path from the scopes list to the needle message: by its word, by its day.

    A click is one followed link or one submitted form; the last page must show the message.
    """
    home = get("/").text
    timeline = re.search(rf'href="(/scopes/{re.escape(SCOPE)})"', home)
    if timeline is None:
        raise click.ClickException("the scopes list does not link the long scope")
    target = f'id="m{filled["needle_id"]}"'
    page = get(timeline.group(1)).text  # click 1: the scope
    search = re.search(r'<form class="finder" method="get" action="([^"]+/search)"', page)
    found = get(f"{search.group(1)}?q={NEEDLE}").text if search else ""  # click 2: search the word
    went = get(f"{timeline.group(1)}?go={quote(filled['needle_moment'])}")  # click 2: go to when it was written
    day = get(went.headers["location"].split("#")[0]).text if went.status_code == 303 else ""
    return {"by_word": 2 if target in found else None, "by_date": 2 if target in day else None}


def bench_console(db: Path, messages: int, runs: int) -> list[dict[str, Any]]:
    """Fill ``db`` and time the console's pages; one row per page with p50/p95 in ms."""
    from starlette.testclient import TestClient

    from scopehub.hub.app import build_hub
    from scopehub.hub.console import ConsoleConfig, create_app
    from scopehub.hub.settings import load_settings

    store = Store(db)
    started = time.perf_counter()
    filled = fill_store(store, messages)
    fill_s = time.perf_counter() - started
    settings = load_settings(db=str(db), console_token="")
    hub = build_hub(settings, store=store, model_required=False)
    config = ConsoleConfig(store=store, settings=settings, allow_writes=True, hub=hub)
    client = TestClient(create_app(config), base_url="http://127.0.0.1", follow_redirects=False)
    # The very first request reads every call into the tally (later ones read only what is new):
    # its cost once, templates compiled cold too.
    started, started_cpu = time.perf_counter(), time.process_time()
    client.get("/")
    first = [(time.perf_counter() - started) * 1000], [(time.process_time() - started_cpu) * 1000]
    rows: list[dict[str, Any]] = [
        {"page": "scopes list (first request after start)", "path": "/", "runs": 1,
         "p50_ms": round(first[0][0], 1), "p95_ms": round(first[0][0], 1), "cpu_p50_ms": round(first[1][0], 1), "cpu_p95_ms": round(first[1][0], 1)}
    ]  # fmt: skip
    for name, path in _pages(filled).items():
        wall, cpu = _time(client.get, path, runs)
        rows.append(
            {
                "page": name, "path": path, "runs": runs,
                "p50_ms": round(statistics.median(wall), 1), "p95_ms": round(_percentile(wall, 0.95), 1),
                "cpu_p50_ms": round(statistics.median(cpu), 1), "cpu_p95_ms": round(_percentile(cpu, 0.95), 1),
            }
        )  # fmt: skip
    clicks = clicks_to_find(client.get, filled)
    store.close()
    head = {"messages": filled["messages"], "fill_seconds": round(fill_s, 1), "load": [round(x, 2) for x in os.getloadavg()], "clicks": clicks}
    return [head, *rows]


@click.command("console")
@click.option("--messages", default=100_000, show_default=True, type=click.IntRange(300, 10_000_000), help="messages in the long scope")
@click.option("--runs", default=20, show_default=True, type=click.IntRange(1, 10_000), help="timed requests per page")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None, help="keep the filled database here (default: a temporary file)")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@_report.report_option
def console_bench_command(messages: int, runs: int, db_path: str | None, as_json: bool) -> None:
    """Time every console page on a scope of MESSAGES messages: p50/p95 per page (target: p95 under 150 ms),
    and the clicks from the scopes list to a message found by a word and by a date."""
    with tempfile.TemporaryDirectory(prefix="console_bench_") as tmp:
        db = Path(db_path) if db_path else Path(tmp) / "bench.db"
        if db.exists():
            raise click.ClickException(f"{db} exists: the bench fills a new database")
        rows = bench_console(db, messages, runs)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    head = rows[0]
    load = ", ".join(f"{x:.2f}" for x in head["load"])
    click.echo(f"{head['messages']:,} messages in {SCOPE} (+3 scopes of 100), filled in {head['fill_seconds']} s; load average {load} after it")
    click.echo(
        _report.format_table(
            ["page", "p50 ms", "p95 ms", "CPU p50 ms", "CPU p95 ms", "p95 < 150 ms"],
            [
                [row["page"], row["p50_ms"], row["p95_ms"], row["cpu_p50_ms"], row["cpu_p95_ms"], "yes" if row["p95_ms"] < 150 else "no"]
                for row in rows[1:]
            ],
            title=f"Console pages on a {head['messages']:,}-message scope: {runs} timed requests each, after one warm-up",
        )
    )
    said = {k: f"{v} clicks" if v else "not found" for k, v in head["clicks"].items()}
    click.echo(f"Finding a message from the scopes list: by a word {said['by_word']}, by its date and time {said['by_date']}.")

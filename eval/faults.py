"""Faults and hostile input: nothing lost, nothing duplicated, nothing leaked, nothing crashes.

``agents-hub eval faults [--json OUT] [--quick] [--seed N] [--scenario NAME ...]``

Each scenario is a library function returning an :class:`Outcome`. The test suite runs
small versions (``tests/test_faults.py``); the command runs the heavy ones:

``crash_import``
    the real ``agents-hub import`` of 10,000 messages in a child process, SIGKILLed at
    random points (20 times, some during start-up): after each restart the file passes
    ``integrity_check`` and every message another connection saw committed before the
    kill is there exactly once, unaltered; a final run completes the rest.
``crash_handle``
    a child process handles 10,000 messages of 20 chats through ``Hub.handle`` (fast fake
    model) and prints each one once ``handle`` returned (acknowledged). It is SIGKILLed
    at random points (20 times) and restarted with every unacknowledged message re-sent
    plus the last acknowledged ones of each chat (at-least-once delivery, same ext_id):
    acknowledged messages and their replies are there exactly once; the last run
    completes the rest.
``concurrency`` / ``concurrency_litellm``
    50 chats x 40 messages submitted at once, interleaved across chats, to a model with
    random latency (0-20 ms: a ``FunctionModel``, or the loopback OpenAI fake through the
    real litellm client), while a second process imports into the same file: order kept
    per chat, one reply per message, no "database is locked".
``first_open``
    several processes opening a new database file at the same moment (a bot and an
    import started together): each one opens it, the file passes ``integrity_check``.
``model_faults``
    the loopback OpenAI fake through ``LiteLLMModel``: timeouts, 429 with Retry-After,
    500s, malformed bodies, a junk / slow / failing LLM router, tool calls with bad
    arguments or to unknown tools, an endless tool loop. Each must give a clear reply
    within a bound (measured) with the person's message stored.
``hostile_input``
    hypothesis-generated text through the router, the LLM router's prompt and parser,
    the context builder, the store and every search method (beyond 5,000 texts each
    text goes to one method in turn), the fact functions and, every tenth text, the hub
    itself (plain messages, /remember, /forget, /search, fact extraction); plus one
    100,000-character message: stored whole, the model gets it trimmed to its budget.
``isolation``
    100 scopes with the same words and a different secret each: no search (every
    method), fact, context, task, reminder, note, email, tool or command returns or
    changes another scope's data; a group never sees a member's private facts.
``fail_open``
    search raising, the facts block raising, fact extraction raising: the agent still
    answers without that part of its context, and the failure is logged.
``worker_kills``
    three real webhook workers on one PostgreSQL database answer chats that keep writing,
    behind a round-robin dispatcher that re-posts what a worker refused; one worker is
    SIGKILLed 10 times (and restarted), PostgreSQL is restarted once mid-run, reminders
    fall due throughout: no message lost, answered twice or out of order, no reminder
    fired twice (:mod:`.faults_workers`; skipped, with the reason, without a server).

Each scenario reports what it *verified*, in its own units (``verified``: unit -> count;
a count says what was checked and found right, never what was planned): SIGKILLs
survived (the file reopened clean and every committed message was there), messages
verified present exactly once (and answered once), messages answered once in order, the
second writer's messages verified present, simultaneous first opens, model faults
answered, hostile texts tried, scope pairs checked, failures answered and logged. Units
differ, so there is no grand total. Then what went wrong, per scenario: ``lost`` (a
stored message, reply or text missing or altered), ``duplicated`` (stored or answered
twice), ``leaked`` (another scope's data returned or changed), ``crashed`` (an exception
escaped, no clear reply within the bound, or another promise of the scenario broke:
``notes`` says which). Each of those must be 0 in every scenario; the command exits with
status 1 otherwise.

Hostile text comes from hypothesis (:func:`hostile_text`): ``@given(hostile_text())``
with ``settings(max_examples=N, deadline=None, database=None, phases=[Phase.generate])``
and ``@seed(N)``, called as a plain function. Every target runs inside the body under its
own ``try``, so a failure is counted and the run goes on (no shrinking, no stop at the
first failure). The loopback OpenAI fake is the test suite's (``tests/fakes``): the
scenarios that use it need a source checkout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import click

from scopehub.agents import AgentRegistry, ToolContext, discover_agents, search_memory
from scopehub.hub.context import build_context
from scopehub.hub.context.builder import with_sender
from scopehub.hub.errors import RouterError
from scopehub.hub.facts import (
    BLOCK_HEADER,
    FactKeeper,
    forget,
    infer_key,
    is_explicit,
    looks_factual,
    normalise_key,
    parse_extraction,
    quote,
    remember,
)
from scopehub.hub.facts import current as current_facts
from scopehub.hub.models import (
    ChatModel,
    LiteLLMModel,
    ModelResponse,
    ToolCall,
)
from scopehub.hub.models.testing import FunctionModel, ScriptedModel
from scopehub.hub.orchestrator import (
    MODEL_DOWN_REPLY,
    MODEL_FAILED_REPLY,
    NO_ANSWER_REPLY,
    Deps,
    Hub,
    Inbound,
    Reply,
)
from scopehub.hub.routing import detect_explicit, route
from scopehub.hub.routing.llm_router import build_router_messages, parse_router_answer
from scopehub.hub.runtime import STEP_LIMIT_REPLY, run_tool
from scopehub.hub.settings import Settings
from scopehub.memory import (
    SEARCH_METHODS,
    Message,
    NewMessage,
    Store,
    add_reminder,
    add_task,
    add_vault_item,
    get_reminder,
    get_task,
    get_vault_item,
    list_reminders,
    list_tasks,
    list_vault_items,
)

from . import _report
from .faults_maildir import MAILDIR_FUNCTIONS, MAILDIR_HEAVY, MAILDIR_QUICK, MAILDIR_SCENARIOS

__all__ = [
    "SCENARIOS",
    "FaultCase",
    "HostileProbe",
    "Outcome",
    "concurrency",
    "crash_handle",
    "crash_import",
    "echo_model",
    "fail_open",
    "fault_cases",
    "faults_command",
    "first_open",
    "hostile_input",
    "hostile_text",
    "huge_message",
    "isolation",
    "make_hub",
    "model_faults",
    "run_faults",
]

log = logging.getLogger(__name__)

COUNTS = ("lost", "duplicated", "leaked", "crashed")
# What the scenarios verify, each in its own unit (Outcome.verified).
KILLS_SURVIVED = "SIGKILLs survived"
PRESENT_ONCE = "messages verified present exactly once"
ANSWERED_ONCE = "messages verified stored and answered exactly once"
IN_ORDER = "messages answered once, in order"
WRITER_PRESENT = "second writer's messages verified present"
FIRST_OPENS = "simultaneous first opens"
FAULTS_ANSWERED = "model faults answered"
HOSTILE_TRIED = "hostile texts tried"
HUGE_KEPT = "huge messages stored whole, trimmed for the model"
SCOPE_PAIRS = "scope pairs checked"
ITEMS_UNCHANGED = "other scopes' items attacked, unchanged"
FAILURES_ANSWERED = "failures answered and logged"
_MAX_NOTES = 30  # per scenario: enough to diagnose, short enough to read

# -- outcome ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one scenario verified and what went wrong (see the module docstring for the counts)."""

    name: str
    verified: dict[str, int] = field(default_factory=dict)  # unit -> how many were checked and right
    lost: int = 0
    duplicated: int = 0
    leaked: int = 0
    crashed: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # for tests; not in the JSON
    dropped_notes: int = 0

    @property
    def ok(self) -> bool:
        return not any(getattr(self, name) for name in COUNTS)

    @property
    def failures(self) -> int:
        """Everything that went wrong so far (to tell whether one check added any)."""
        return sum(getattr(self, name) for name in COUNTS)

    def verify(self, unit: str, n: int = 1) -> None:
        """Count ``n`` things of ``unit`` checked and found right."""
        self.verified[unit] = self.verified.get(unit, 0) + n

    def verified_text(self) -> str:
        return "; ".join(f"{n:,} {unit}" for unit, n in self.verified.items()) or "nothing"

    def note(self, text: str) -> None:
        if len(self.notes) < _MAX_NOTES:
            self.notes.append(text)
        else:
            self.dropped_notes += 1

    def fail(self, count: str, text: str, n: int = 1) -> None:
        """Count ``n`` failures of kind ``count`` and say why."""
        setattr(self, count, getattr(self, count) + n)
        self.note(f"{count}: {text}")

    def as_dict(self) -> dict[str, Any]:
        notes = list(self.notes)
        if self.dropped_notes:
            notes.append(f"... and {self.dropped_notes} more notes")
        return {
            "verified": dict(self.verified),
            **{name: getattr(self, name) for name in COUNTS},
            "seconds": round(self.seconds, 2),
            "notes": notes,
        }


@contextlib.contextmanager
def _timed(outcome: Outcome) -> Iterator[Outcome]:
    started = time.perf_counter()
    try:
        yield outcome
    finally:
        outcome.seconds += time.perf_counter() - started


# -- shared pieces ------------------------------------------------------------------------------

EXTRACTOR_MARK = "You extract lasting facts"  # how a fake model tells the fact extractor's call apart
_PHRASES = (
    "add buy milk to my tasks",
    "remind me tomorrow at 9 to call the bank",
    "here is an email from my boss: the report is due friday",
    "save a note: the wifi password is on the fridge",
    "tell me a joke",
    "what is on my todo list",
    "yes, at 7pm",
    "draft a reply to that email",
)


def hub_settings(**overrides: Any) -> Settings:
    """Settings for a scenario: the defaults (and HUB_* variables) plus ``overrides``, never a ``.env`` file."""
    return Settings(_env_file=None, **overrides)


@lru_cache(maxsize=1)
def _registry() -> AgentRegistry:
    return discover_agents()


def make_hub(
    store: Store,
    model: ChatModel | None,
    *,
    router_model: ChatModel | None = None,
    facts: bool | Any = False,
    **settings: Any,
) -> Hub:
    """A hub over the real agents with ``model``; ``facts=True`` adds a FactKeeper on the same model."""
    keeper = FactKeeper(store, model=model) if facts is True else (facts or None)
    deps = Deps(store=store, settings=hub_settings(**settings), model=model, router_model=router_model, facts=keeper)
    return Hub(deps, _registry())


def last_user_text(messages: Sequence[dict[str, Any]]) -> str:
    """The content of the last user message of a provider conversation."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def is_extraction(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether a model call is the fact extractor's."""
    return bool(messages) and str(messages[0].get("content") or "").startswith(EXTRACTOR_MARK)


def echo_model(*, max_latency: float = 0.0, seed: int = 0) -> FunctionModel:
    """A fast fake model: after 0..``max_latency`` s it answers ``re: <the message>``; extraction finds nothing."""
    rng = random.Random(seed)

    async def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        # Always yield to the loop, so concurrent chats really interleave.
        await asyncio.sleep(rng.uniform(0.0, max_latency) if max_latency > 0 else 0)
        if is_extraction(messages):
            return '{"facts": []}'
        return "re: " + last_user_text(messages)[:200]

    return FunctionModel(answer, name="echo")


def _child_env() -> dict[str, str]:
    """The environment of child processes: no developer settings, offline litellm, the checkout root on the path.

    The root makes ``tests.fakes`` importable; ``scopehub`` itself comes from the interpreter's
    install, as in the parent (the test suite checks that this is the checkout).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "TELEGRAM_")) or k == "HUB_TEST_GUARD"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _fake_openai() -> Any:
    """The test suite's loopback OpenAI-compatible fake (``tests/fakes/openai_server.py``)."""
    try:
        from tests.fakes import openai_server
    except ImportError:
        root = Path(__file__).resolve().parents[1]
        if not (root / "tests" / "fakes" / "openai_server.py").exists():
            raise click.ClickException("this scenario needs the loopback fake in tests/fakes (a source checkout)") from None
        sys.path.insert(0, str(root))
        from tests.fakes import openai_server
    return openai_server


@contextlib.contextmanager
def _quiet_litellm() -> Iterator[None]:
    """litellm prints help banners and logs every provider error: not what a report should show."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    previous = litellm.suppress_debug_info
    litellm.suppress_debug_info = True
    logger = logging.getLogger("LiteLLM")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        litellm.suppress_debug_info = previous
        logger.setLevel(level)


class _Records(logging.Handler):
    """Keeps log records (the fail-open scenario checks that failures are logged)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def text(self) -> str:
        return "\n".join(f"{r.name} {r.levelname} {r.getMessage()}" for r in self.records)


@contextlib.contextmanager
def _capture_logs(name: str = "scopehub.hub") -> Iterator[_Records]:
    logger = logging.getLogger(name)
    handler = _Records()
    level = logger.level
    logger.setLevel(logging.INFO)  # tool failures are logged at INFO
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


# -- crash safety -------------------------------------------------------------------------------

_WORDS = ("milk", "bank", "report", "friday", "invoice", "dentist", "budget", "wifi", "garden", "flight")


def _write_log(path: Path, n: int, scopes: Sequence[str], seed: int) -> dict[tuple[str, str], str]:
    """A canonical JSONL chat log of ``n`` messages over ``scopes``; returns (scope, id) -> text."""
    rng = random.Random(seed)
    expected: dict[tuple[str, str], str] = {}
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            scope = scopes[i % len(scopes)]
            turn = i // len(scopes)
            ext_id = f"m{i}"
            text = f"message {i} about the {rng.choice(_WORDS)} and the {rng.choice(_WORDS)}"
            record: dict[str, Any] = {"id": ext_id, "scope": scope, "role": "user" if turn % 2 == 0 else "assistant", "text": text, "ts": 1_700_000_000 + i}
            if turn % 2:
                record["agent"] = "tasks"
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            expected[(scope, ext_id)] = text
    return expected


class _Observer:
    """A second connection that reads what is committed (WAL readers never block the writer)."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.conn: sqlite3.Connection | None = None

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        if self.conn is None:
            if not self.db.exists():
                return []
            self.conn = sqlite3.connect(self.db, timeout=30, isolation_level=None)
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []  # killed or still before the schema
            raise

    def count(self, scope: str | None = None) -> int:
        if scope is None:
            rows = self._query("SELECT count(*) FROM messages WHERE ext_id IS NOT NULL")
        else:
            rows = self._query("SELECT count(*) FROM messages WHERE scope = ?", (scope,))
        return rows[0][0] if rows else 0

    def snapshot(self) -> dict[tuple[str, str], str]:
        return {(s, e): t for s, e, t in self._query("SELECT scope, ext_id, text FROM messages WHERE ext_id IS NOT NULL")}

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _reopen(db: Path, out: Outcome, label: str) -> Store | None:
    """Open the file as a restarted process would (migrations included) and check its integrity."""
    try:
        store = Store(db)
    except Exception as exc:
        out.fail("crashed", f"{label}: reopening the database failed: {exc}")
        return None
    try:
        check = store.integrity_check()
    except sqlite3.DatabaseError as exc:
        check = f"{type(exc).__name__}: {exc}"
    if check != "ok":
        out.fail("crashed", f"{label}: integrity_check says {check[:300]!r}")
    return store


def _check_import(
    db: Path, acknowledged: dict[tuple[str, str], str], expected: dict[tuple[str, str], str], out: Outcome, label: str
) -> tuple[int, int]:
    """After a restart: every acknowledged message present once and unaltered.

    Returns how many messages are there, and how many acknowledged ones are there exactly
    once and unaltered.
    """
    store = _reopen(db, out, label)
    if store is None:
        return 0, 0
    try:
        rows = store.query("SELECT scope, ext_id, text FROM messages")
    finally:
        store.close()
    counts = Counter((scope, ext_id) for scope, ext_id, _ in rows)
    texts = {(scope, ext_id): text for scope, ext_id, text in rows}
    extra = sum(n - 1 for n in counts.values() if n > 1)
    if extra:
        out.fail("duplicated", f"{label}: {extra} messages stored more than once", extra)
    missing = [key for key in acknowledged if key not in texts]
    if missing:
        out.fail("lost", f"{label}: {len(missing)} committed messages missing after the restart, e.g. {missing[:3]}", len(missing))
    altered = [key for key, text in acknowledged.items() if key in texts and texts[key] != text]
    if altered:
        out.fail("lost", f"{label}: {len(altered)} messages altered, e.g. {altered[:3]}", len(altered))
    unknown = [key for key in texts if key not in expected]
    if unknown:
        out.fail("crashed", f"{label}: {len(unknown)} rows that were never imported, e.g. {unknown[:3]}")
    once = sum(1 for key, text in acknowledged.items() if counts.get(key) == 1 and texts[key] == text)
    return len(texts), once


def crash_import(workdir: Path, *, messages: int = 10_000, kills: int = 20, batch: int = 100, seed: int = 0) -> Outcome:
    """SIGKILL the real ``agents-hub import`` at random points; restarts keep every committed message once.

    When an import completes before all kills are spent, another round starts on a new file.
    """
    out = Outcome("crash_import", verified={KILLS_SURVIVED: 0, PRESENT_ONCE: 0})
    with _timed(out):
        rng = random.Random(seed)
        workdir.mkdir(parents=True, exist_ok=True)
        log_path = workdir / "crash_import.jsonl"
        expected = _write_log(log_path, messages, [*(f"user:{i}" for i in range(1, 6)), "group:-100"], seed)
        errors = workdir / "crash_import.stderr"
        done = early = runs = rounds = 0
        startup = 0.3  # seconds from spawn to the first commit; measured as runs go
        complete = True
        while done < kills:
            rounds += 1
            db = workdir / f"crash_import.{rounds}.db"
            command = [sys.executable, "-m", "scopehub.hub.cli", "--db", str(db), "import", str(log_path), "--batch", str(batch)]
            observer = _Observer(db)
            acknowledged: dict[tuple[str, str], str] = {}
            try:
                while done < kills:
                    before = observer.count()
                    if before >= messages:
                        break
                    with errors.open("ab") as err:
                        proc = subprocess.Popen(command, cwd=workdir, env=_child_env(), stdout=subprocess.DEVNULL, stderr=err)
                    runs += 1
                    spawned = time.perf_counter()
                    if rng.random() < 0.25:
                        # Anywhere in interpreter start-up, migrations and the first batch.
                        time.sleep(rng.uniform(0.0, startup))
                    else:
                        step = max(1, 2 * (messages - before) // (kills - done + 1))
                        target = before + rng.randint(1, step)
                        first = None
                        while proc.poll() is None and (count := observer.count()) < target:
                            if first is None and count > before:
                                first = time.perf_counter() - spawned
                            time.sleep(0.002)
                        startup = first if first is not None else startup
                        time.sleep(rng.uniform(0.0, 0.01))  # land anywhere inside the next batch
                    # Everything a reader sees committed now must survive the kill.
                    acknowledged.update(observer.snapshot())
                    killed = False
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGKILL)
                        done += 1
                        killed = True
                        early += len(acknowledged) == before
                    proc.wait()
                    failures = out.failures
                    if proc.returncode not in (0, -signal.SIGKILL):
                        out.fail("crashed", f"run {runs}: agents-hub import exited {proc.returncode}: {_tail(errors)}")
                    _check_import(db, acknowledged, expected, out, f"round {rounds}, kill {done}")
                    if killed and out.failures == failures:
                        out.verify(KILLS_SURVIVED)
            finally:
                observer.close()
            # A re-run completes the rest.
            final = subprocess.run(command, cwd=workdir, env=_child_env(), capture_output=True, text=True, timeout=900)
            runs += 1
            if final.returncode != 0:
                out.fail("crashed", f"round {rounds}: the completing run exited {final.returncode}: {final.stderr[-500:]}")
            present, once = _check_import(db, expected, expected, out, f"round {rounds}, after the completing run")
            out.verify(PRESENT_ONCE, once)
            if present != messages:
                complete = False
                out.fail("lost", f"round {rounds}: {messages - present} messages missing after the completing run", messages - present)
        out.note(
            f"{done} SIGKILLs at random points ({early} before their run committed anything) over {rounds} import(s) of "
            f"{messages:,} messages, {runs} runs of `agents-hub import --batch {batch}`; "
            + ("every import complete, each message once" if complete else "INCOMPLETE")
        )
        out.details.update(kills=done, rounds=rounds, complete=complete)
    return out


def _tail(path: Path, chars: int = 400) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-chars:].strip()
    except OSError:
        return ""


_HANDLE_CHILD = "from scopehub.eval.faults import _handle_child; _handle_child()"
CRASH_CLAIM_TTL = 0.5  # seconds: a killed child's claims on answers run out this soon


def _handle_child(argv: Sequence[str] | None = None) -> None:
    """The crash_handle child: handle the inbounds of a JSONL file, one task per chat.

    Prints ``scope ext_id reply_id`` (``-`` when nothing was answered) once ``handle`` returned:
    that line is the acknowledgement a transport would give.
    """
    db, inbox = list(argv if argv is not None else sys.argv[1:])[:2]
    items = [json.loads(line) for line in Path(inbox).read_text(encoding="utf-8").splitlines() if line.strip()]
    store = Store(db)
    model = echo_model()
    hub = make_hub(store, model, claim_ttl=CRASH_CLAIM_TTL)
    queues: dict[str, list[dict[str, str]]] = {}
    for item in items:
        queues.setdefault(item["scope"], []).append(item)

    async def chat(queue: list[dict[str, str]]) -> None:
        for item in queue:
            scope = item["scope"]
            reply = await hub.handle(Inbound(scope=scope, text=item["text"], ext_id=item["ext_id"], chat=scope.split(":", 1)[1], sender="p"))
            model.calls.clear()  # 10,000 recorded contexts would only cost memory
            reply_id = reply.reply_id if reply is not None and reply.reply_id is not None else "-"
            sys.stdout.write(f"{scope} {item['ext_id']} {reply_id}\n")
            sys.stdout.flush()

    async def main() -> None:
        # A killed run may have left answers claimed: once their claims run out (the TTL is
        # the only expiry), answer them as a restarted transport does.
        await asyncio.sleep(CRASH_CLAIM_TTL)
        await hub.answer_stalled(limit=100_000)
        await asyncio.gather(*(chat(queue) for queue in queues.values()))

    asyncio.run(main())
    store.close()


def _check_handled(
    db: Path, acked: dict[tuple[str, str], str], expected: dict[tuple[str, str], str], out: Outcome, label: str
) -> dict[str, int]:
    """After a restart: acknowledged messages (and the replies they got) present exactly once."""
    store = _reopen(db, out, label)
    if store is None:
        return {}
    try:
        users = store.query("SELECT id, scope, ext_id, text FROM messages WHERE role = 'user'")
        replies = store.query("SELECT id, reply_to FROM messages WHERE role = 'agent'")
    finally:
        store.close()
    by_key: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for message_id, scope, ext_id, text in users:
        by_key.setdefault((scope, ext_id), []).append((message_id, text))
    reply_count = Counter(reply_to for _, reply_to in replies)
    reply_of = {reply_id: reply_to for reply_id, reply_to in replies}
    extra = sum(len(rows) - 1 for rows in by_key.values() if len(rows) > 1)
    if extra:
        out.fail("duplicated", f"{label}: {extra} messages stored twice", extra)
    twice = sum(n - 1 for n in reply_count.values() if n > 1)
    if twice:
        out.fail("duplicated", f"{label}: {twice} messages answered more than once", twice)
    unknown = [key for key in by_key if key not in expected]
    if unknown:
        out.fail("crashed", f"{label}: unexpected user messages {unknown[:3]}")
    missing = altered = no_reply = 0
    for key, reply_id in acked.items():
        rows = by_key.get(key)
        if not rows:
            missing += 1
            continue
        message_id, text = rows[0]
        if text != expected[key]:
            altered += 1
        if reply_id != "-" and reply_of.get(int(reply_id)) != message_id:
            no_reply += 1
    if missing:
        out.fail("lost", f"{label}: {missing} acknowledged messages missing", missing)
    if altered:
        out.fail("lost", f"{label}: {altered} acknowledged messages altered", altered)
    if no_reply:
        out.fail("lost", f"{label}: {no_reply} acknowledged replies missing", no_reply)
    unanswered = sum(1 for rows in by_key.values() if reply_count.get(rows[0][0], 0) == 0)
    once = sum(
        1
        for key, rows in by_key.items()
        if len(rows) == 1 and key in expected and rows[0][1] == expected[key] and reply_count.get(rows[0][0], 0) == 1
    )
    return {"stored": len(by_key), "unanswered": unanswered, "once": once}


def crash_handle(
    workdir: Path, *, messages: int = 10_000, chats: int = 20, kills: int = 20, seed: int = 0, resend_acked: int = 2
) -> Outcome:
    """SIGKILL a process handling messages through the hub; re-sent messages are never stored or answered twice."""
    out = Outcome("crash_handle", verified={KILLS_SURVIVED: 0, ANSWERED_ONCE: 0})
    with _timed(out):
        rng = random.Random(seed)
        workdir.mkdir(parents=True, exist_ok=True)
        db = workdir / "crash_handle.db"
        inbox = workdir / "crash_handle.inbox.jsonl"
        errors = workdir / "crash_handle.stderr"
        scopes = [f"user:{i}" if i % 2 else f"group:-{i}" for i in range(1, chats + 1)]
        items = [
            {"scope": scopes[i % chats], "ext_id": f"t{i}", "text": f"{rng.choice(_PHRASES)} (#{i})"} for i in range(messages)
        ]
        expected = {(item["scope"], item["ext_id"]): item["text"] for item in items}
        acked: dict[tuple[str, str], str] = {}
        done = runs = resent = 0
        state: dict[str, int] = {}

        def record(line: str) -> None:
            parts = line.split()
            if len(parts) != 3:
                return
            key = (parts[0], parts[1])
            if key in acked and acked[key] != "-" and parts[2] != "-":
                out.fail("duplicated", f"{key} was answered again on redelivery")
            if acked.get(key, "-") == "-":
                acked[key] = parts[2]

        while True:
            pending = [item for item in items if (item["scope"], item["ext_id"]) not in acked]
            if not pending:
                break
            # At-least-once delivery: the last acknowledged messages of each chat come again too.
            again: list[dict[str, str]] = []
            if runs:
                for scope in scopes:
                    done_here = [item for item in items if item["scope"] == scope and (scope, item["ext_id"]) in acked]
                    again.extend(done_here[-resend_acked:])
            resent += len(again)
            inbox.write_text("".join(json.dumps(item) + "\n" for item in [*again, *pending]), encoding="utf-8")
            final = done >= kills
            with errors.open("ab") as err:
                proc = subprocess.Popen(
                    [sys.executable, "-c", _HANDLE_CHILD, str(db), str(inbox)],
                    cwd=workdir,
                    env=_child_env(),
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                )
            runs += 1
            assert proc.stdout is not None
            if not final:
                if rng.random() < 0.2:
                    time.sleep(rng.uniform(0.0, 0.6))  # start-up, migrations, the first messages
                else:
                    target = rng.randint(1, max(1, 2 * len(pending) // (kills - done + 1)))
                    for seen, line in enumerate(proc.stdout, start=1):
                        record(line)
                        if seen >= target:
                            break
                    time.sleep(rng.uniform(0.0, 0.004))  # land anywhere inside the next handle
            killed = False
            if not final and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                done += 1
                killed = True
            failures = out.failures
            # Lines printed before the kill were acknowledged too: handle had returned.
            for line in proc.stdout:
                record(line)
            proc.wait()
            if proc.returncode not in (0, -signal.SIGKILL):
                out.fail("crashed", f"run {runs}: the handling process exited {proc.returncode}: {_tail(errors)}")
                if final:
                    break
            state = _check_handled(db, acked, expected, out, f"after run {runs} ({done} kills)")
            if killed and out.failures == failures:
                out.verify(KILLS_SURVIVED)
        stored = state.get("stored", 0)
        out.verify(ANSWERED_ONCE, state.get("once", 0))
        if stored != messages:
            out.fail("lost", f"{messages - stored} messages never stored after the last run", messages - stored)
        out.note(
            f"{done} SIGKILLs at random points, {runs} runs, {resent} acknowledged messages re-sent; "
            f"{state.get('once', 0):,} of {messages:,} stored and answered exactly once at the end"
        )
        if state.get("unanswered"):
            # A redelivered message that was stored but never answered must be answered.
            out.fail("lost", f"{state['unanswered']} messages were stored before a kill but never answered", state["unanswered"])
        out.details.update(kills=done, runs=runs, **state)
    return out


# -- concurrency --------------------------------------------------------------------------------

_SCOPE_TAG = re.compile(r"\[((?:user|group):-?\d+) #\d+\]")


def _chat_scopes(chats: int) -> list[str]:
    return [f"user:{i}" if i % 2 else f"group:-{i}" for i in range(1, chats + 1)]


def concurrency(
    workdir: Path,
    *,
    chats: int = 50,
    per_chat: int = 40,
    max_latency: float = 0.02,
    writer_messages: int = 5000,
    writer_batch: int = 10,
    seed: int = 0,
    use_litellm: bool = False,
) -> Outcome:
    """Chats at once through one hub while another process writes the same file: order kept, nothing lost."""
    name = "concurrency_litellm" if use_litellm else "concurrency"
    out = Outcome(name, verified={IN_ORDER: 0, WRITER_PRESENT: 0})
    with _timed(out), contextlib.ExitStack() as stack:
        workdir.mkdir(parents=True, exist_ok=True)
        db = workdir / f"{name}.db"
        # Create the schema before the second process opens the file (concurrent first opens race: see the report).
        store = stack.enter_context(Store(db))
        scopes = _chat_scopes(chats)
        inbounds = [
            Inbound(scope=scope, text=f"[{scope} #{i}] {_PHRASES[(i + n) % len(_PHRASES)]}", ext_id=str(i), chat=scope.split(":", 1)[1], sender="p")
            for i in range(per_chat)
            for n, scope in enumerate(scopes)
        ]
        requests: list[list[dict[str, Any]]] = []
        if use_litellm:
            fakes = _fake_openai()
            rng = random.Random(seed)

            def respond(body: dict[str, Any]) -> Any:
                # Runs in the server thread: random latency, then the echo.
                return fakes.delay(rng.uniform(0.0, max_latency), fakes.text("re: " + last_user_text(body.get("messages", []))[:200]))

            server = stack.enter_context(fakes.FakeOpenAI(default=respond))
            stack.enter_context(_quiet_litellm())
            model: ChatModel = LiteLLMModel("openai/fake", api_base=server.base_url, timeout=30, retries=0)
        else:
            server = None
            model = echo_model(max_latency=max_latency, seed=seed)
        hub = make_hub(store, model)
        writer_log = workdir / f"{name}.writer.jsonl"
        writer_scope = "user:777777"
        writer_expected = _write_log(writer_log, writer_messages, [writer_scope], seed)
        writer_err = workdir / f"{name}.writer.stderr"
        with writer_err.open("wb") as err:
            writer = subprocess.Popen(
                [sys.executable, "-m", "scopehub.hub.cli", "--db", str(db), "import", str(writer_log), "--batch", str(writer_batch)],
                cwd=workdir,
                env=_child_env(),
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        observer = _Observer(db)
        deadline = time.monotonic() + 30
        while observer.count(writer_scope) == 0 and writer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # start the hub once the other process is writing
        written_before = observer.count(writer_scope)

        async def run_all() -> list[Any]:
            return await asyncio.gather(*(hub.handle(inbound) for inbound in inbounds), return_exceptions=True)

        started = time.perf_counter()
        results = asyncio.run(run_all())
        hub_seconds = time.perf_counter() - started
        written_during = observer.count(writer_scope) - written_before
        observer.close()
        try:
            writer.wait(timeout=600)
        except subprocess.TimeoutExpired:
            writer.kill()
            out.fail("crashed", "the second writer did not finish within 600 s")
        if writer.returncode != 0:
            out.fail("crashed", f"the second writer exited {writer.returncode}: {_tail(writer_err)}")
        if "locked" in _tail(writer_err, 5000):
            out.fail("crashed", "the second writer saw 'database is locked'")
        rows = store.query("SELECT ext_id, text FROM messages WHERE scope = ?", (writer_scope,))
        copies = Counter(ext_id for ext_id, _ in rows)
        present = sum(1 for ext_id, text in rows if copies[ext_id] == 1 and writer_expected.get((writer_scope, ext_id)) == text)
        out.verify(WRITER_PRESENT, present)
        if present != writer_messages:
            out.fail("lost", f"the second writer's messages: {present} of {writer_messages} there once and unaltered", writer_messages - present)

        locked = 0
        wrong: set[tuple[str, str | None]] = set()
        for inbound, result in zip(inbounds, results, strict=True):
            if isinstance(result, BaseException):
                locked += "locked" in str(result)
                wrong.add((inbound.scope, inbound.ext_id))
                out.fail("crashed", f"{inbound.scope} #{inbound.ext_id}: {type(result).__name__}: {result}")
            elif result is None or result.text != "re: " + with_sender(inbound.text, inbound.sender, inbound.scope):
                wrong.add((inbound.scope, inbound.ext_id))
                out.fail("crashed", f"{inbound.scope} #{inbound.ext_id}: wrong reply {getattr(result, 'text', None)!r}")
        if locked:
            out.note(f"{locked} 'database is locked' errors")
        out.verify(IN_ORDER, _check_chats(store, scopes, per_chat, inbounds, out, wrong))
        if server is not None:
            requests = [body.get("messages", []) for body in server.requests]
        else:
            requests = [call.messages for call in model.calls]  # type: ignore[attr-defined]
        _check_calls(requests, out)
        out.note(
            f"{len(inbounds)} messages of {chats} chats in {hub_seconds:.1f} s ({len(inbounds) / hub_seconds:.0f}/s); "
            f"the second process committed {written_during} of its {writer_messages} messages meanwhile "
            f"(batches of {writer_batch}), exit {writer.returncode}"
        )
        out.details.update(hub_seconds=hub_seconds, written_during=written_during)
    return out


def _check_chats(
    store: Store,
    scopes: Sequence[str],
    per_chat: int,
    inbounds: Sequence[Inbound],
    out: Outcome,
    wrong: Collection[tuple[str, str | None]] = (),
) -> int:
    """Per chat: every message once, in order, each followed by its one reply before the next message.

    Returns how many messages passed: in a chat whose order is right, stored unaltered with
    exactly one reply, between it and the next message, and not in ``wrong`` (the person
    got a wrong reply or none).
    """
    texts = {(inbound.scope, inbound.ext_id): inbound.text for inbound in inbounds}
    verified = 0
    for scope in scopes:
        rows = store.messages(scope)
        users = [m for m in rows if m.role == "user"]
        replies = [m for m in rows if m.role == "agent"]
        order = [m.ext_id for m in users]
        wanted = [str(i) for i in range(per_chat)]
        if order != wanted:
            missing = len(set(wanted) - set(order))
            if missing:
                out.fail("lost", f"{scope}: {missing} messages missing", missing)
            if len(order) > len(set(order)):
                out.fail("duplicated", f"{scope}: messages stored twice", len(order) - len(set(order)))
            if not missing:
                out.fail("crashed", f"{scope}: order broken: {order[:10]}")
        per_message = Counter(r.reply_to for r in replies)
        for index, m in enumerate(users):
            right = order == wanted and (scope, m.ext_id) not in wrong
            if texts.get((scope, m.ext_id or "")) != m.text:
                out.fail("lost", f"{scope} #{m.ext_id}: text altered")
                right = False
            n = per_message.get(m.id, 0)
            if n == 0:
                out.fail("lost", f"{scope} #{m.ext_id}: no stored reply")
            elif n > 1:
                out.fail("duplicated", f"{scope} #{m.ext_id}: {n} replies", n - 1)
            else:
                reply = next(r for r in replies if r.reply_to == m.id)
                upper = users[index + 1].id if index + 1 < len(users) else float("inf")
                if not m.id < reply.id < upper:
                    out.fail("crashed", f"{scope} #{m.ext_id}: its reply is not between it and the next message")
                    right = False
            verified += right and n == 1
    return verified


def _check_calls(requests: Sequence[Sequence[dict[str, Any]]], out: Outcome) -> None:
    """Every model call carries only its own chat's messages."""
    for messages in requests:
        own = _SCOPE_TAG.findall(last_user_text(messages))
        seen = {tag for message in messages for tag in _SCOPE_TAG.findall(str(message.get("content") or ""))}
        if own and seen - {own[0]}:
            out.fail("leaked", f"a call for {own[0]} carried {sorted(seen - {own[0]})[:3]}")


_OPEN_CHILD = """
import sys, time
from scopehub.memory import Store
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time() - 0.05))
while time.time() < start:
    pass
try:
    Store(sys.argv[1]).close()
    print("ok")
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


def first_open(workdir: Path, *, rounds: int = 10, processes: int = 4, seed: int = 0) -> Outcome:
    """Processes opening a new database file at the same moment (say the bot and an import started together)."""
    out = Outcome("first_open", verified={FIRST_OPENS: 0})
    with _timed(out):
        workdir.mkdir(parents=True, exist_ok=True)
        failed_rounds = 0
        for index in range(rounds):
            db = workdir / f"first_open.{index}.db"
            start = time.time() + 1.5  # every interpreter is up by then, even on a loaded machine
            procs = [
                subprocess.Popen([sys.executable, "-c", _OPEN_CHILD, str(db), repr(start)], cwd=workdir, env=_child_env(), stdout=subprocess.PIPE, text=True)
                for _ in range(processes)
            ]
            outputs = [proc.communicate(timeout=120)[0].strip() for proc in procs]
            failures = [output for output in outputs if output != "ok"]
            for output in failures:
                out.fail("crashed", f"round {index + 1}: {output[:200]}")
            failed_rounds += bool(failures)
            before = out.failures
            store = _reopen(db, out, f"round {index + 1}")
            if store is not None:
                store.close()
            if out.failures == before:  # the file they all opened is sound
                out.verify(FIRST_OPENS, outputs.count("ok"))
        out.note(f"{rounds} rounds of {processes} processes opening a new file at once; {failed_rounds} rounds with a failure")
    return out


# -- model faults -------------------------------------------------------------------------------

MODEL_TIMEOUT = 0.3  # seconds per model request in the scenario
MODEL_RETRIES = 1
MAX_BACKOFF = 1.0
ROUTER_TIMEOUT = 0.5
MAX_STEPS = 3
HANG_GRACE = 1.0  # this long past its bound a case is cancelled (and counted as hung)


@dataclass(frozen=True)
class FaultCase:
    """One model fault: the fake server's answers to the agent's (and the router's) requests, and the reply due."""

    name: str
    agent: tuple[Any, ...]  # FakeOpenAI steps for the agent's requests, in order
    expect: str  # the reply the person must get
    router: tuple[Any, ...] | None = None  # steps for the LLM router's requests; None: no LLM router
    bound: float = 0.0  # seconds the reply must come within (0: the retry policy's worst case)
    min_seconds: float = 0.0  # e.g. a Retry-After that must be honoured
    agent_requests: int | None = None  # how many requests the agent's model must get
    tool_error: bool = False  # a tool result starting with "error:" must reach the model
    via: str | None = None  # the route the hub must keep (the local one when the LLM router fails)
    text: str = "add buy milk to my tasks"


def _worst_case() -> float:
    """The retry policy's bound for one agent call, plus the router and some slack for a loaded machine."""
    attempts = MODEL_RETRIES + 1
    return attempts * MODEL_TIMEOUT + MODEL_RETRIES * MAX_BACKOFF + ROUTER_TIMEOUT + 2.0


def fault_cases() -> list[FaultCase]:
    """The model faults the scenario plays (steps from ``tests/fakes/openai_server.py``)."""
    f = _fake_openai()
    completion_without_text = f.raw(
        {
            "id": "chatcmpl-null",
            "object": "chat.completion",
            "created": 0,
            "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
        }
    )
    junk_router = f.text("I'd say tasks!! {not json")
    return [
        FaultCase("timeout", (f.delay(3), f.delay(3)), MODEL_DOWN_REPLY, agent_requests=MODEL_RETRIES + 1),
        FaultCase("timeout_then_ok", (f.delay(3), f.text("recovered")), "recovered"),
        FaultCase(
            "rate_limit_retry_after",
            (f.error(429, headers={"Retry-After": "1"}), f.text("recovered")),
            "recovered",
            min_seconds=1.0,
        ),
        FaultCase("rate_limit_persistent", (f.error(429, headers={"Retry-After": "1"}),) * 2, MODEL_DOWN_REPLY, min_seconds=1.0),
        FaultCase("retry_after_huge", (f.error(429, headers={"Retry-After": "86400"}), f.text("recovered")), "recovered"),
        FaultCase("retry_after_http_date", (f.error(429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), f.text("recovered")), "recovered"),
        FaultCase("retry_after_negative", (f.error(429, headers={"Retry-After": "-5"}), f.text("recovered")), "recovered"),
        # One retry after at most MAX_BACKOFF: a small bound, so a hang costs little.
        FaultCase("retry_after_nan", (f.error(429, headers={"Retry-After": "nan"}), f.text("recovered")), "recovered", bound=3.0),
        FaultCase("server_error_then_ok", (f.error(500), f.text("recovered")), "recovered"),
        FaultCase("server_errors", (f.error(500), f.error(503)), MODEL_DOWN_REPLY, agent_requests=2),
        FaultCase("bad_request", (f.error(400),), MODEL_FAILED_REPLY, agent_requests=1),
        FaultCase("malformed_body", (f.malformed("<html>502 Bad Gateway</html>", content_type="text/html"), f.malformed('{"foo": 1}')), MODEL_DOWN_REPLY),
        FaultCase("malformed_then_ok", (f.malformed("not json at all"), f.text("recovered")), "recovered"),
        FaultCase("no_choices", (f.raw({"id": "x", "object": "chat.completion", "choices": []}),) * 2, MODEL_DOWN_REPLY),
        FaultCase("null_content", (completion_without_text,), NO_ANSWER_REPLY),
        FaultCase("router_junk", (f.text("fine"),), "fine", router=(junk_router,), via="local"),
        FaultCase("router_unknown_agent", (f.text("fine"),), "fine", router=(f.text('{"agent": "root", "also_sees": ["*"]}'),), via="local"),
        FaultCase("router_timeout", (f.text("fine"),), "fine", router=(f.delay(3, f.text('{"agent": "tasks"}')),), via="local"),
        FaultCase("router_server_error", (f.text("fine"),), "fine", router=(f.error(500),), via="local"),
        FaultCase("router_malformed_body", (f.text("fine"),), "fine", router=(f.malformed("<html>"),), via="local"),
        FaultCase("tool_bad_json", (f.tool_call("search_memory", "{not json"), f.text("done")), "done", tool_error=True),
        FaultCase("tool_bad_types", (f.tool_call("add_task", {"title": ["x"], "due": 5}), f.text("done")), "done", tool_error=True),
        FaultCase("tool_missing_arguments", (f.tool_call("complete_task", {}), f.text("done")), "done", tool_error=True),
        FaultCase("tool_unknown", (f.tool_call("format_disk", {"really": True}), f.text("done")), "done", tool_error=True),
        FaultCase("tool_not_this_agents", (f.tool_call("save_note", {"text": "x"}), f.text("done")), "done", tool_error=True),
        FaultCase(
            "tool_many_calls",
            (f.tool_calls([("search_memory", {"query": f"q{i}"}) for i in range(12)]), f.text("done")),
            "done",
            tool_error=True,
        ),
        FaultCase(
            "tool_loop",
            (f.tool_call("search_memory", {"query": "again"}),) * (MAX_STEPS + 1),
            STEP_LIMIT_REPLY,
            agent_requests=MAX_STEPS + 1,
        ),
        FaultCase("tool_then_down", (f.tool_call("search_memory", {"query": "x"}), f.error(500), f.error(500)), MODEL_DOWN_REPLY),
    ]


async def _play_fault(case: FaultCase, index: int, server: Any, store: Store, text_step: Callable[[str], Any]) -> dict[str, Any]:
    agent_steps = deque(case.agent)
    router_steps = deque(case.router or ())
    extra: list[str] = []

    def respond(body: dict[str, Any]) -> Any:
        queue = router_steps if "response_format" in body else agent_steps  # the router asks for JSON
        if queue:
            return queue.popleft()
        extra.append("router" if "response_format" in body else "agent")
        return text_step("unexpected extra request")

    server.reset()
    server.default = respond
    model = LiteLLMModel("openai/fake-agent", api_base=server.base_url, timeout=MODEL_TIMEOUT, retries=MODEL_RETRIES, backoff=0.05, max_backoff=MAX_BACKOFF)
    if case.router is not None:
        # As deployed: HUB_ROUTER_MODEL and HUB_API_BASE set, the router built by the composition root.
        from scopehub.hub.app import build_hub

        settings = hub_settings(router_model="openai/fake-router", api_base=server.base_url, router_timeout=ROUTER_TIMEOUT, max_tool_steps=MAX_STEPS)
        hub = build_hub(settings, store=store, model=model, registry=_registry())
        if hub.deps.router_model is None:
            raise AssertionError("HUB_ROUTER_MODEL set but no router model built")
    else:
        hub = make_hub(store, model, max_tool_steps=MAX_STEPS, router_timeout=ROUTER_TIMEOUT)
    scope, ext_id = f"user:{5000 + index}", f"fault-{index}"
    bound = case.bound or _worst_case()
    reply: Reply | None = None
    error = None
    started = time.perf_counter()
    try:
        reply = await asyncio.wait_for(hub.handle(Inbound(scope=scope, text=case.text, ext_id=ext_id)), bound + HANG_GRACE)
    except TimeoutError:
        error = f"no reply within {bound + HANG_GRACE:.1f} s (cancelled)"
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    stored = store.find_ext(scope, ext_id)
    agent_bodies = [body for body in server.requests if "response_format" not in body]
    return {
        "case": case,
        "reply": reply,
        "error": error,
        "seconds": seconds,
        "bound": bound,
        "stored": stored is not None and stored.text == case.text,
        "reply_stored": _reply_stored(store, reply),
        "agent_requests": len(agent_bodies),
        "tool_results": [m.get("content", "") for body in agent_bodies for m in body.get("messages", []) if m.get("role") == "tool"],
        "extra": extra,
    }


def _reply_stored(store: Store, reply: Reply | None) -> bool:
    """An agent's answer is stored as the reply (an error reply is not an answer and is not stored)."""
    if reply is None or reply.kind != "agent":
        return True
    stored = store.get(reply.scope, reply.reply_id) if reply.reply_id is not None else None
    return stored is not None and stored.text == reply.text


def _judge_fault(result: dict[str, Any], out: Outcome) -> bool:
    case: FaultCase = result["case"]
    reply: Reply | None = result["reply"]
    problems = []
    if result["error"]:
        problems.append(result["error"])
    elif reply is None:
        problems.append("no reply")
    else:
        if reply.text != case.expect:
            problems.append(f"reply {reply.text[:80]!r}, expected {case.expect[:60]!r}")
        if case.via and reply.via != case.via:
            problems.append(f"routed via {reply.via!r}, expected {case.via!r}")
    if result["seconds"] > result["bound"]:
        problems.append(f"took {result['seconds']:.2f} s, bound {result['bound']:.2f} s")
    if result["seconds"] < case.min_seconds:
        problems.append(f"took {result['seconds']:.2f} s: Retry-After of {case.min_seconds:.0f} s not honoured")
    if case.agent_requests is not None and result["agent_requests"] != case.agent_requests:
        problems.append(f"{result['agent_requests']} model requests, expected {case.agent_requests}")
    if case.tool_error and not any(str(text).startswith("error:") for text in result["tool_results"]):
        problems.append("no tool error reached the model")
    if problems:  # one failing case counts once, with every problem named
        out.fail("crashed", f"{case.name}: " + "; ".join(problems))
    if not result["stored"]:
        out.fail("lost", f"{case.name}: the person's message is not stored")
    if not result["reply_stored"]:
        out.fail("lost", f"{case.name}: the reply is not stored")
    return not problems and result["stored"] and result["reply_stored"]


def model_faults(workdir: Path, *, cases: Sequence[str] | None = None, seed: int = 0) -> Outcome:
    """Model faults through the loopback OpenAI fake and the real litellm client: a clear reply in bounded time."""
    out = Outcome("model_faults", verified={FAULTS_ANSWERED: 0})
    with _timed(out):
        workdir.mkdir(parents=True, exist_ok=True)
        fakes = _fake_openai()
        selected = [case for case in fault_cases() if cases is None or case.name in cases]
        with Store(workdir / "model_faults.db") as store, fakes.FakeOpenAI() as server, _quiet_litellm():

            # One event loop per case: a fault that corrupts the loop (a NaN timer) must not
            # spill into the cases after it.
            results = [asyncio.run(_play_fault(case, index, server, store, fakes.text)) for index, case in enumerate(selected)]
        slowest = max(results, key=lambda r: r["seconds"]) if results else None
        for result in results:
            ok = _judge_fault(result, out)
            out.details[result["case"].name] = {**result, "ok": ok}
            if ok:
                out.verify(FAULTS_ANSWERED)
        if slowest is not None:
            out.note(
                f"{len(results)} cases; slowest {slowest['case'].name} {slowest['seconds']:.2f} s; "
                f"bound {_worst_case():.1f} s (timeout {MODEL_TIMEOUT} s x {MODEL_RETRIES + 1} attempts, backoff <= {MAX_BACKOFF} s, router {ROUTER_TIMEOUT} s)"
            )
        out.note("times: " + ", ".join(f"{r['case'].name} {r['seconds']:.2f}s" for r in results))
    return out


# -- hostile input ------------------------------------------------------------------------------

_FTS_PIECES = (
    '"', '""', "'", "NEAR(", "NEAR(a b, 2)", "NEAR", "AND", "OR", "NOT", "*", "^", ":", "(", ")", "-", "+",
    "body:", "ctx:", "{body ctx}:", "search_fts", "MATCH", "rowid", "%", "_", "\\", "'; DROP TABLE messages; --",
    "' OR 1=1 --", "a*", "^start", '"unterminated', "col:term",
)  # fmt: skip
_UNICODE_PIECES = (
    "\x00", "\x01", "\x07", "\x1b[31m", "\x7f", "\u0085", "\u2028", "\u2029", "\r\n", "\r", "\t", "\u200b", "\u200c",
    "\u200d", "\u2060", "\ufeff", "\u202e", "\u202d", "\u200f", "\u061c", "\u0301", "e\u0301", "שלום עולם", "مرحبا بك",
    "Привет", "你好世界", "日本語のテキスト", "👩\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "👍🏽", "🙂", "\U0001f600",
    "\U0010ffff", "\ufffd", "\uffff", "ǅ", "ß", "İ", "ﬃ", "Ａｂｃ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "Z̴̡̪̈́a̷l̸g̵o̶", "\u0000\u0000",
)  # fmt: skip
_HUB_PIECES = (
    "/remember", "/forget", "/search", "/facts", "/usage", "/help", "/start", "/tasks", "/notes", "/inbox", "@tasks",
    "@reminders", "@general", "/tasks@some_bot", "/", "@", "#1", "#999999999999999999999", "-1", "9" * 30, "user:2",
    "group:-5", '{"agent": "tasks", "also_sees": ["inbox"]}', '{"facts": [{"text": "x", "key": "a.b", "op": "update"}]}',
    '{"facts": [{"text": "", "op": "invalidate"}]}', "```json", "[hub]", "<script>alert(1)</script>", "{{7*7}}",
    "${HOME}", "%s%n", "my email is a@b.co", "I am vegetarian", "call me Ram", "my locker code is", "all",
)  # fmt: skip
_PIECES = _FTS_PIECES + _UNICODE_PIECES + _HUB_PIECES + _WORDS


def hostile_text(max_huge: int = 100_000) -> Any:
    """A hypothesis strategy for hostile chat text.

    Any code point but lone surrogates (they are not valid UTF-8 and no transport delivers
    them), FTS5 and SQL syntax, control characters, zero-width and bidi marks, emoji
    sequences, right-to-left scripts, hub commands and mentions, JSON the router or the
    fact extractor might parse; one text in about 300 is huge (1,000-``max_huge`` chars).
    """
    from hypothesis import strategies as st

    chars = st.characters(exclude_categories=("Cs",))
    piece = st.one_of(st.text(chars, max_size=12), st.sampled_from(_PIECES))
    mixed = st.tuples(st.lists(piece, max_size=16), st.sampled_from(("", " ", "  ", "\n", " AND ", ":", "\x00"))).map(
        lambda parts: parts[1].join(parts[0])
    )

    def repeat(spec: tuple[str, int]) -> str:
        unit, size = spec[0] or "x", spec[1]
        return (unit * (size // len(unit) + 1))[:size]

    huge = st.tuples(piece, st.integers(1_000, max_huge)).map(repeat)

    @st.composite
    def text(draw: Any) -> str:
        roll = draw(st.integers(0, 999))
        if roll < 3:
            return draw(huge)
        if roll < 350:
            return draw(st.text(chars, max_size=300))
        return draw(mixed)

    return text()


VICTIM_SCOPE = "group:-424242"
VICTIM_SECRET = "victimsecretq7z3"


def available_search_methods() -> tuple[str, ...]:
    """Search methods that can run here: the semantic ones need numpy (and an embedder)."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        return tuple(m for m in SEARCH_METHODS if m not in ("semantic", "hybrid_semantic"))
    return SEARCH_METHODS


class _HashEmbedder:
    """Deterministic offline vectors (bag of hashed words) for the semantic search methods."""

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            vector = [0.0] * 16
            for word in text.lower().split()[:2000]:
                vector[zlib.crc32(word.encode("utf-8", "replace")) % 16] += 1.0
            norm = sum(v * v for v in vector) ** 0.5 or 1.0
            vectors.append([v / norm for v in vector])
        return vectors


class HostileProbe:
    """Feeds one text to every target and counts what escaped; one event loop, one store.

    Targets: ``route`` and ``detect_explicit``; the LLM router's prompt builder and answer
    parser; ``build_context`` (the text as the message and, later, in the history); the
    facts' parsers, ``remember`` / ``current`` / ``forget``; ``Store.append`` (the text
    must come back whole) and ``Store.search`` with every available method (no hit may
    come from another scope); and, every ``hub_every``-th text, ``Hub.handle`` with the
    text, ``/remember``, ``/forget`` and ``/search`` of it, and fact extraction whose
    model answers with the text itself.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        seed: int = 0,
        hub_every: int = 10,
        rotate_every: int = 500,
        window: int = 8,
        every_method: bool = True,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.rng = random.Random(seed)
        self.store = Store(workdir / "hostile.db")
        self.current = ""
        self.model = FunctionModel(self._answer, name="hostile")
        self.hub = make_hub(self.store, self.model, facts=True)
        self.agents = self.hub.registry.names
        self.tokenizer = self.hub.deps.tokenizer
        self.budget = self.hub.settings.message_tokens
        self.loop = asyncio.new_event_loop()
        self.methods = available_search_methods()
        self.embedder = _HashEmbedder() if "semantic" in self.methods else None
        self.hub_every = hub_every
        self.every_method = every_method  # False: one search method per text, in turn (the long report)
        self.rotate_every = rotate_every
        self.window_size = window
        self.window: list[Message] = []
        self.examples = 0
        self.hub_examples = 0
        self.calls = 0
        self.lost = 0
        self.leaked = 0
        self.crashed = 0
        self.failures: Counter[str] = Counter()
        self.events: list[tuple[str, str, str, str]] = []  # (count, target, detail, text), the first 1000
        # (count, target, error with digits folded) -> [how often, the shortest text that caused it]
        self.signatures: dict[tuple[str, str, str], list[Any]] = {}
        # The hub catches a failing command and logs it: keep the exception for the report.
        self.hub_errors = _Records()
        self.hub_errors.setLevel(logging.ERROR)
        logging.getLogger("scopehub.hub.orchestrator").addHandler(self.hub_errors)
        # Another scope holding every hostile piece and a secret: no search may ever return it.
        for piece in (*_PIECES, f"the secret is {VICTIM_SECRET}"):
            self.store.append(NewMessage(scope=VICTIM_SCOPE, role="user", text=f"{piece} {VICTIM_SECRET}", sender="v"))
        add_vault_item(self.store, VICTIM_SCOPE, "note", f"milk tasks email {VICTIM_SECRET}", title=VICTIM_SECRET)

    def close(self) -> None:
        logging.getLogger("scopehub.hub.orchestrator").removeHandler(self.hub_errors)
        self.loop.close()
        self.store.close()

    def summary(self, limit: int = 20) -> list[str]:
        """The distinct failures, most frequent first, each with the shortest text that caused it."""
        ranked = sorted(self.signatures.items(), key=lambda item: -item[1][0])[:limit]
        return [f"{count} in {target} x{n}: {sig} <- {text[:80]!r} ({len(text)} chars)" for (count, target, sig), (n, text) in ranked]

    def _answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        if is_extraction(messages):
            return self.current  # the extractor gets the hostile text as its "JSON"
        return "ok: " + last_user_text(messages)[:50]

    @property
    def scope(self) -> str:
        # A fresh scope now and then keeps facts and windows small, as in real chats.
        return f"user:{1000 + self.examples // self.rotate_every}"

    def _failed(self, count: str, target: str, text: str, detail: str) -> None:
        setattr(self, count, getattr(self, count) + 1)
        self.failures[f"{count} {target}"] += 1
        if len(self.events) < 1000:
            self.events.append((count, target, detail, text))
        # One signature per error, whatever the data quoted after "with text" or the numbers in it.
        key = (count, target, re.sub(r"\d+", "N", detail.split(" with text ")[0])[:110])
        entry = self.signatures.setdefault(key, [0, text])
        entry[0] += 1
        if len(text) < len(entry[1]):
            entry[1] = text

    def _call(self, target: str, text: str, fn: Callable[[], Any], allowed: tuple[type[BaseException], ...] = ()) -> Any:
        self.calls += 1
        try:
            return fn()
        except allowed:
            return None
        except Exception as exc:
            self._failed("crashed", target, text, f"{type(exc).__name__}: {exc}")
            return None

    def probe(self, text: str) -> None:
        """Every target with ``text``."""
        self.examples += 1
        self.current = text
        scope = self.scope
        if self.window and self.window[-1].scope != scope:
            self.window = []
        clf = self.hub.classifier
        reply_to = self.window[-1] if self.window and self.rng.random() < 0.2 else None
        self._call("route", text, lambda: route(text, classifier=clf, window=self.window, reply_to=reply_to, default_also_sees=self.hub.default_also_sees))
        self._call("detect_explicit", text, lambda: detect_explicit(text, self.agents))
        self._call("llm_router.build_router_messages", text, lambda: build_router_messages(text, self.hub.profiles, self.window))
        self._call("llm_router.parse_router_answer", text, lambda: parse_router_answer(text, self.agents), (RouterError,))
        agent = self.agents[self.examples % len(self.agents)]
        context = self._call(
            "build_context",
            text,
            lambda: build_context(
                self.hub.prompts[agent], self.window, text, tokenizer=self.tokenizer, facts_block=self.hub.facts_block(scope), message_tokens=self.budget
            ),
        )
        # Below 2,000 characters the message reaches the model whole unless it is over its token budget.
        if context is not None and len(text) < 2000 and context.messages[-1]["content"] != self.tokenizer.truncate(text, self.budget):
            self._failed("lost", "build_context", text, "a short message was altered on its way to the model")
        for name, fn in (
            ("facts.looks_factual", looks_factual),
            ("facts.is_explicit", is_explicit),
            ("facts.infer_key", infer_key),
            ("facts.parse_extraction", parse_extraction),
            ("facts.quote", quote),
            ("facts.normalise_key", normalise_key),
        ):
            self._call(name, text, lambda fn=fn: fn(text))
        self._call("facts.remember", text, lambda: self._remember(scope, text), ())
        self._call("facts.current", text, lambda: current_facts(self.store, scope))
        self._call("facts.forget", text, lambda: forget(self.store, scope, text))
        stored = self._call("store.append", text, lambda: self.store.append(NewMessage(scope=scope, role="user", text=text)))
        if stored is not None:
            back = self.store.get(scope, stored.id)
            if back is None or back.text != text:
                self._failed("lost", "store.append", text, "the stored text does not come back whole")
            self.window = [*self.window, stored][-self.window_size :]
        methods = self.methods if self.every_method else (self.methods[self.examples % len(self.methods)],)
        for method in methods:
            hits = self._call(f"store.search[{method}]", text, lambda method=method: self.store.search(scope, text, k=5, method=method, embedder=self.embedder))
            for hit in hits or ():
                if VICTIM_SECRET in hit.text or VICTIM_SECRET in hit.snippet:
                    self._failed("leaked", f"store.search[{method}]", text, "returned another scope's message")
        if self.hub_every and self.examples % self.hub_every == 0:
            self.hub_examples += 1
            self.loop.run_until_complete(self._through_hub(text, scope))

    def _remember(self, scope: str, text: str) -> Any:
        try:
            return remember(self.store, scope, text)
        except ValueError as exc:
            if str(exc) == "a fact needs some text":  # documented: blank after cleaning
                return None
            raise

    async def _through_hub(self, text: str, scope: str) -> None:
        n = self.examples
        for target, message in (
            ("hub.handle", text),
            ("hub /remember", "/remember " + text),
            ("hub /forget", "/forget " + text),
            ("hub /search", "/search " + text),
        ):
            self.calls += 1
            logged = len(self.hub_errors.records)
            try:
                reply = await self.hub.handle(Inbound(scope=scope, text=message, ext_id=f"{target}:{n}", sender="h"))
                if reply is not None and reply.kind == "command" and reply.text.endswith("failed; nothing was lost. Please try again."):
                    errors = [r.exc_info[1] for r in self.hub_errors.records[logged:] if r.exc_info and r.exc_info[1]]
                    cause = f"{type(errors[-1]).__name__}: {errors[-1]}" if errors else "?"
                    self._failed("crashed", target, text, f"the command raised inside the hub (caught and logged): {cause}")
                if target == "hub.handle":
                    await self.hub.after_send(reply)
            except Exception as exc:
                self._failed("crashed", target, text, f"{type(exc).__name__}: {exc}")
        self.model.calls.clear()
        del self.hub_errors.records[:]
        if self.window and self.store.get(self.window[-1].scope, self.window[-1].id) is None:
            self.window = []  # "/forget all" erased the scope


def huge_message(workdir: Path, *, chars: int = 100_000, out: Outcome | None = None) -> Outcome:
    """A 100,000-character message: stored whole, handled, searchable; the model gets it trimmed to its budget."""
    out = out if out is not None else Outcome("huge_message")
    out.verified.setdefault(HUGE_KEPT, 0)
    failures = out.failures
    with _timed(out):
        workdir.mkdir(parents=True, exist_ok=True)
        rng = random.Random(chars)
        marker = "tailmarkerzq9"
        body: list[str] = []
        size = 0
        while size < chars - len(marker) - 1:
            # No @mentions or /commands: an explicit address is cut out of the text the agent gets.
            piece = rng.choice(_FTS_PIECES + _UNICODE_PIECES) if rng.random() < 0.3 else rng.choice(_WORDS)
            body.append(piece)
            size += len(piece) + 1
        head = "Here is a long paste: "  # a plain message, not a /command
        text = head + (" ".join(body))[: chars - len(head) - len(marker) - 1] + " " + marker
        with Store(workdir / "huge.db") as store:
            model = echo_model()
            hub = make_hub(store, model, facts=True)
            budget = hub.settings.message_tokens
            tokenizer = hub.deps.tokenizer

            async def run() -> tuple[Reply | None, Reply | None]:
                first = await hub.handle(Inbound(scope="user:31337", text=text, ext_id="huge"))
                await hub.after_send(first)
                second = await hub.handle(Inbound(scope="user:31337", text="and what did I just send?", ext_id="after"))
                return first, second

            try:
                first, second = asyncio.run(run())
            except Exception as exc:
                out.fail("crashed", f"the huge message: {type(exc).__name__}: {exc}")
                return out
            if first is None or first.message_id is None:
                out.fail("crashed", "the huge message got no reply")
                return out
            stored = store.get(first.scope, first.message_id)
            if stored is None or stored.text != text or len(stored.text) != chars:
                out.fail("lost", f"the huge message is not stored whole ({len(stored.text) if stored else 0} of {chars} chars)")
            agent_calls = [call for call in model.calls if not is_extraction(call.messages)]
            sent = agent_calls[0].messages[-1]["content"] if agent_calls else ""
            if sent != tokenizer.truncate(text, budget) or tokenizer.count(sent) > budget:
                out.fail("crashed", f"the model got {tokenizer.count(sent)} tokens of the message, budget {budget}")
            if len(agent_calls) > 1:
                history = [m["content"] for m in agent_calls[1].messages[1:-1]]
                longest = max((tokenizer.count(h) for h in history), default=0)
                if not any(marker not in h and h[:50] == text[:50] for h in history) or longest > 1000:
                    out.fail("crashed", f"the next call's history does not carry the huge message trimmed (longest {longest} tokens)")
            if second is None or second.kind != "agent":
                out.fail("crashed", "the message after the huge one got no answer")
            hits = store.search("user:31337", marker, k=3)
            if not any(hit.id == first.message_id for hit in hits):
                out.fail("lost", "the huge message's last word is not searchable")
            out.note(f"a {chars:,}-character message: stored whole, the model got {tokenizer.count(sent)} tokens (budget {budget})")
    if out.failures == failures:
        out.verify(HUGE_KEPT)
    return out


def hostile_input(
    workdir: Path,
    *,
    examples: int = 100_000,
    seed: int = 0,
    hub_every: int = 10,
    every_method: bool | None = None,
    progress: bool = False,
) -> Outcome:
    """Hypothesis-generated text through every target (see :class:`HostileProbe`), plus the huge message."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    out = Outcome("hostile_input", verified={HOSTILE_TRIED: 0})
    with _timed(out):
        # Beyond a few thousand texts, one search method per text in turn keeps the run in minutes.
        every_method = examples <= 5000 if every_method is None else every_method
        probe = HostileProbe(workdir, seed=seed, hub_every=hub_every, every_method=every_method)
        bar = _report.Progress(examples, "hostile input", enabled=progress)

        @hypothesis_seed(seed)
        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(hostile_text())
        def run(text: str) -> None:
            probe.probe(text)
            bar.advance()

        try:
            run()
        except Exception as exc:  # a failure of the harness itself, not of a target
            out.fail("crashed", f"the generator stopped: {type(exc).__name__}: {exc}")
        finally:
            bar.close()
            probe.close()
        out.verify(HOSTILE_TRIED, probe.examples)
        out.lost, out.leaked, out.crashed = probe.lost, probe.leaked, probe.crashed
        out.note(
            f"{probe.examples:,} hypothesis examples, {probe.calls:,} target calls, {probe.hub_examples:,} of them also "
            f"through Hub.handle (text, /remember, /forget, /search, extraction); search methods: {', '.join(probe.methods)} "
            + ("(each text through every method)" if every_method else "(one method per text, in turn)")
        )
        if len(probe.methods) < len(SEARCH_METHODS):
            out.note("semantic and hybrid_semantic search not tried: numpy is not installed")
        for key, n in probe.failures.most_common(10):
            out.note(f"{key}: {n}")
        for line in probe.summary():
            out.note(line)
        out.details.update(failures=dict(probe.failures), summary=probe.summary(50))
        huge_message(workdir, out=out)
    return out


# -- isolation ----------------------------------------------------------------------------------

_SECRET = re.compile(r"zx[0-9a-f]{10}q")


def _isolation_scopes(n: int) -> list[str]:
    """``user:1`` and ``group:-5`` (where user 1 writes) first, then users and groups alternating."""
    scopes = ["user:1", "group:-5"]
    i = 2
    while len(scopes) < n:
        scopes.append(f"user:{i}" if i % 2 == 0 else f"group:-{i * 10 + 1}")
        i += 1
    return scopes[:n]


def isolation(workdir: Path, *, scopes: int = 100, seed: int = 0, victims: int = 3) -> Outcome:
    """Scopes with the same words and their own secret: nothing returns or changes another scope's data."""
    out = Outcome("isolation", verified={SCOPE_PAIRS: 0, ITEMS_UNCHANGED: 0})
    with _timed(out):
        workdir.mkdir(parents=True, exist_ok=True)
        rng = random.Random(seed)
        names = _isolation_scopes(max(2, scopes))
        secrets = {scope: f"zx{rng.getrandbits(40):010x}q" for scope in names}
        owner = {secret: scope for scope, secret in secrets.items()}
        with Store(workdir / "isolation.db") as store:
            state = {"scope": names[0]}

            typed: dict[str, set[str]] = {}  # secrets of other scopes a person typed into a scope: its own data then
            leaks: set[tuple[str, str]] = set()  # (scope, the other scope whose data it showed)
            checks = 0

            def foreign(text: str, scope: str) -> list[str]:
                found = set(_SECRET.findall(text)) - typed.get(scope, set())
                return [owner.get(s, s) for s in found if owner.get(s) != scope]

            def check(what: str, text: str, scope: str) -> None:
                nonlocal checks
                checks += 1
                others = foreign(text, scope)
                leaks.update((scope, other) for other in others)
                if others:
                    out.fail("leaked", f"{what} in {scope} showed data of {sorted(others)[:3]}")

            def agent_answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
                scope = state["scope"]
                check("a model call", json.dumps(messages, ensure_ascii=False), scope)
                if is_extraction(messages):
                    own = _SECRET.findall(last_user_text(messages))
                    facts = [{"text": f"User's locker code is {own[0]}", "kind": "other", "key": "user.locker_code", "op": "add"}] if own else []
                    return json.dumps({"facts": facts})
                return "noted"

            def router_answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
                check("the LLM router's prompt", json.dumps(messages, ensure_ascii=False), state["scope"])
                return '{"agent": "general", "also_sees": ["tasks", "inbox", "notes", "reminders"]}'

            model = FunctionModel(agent_answer, name="isolation")
            hub = make_hub(store, model, router_model=FunctionModel(router_answer, name="router"), facts=True)
            now = time.time()
            ids: dict[str, dict[str, int]] = {}

            async def fill() -> None:
                for scope in names:
                    state["scope"] = scope
                    secret = secrets[scope]
                    group = scope.startswith("group:")
                    sender = "Ann" if scope in ("user:1", "group:-5") else f"member{rng.randint(1, 9)}"
                    texts = [
                        f"my locker code is {secret}",
                        f"the quarterly budget meeting notes mention {secret}",
                        f"/remember my pin is {secret}",
                        "add buy milk to my tasks",
                        "what is my locker code?",
                    ]
                    for n, text in enumerate(texts):
                        reply = await hub.handle(Inbound(scope=scope, text=text, ext_id=f"i{n}", sender=sender if group else None, chat=scope.split(":", 1)[1]))
                        await hub.after_send(reply)
                    task = add_task(store, scope, f"buy milk {secret}", now=now)
                    reminder = add_reminder(store, scope, f"call mum about {secret}", now + 3600, chat=scope.split(":", 1)[1], now=now)
                    note = add_vault_item(store, scope, "note", f"budget notes {secret}", title=f"budget {secret}", agent="notes", now=now)
                    email = add_vault_item(store, scope, "email", f"From: boss\nSubject: deadline\n\nThe code is {secret}", title="deadline", agent="inbox", now=now)
                    ids[scope] = {"task": task.id, "reminder": reminder.id, "note": note.id, "email": email.id}
                model.calls.clear()

            asyncio.run(fill())
            tools = {t.name: t for spec in hub.registry for t in spec.tools}
            tools[search_memory.name] = search_memory
            methods = available_search_methods()
            embedder = _HashEmbedder() if "semantic" in methods else None

            async def probe(scope: str) -> None:
                state["scope"] = scope
                others = rng.sample([s for s in names if s != scope], min(victims, len(names) - 1))
                queries = ["locker code budget milk deadline", secrets[scope], *(secrets[o] for o in others), "zx*", '"zx" OR code']
                for method in methods:
                    for query in queries:
                        hits = store.search(scope, query, k=10, method=method, embedder=embedder)
                        check(f"search[{method}]", " ".join(f"{h.text} {h.snippet}" for h in hits), scope)
                        for hit in hits:
                            owned = store.get(scope, hit.id) if hit.kind == "message" else get_vault_item(store, scope, hit.id)
                            if owned is None:
                                out.fail("leaked", f"search[{method}] in {scope} returned {hit.kind} #{hit.id} of another scope")
                check("facts", " ".join(f.text for f in current_facts(store, scope)), scope)
                check("facts block", hub.facts_block(scope), scope)
                latest = store.latest(scope)
                if latest is not None:
                    for agent in hub.registry.names:
                        built = hub.context_for(agent, scope, latest, tuple(n for n in hub.registry.names if n != agent))
                        check(f"context[{agent}]", json.dumps(built.messages, ensure_ascii=False), scope)
                check("tasks", " ".join(t.title for t in list_tasks(store, scope, include_done=True)), scope)
                check("reminders", " ".join(r.text for r in list_reminders(store, scope, include_inactive=True)), scope)
                check("vault", " ".join(f"{v.title} {v.body}" for v in list_vault_items(store, scope, limit=50)), scope)
                ctx = ToolContext(store=store, scope=scope, chat=scope.split(":", 1)[1], clock=lambda: now, extra={"timezone": "UTC"})
                calls: list[tuple[str, dict[str, Any]]] = [
                    ("list_tasks", {"done": True}),
                    ("list_reminders", {}),
                    ("list_notes", {}),
                    ("list_emails", {}),
                    ("search_memory", {"query": f"locker code {secrets[others[0]]}"}),
                ]
                for other in others:
                    victim = ids[other]
                    calls += [
                        ("read_note", {"id": victim["note"]}),
                        ("read_email", {"id": victim["email"]}),
                        ("draft_reply", {"email_id": victim["email"], "body": "hello"}),
                        ("complete_task", {"id": victim["task"]}),
                        ("edit_task", {"id": victim["task"], "title": "hijacked"}),
                        ("cancel_reminder", {"id": victim["reminder"]}),
                        ("delete_note", {"id": victim["note"]}),
                    ]
                # Task and reminder numbers count per scope, so the victims' numbers also name
                # this scope's own records: what must not change is the victims' rows.
                def victims_state() -> dict[str, tuple[Any, Any, Any]]:
                    return {
                        other: (
                            get_task(store, other, ids[other]["task"]),
                            get_reminder(store, other, ids[other]["reminder"]),
                            get_vault_item(store, other, ids[other]["note"]),
                        )
                        for other in others
                    }

                before = victims_state()
                for name, arguments in calls:
                    if name in tools:
                        result, _ = await run_tool(tools, name, json.dumps(arguments), ctx)
                        check(f"tool {name}", result, scope)
                after = victims_state()
                for other in others:
                    victim = ids[other]
                    (task, reminder, note), (task_was, reminder_was, _) = after[other], before[other]
                    if task is None or task != task_was:
                        out.fail("leaked", f"a tool in {scope} changed task #{victim['task']} of {other}")
                    else:
                        out.verify(ITEMS_UNCHANGED)
                    if reminder is None or reminder != reminder_was:
                        out.fail("leaked", f"a tool in {scope} cancelled reminder #{victim['reminder']} of {other}")
                    else:
                        out.verify(ITEMS_UNCHANGED)
                    if note is None:
                        out.fail("leaked", f"a tool in {scope} deleted note #{victim['note']} of {other}")
                    else:
                        out.verify(ITEMS_UNCHANGED)
                typed.setdefault(scope, set()).add(secrets[others[0]])
                for text in ("/facts", f"/search {secrets[others[0]]}", "/search locker code budget", "/usage", "what's my pin?"):
                    reply = await hub.handle(Inbound(scope=scope, text=text, sender="Ann" if scope.startswith("group:") else None))
                    check(f"reply to {text.split()[0]}", reply.text if reply else "", scope)
                model.calls.clear()
                probed.append(scope)

            # Every output of a probed scope was searched for the secret of every other scope:
            # each (scope, other) pair without a leak counts once.
            probed: list[str] = []

            async def probe_all() -> None:
                for scope in names:
                    await probe(scope)

            asyncio.run(probe_all())
            # The member's private facts never reach the group they write in.
            private = secrets["user:1"]
            group_view = " ".join(
                [hub.facts_block("group:-5"), *(f.text for f in current_facts(store, "group:-5")), *(h.text for h in store.search("group:-5", private, k=10))]
            )
            if private in group_view:
                out.fail("leaked", "group:-5 sees a private fact of user:1")
                leaks.add(("group:-5", "user:1"))
            out.verify(SCOPE_PAIRS, len(probed) * (len(names) - 1) - sum(1 for scope, _ in leaks if scope in probed))
            out.note(
                f"{len(probed)} of {len(names)} scopes probed, {checks:,} outputs checked for every other scope's secret, "
                f"search methods {', '.join(methods)}; group:-5 vs user:1 (same person) checked"
            )
    return out


# -- fail-open memory ---------------------------------------------------------------------------


class _BrokenFacts:
    """A facts service whose every part fails."""

    def block(self, scope: str, tokenizer: Any, budget: int) -> str:
        raise RuntimeError("facts table unreadable")

    async def after_reply(self, scope: str, message: Message) -> None:
        raise RuntimeError("extractor exploded")


def _search_then_answer() -> ScriptedModel:
    """Asks for search_memory, then answers with what the tool returned."""

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        results = [m["content"] for m in messages if m.get("role") == "tool"]
        return "answered; search said: " + (results[-1][:80] if results else "nothing")

    call = ModelResponse(tool_calls=(ToolCall(id="call_1", name="search_memory", arguments='{"query": "milk"}'),))
    return ScriptedModel([call, answer])


def fail_open(workdir: Path, *, seed: int = 0) -> Outcome:
    """Search, the facts block or fact extraction failing: the agent still answers, and the failure is logged."""
    out = Outcome("fail_open", verified={FAILURES_ANSWERED: 0})
    with _timed(out):
        workdir.mkdir(parents=True, exist_ok=True)
        with Store(workdir / "fail_open.db") as store:

            def broken_search(*args: Any, **kwargs: Any) -> list[Any]:
                raise sqlite3.OperationalError("disk I/O error")

            def judge(
                case: str, reply: Reply | None, logs: _Records, logged: str, *, kind: str = "agent", text: str = "", problem: str = ""
            ) -> None:
                before = out.failures
                if problem:
                    out.fail("crashed", f"{case}: {problem}")
                if reply is None or reply.kind != kind or (text and text not in reply.text):
                    out.fail("crashed", f"{case}: no usable answer ({getattr(reply, 'text', None)!r})")
                elif reply.message_id is None or store.get(reply.scope, reply.message_id) is None:
                    out.fail("lost", f"{case}: the person's message is not stored")
                if logged not in logs.text():
                    out.fail("crashed", f"{case}: the failure was not logged (expected {logged!r})")
                if out.failures == before:
                    out.verify(FAILURES_ANSWERED)

            # 1. search raises: the tool result says so, the agent answers without it.
            model = _search_then_answer()
            hub = make_hub(store, model)
            store.search = broken_search  # type: ignore[method-assign]
            try:
                with _capture_logs() as logs:
                    reply = asyncio.run(hub.handle(Inbound(scope="user:71", text="what did I say about milk?")))
                judge("search raising", reply, logs, "tool search_memory failed", text="search_memory failed")
                # /search itself fails open too.
                with _capture_logs() as logs:
                    reply = asyncio.run(hub.handle(Inbound(scope="user:71", text="/search milk")))
                judge("/search raising", reply, logs, "command /search failed", kind="command", text="nothing was lost")
            finally:
                del store.search  # back to the class method
            # 2. the facts block raises: answered without facts.
            model2 = echo_model()
            hub = make_hub(store, model2, facts=_BrokenFacts())
            with _capture_logs() as logs:
                reply = asyncio.run(hub.handle(Inbound(scope="user:72", text="add buy milk to my tasks")))
            sent_block = bool(model2.calls) and BLOCK_HEADER in model2.calls[-1].messages[0]["content"]
            judge("facts block raising", reply, logs, "facts unavailable", text="re: ", problem="a facts block was still sent" if sent_block else "")
            # 3. the facts service's after_reply raises: after_send swallows and logs it.
            with _capture_logs() as logs:
                raised = ""
                try:
                    asyncio.run(hub.after_send(reply))
                except Exception as exc:
                    raised = f"after_send raised {type(exc).__name__}: {exc}"
            judge("after_reply raising", reply, logs, "fact extraction failed", problem=raised)
            # 4. the extraction model raises inside the real FactKeeper.
            async def exploding(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
                if is_extraction(messages):
                    raise RuntimeError("extraction model down")
                return "re: " + last_user_text(messages)

            hub = make_hub(store, FunctionModel(exploding), facts=True)
            with _capture_logs() as logs:

                async def talk() -> Reply | None:
                    answer = await hub.handle(Inbound(scope="user:73", text="my email is ann@example.com"))
                    await hub.after_send(answer)
                    return answer

                reply = asyncio.run(talk())
            judge("extraction model raising", reply, logs, "fact extraction failed", text="re: ")
            out.note(f"{out.verified[FAILURES_ANSWERED]} failure cases answered and logged" if out.ok else "see the failures above")
    return out


# -- coordination (events, claims) ----------------------------------------------------------------


def event_cursors(workdir: Path, *, emitters: int = 10, per_emitter: int = 1000, consumers: int = 3, kills: int = 20, seed: int = 0) -> Outcome:
    """Emitters and consumers SIGKILLed at random: every consumer sees every event, none again after its cursor."""
    from .faults_coordination import event_storm

    out = Outcome("event_cursors")
    with _timed(out):
        counts = event_storm(workdir, emitters=emitters, per_emitter=per_emitter, consumers=consumers, kills=kills, seed=seed)
    if not counts["events_lost"] and not counts["ticks_missing"]:
        out.verify("events seen by every consumer", counts["events_committed"])
    out.verify(KILLS_SURVIVED, counts["emitters_killed"] + counts["consumers_killed"])
    if counts["ticks_missing"]:
        out.fail("lost", f"{counts['ticks_missing']} acknowledged events are not in the log")
    if counts["events_lost"]:
        out.fail("lost", f"{counts['events_lost']} events never shown to a consumer", counts["events_lost"])
    if counts["shown_again_after_commit"]:
        out.fail("duplicated", "events shown again after the cursor had passed them", counts["shown_again_after_commit"])
    out.note(
        f"{counts['events_committed']:,} events by {emitters} emitters, {consumers} consumers; "
        f"SIGKILLs: {counts['emitters_killed']} emitters, {counts['consumers_killed']} consumers; "
        f"every consumer saw every event at least once: {'yes' if not counts['events_lost'] else 'no'}; "
        f"shown again after commit: {counts['shown_again_after_commit']}; "
        f"shown again before commit (at-least-once, allowed): {counts['shown_again_before_commit']}"
    )
    out.details = counts
    return out


def two_processes(workdir: Path, *, chats: int = 10, per_chat: int = 20, reminders: int = 50, seed: int = 0) -> Outcome:
    """Two hub processes on one database and one stream: nothing answered twice, no reminder fired twice."""
    from .faults_coordination import two_hubs

    out = Outcome("two_processes")
    with _timed(out):
        counts = two_hubs(workdir, chats=chats, per_chat=per_chat, reminders=reminders, seed=seed)
    out.verify("messages answered once by two processes", counts["messages_answered"] - counts["messages_answered_twice"])
    out.verify("reminders fired once by two processes", counts["reminders_fired"] - counts["reminders_fired_twice"])
    if counts["processes_ok"] != 2:
        out.fail("crashed", f"{2 - counts['processes_ok']} hub process(es) failed")
    if counts["messages_answered_twice"]:
        out.fail("duplicated", "messages answered twice", counts["messages_answered_twice"])
    if counts["reminders_fired_twice"]:
        out.fail("duplicated", "reminders fired twice", counts["reminders_fired_twice"])
    missing = counts["messages"] - counts["messages_answered"] + counts["reminders"] - counts["reminders_fired"]
    if missing:
        out.fail("lost", f"{missing} messages or reminders never answered or fired", missing)
    out.note(
        f"{counts['messages']} messages delivered to both processes: answered {counts['messages_answered']}, twice "
        f"{counts['messages_answered_twice']}; {counts['reminders']} due reminders: fired {counts['reminders_fired']}, "
        f"twice {counts['reminders_fired_twice']}"
    )
    out.details = counts
    return out


def worker_kills(
    workdir: Path,
    *,
    workers: int = 3,
    chats: int = 30,
    kills: int = 10,
    reminders: int = 20,
    database: str = "postgresql",
    seed: int = 0,
) -> Outcome:
    """Three webhook workers, one killed -9 ``kills`` times under load, PostgreSQL restarted once: nothing lost or twice."""
    from .faults_workers import worker_kills as run

    out = Outcome("worker_kills")
    with _timed(out):
        counts = run(workdir, workers=workers, chats=chats, kills=kills, reminders=reminders, database=database, seed=seed)
    if "skipped" in counts:
        out.note(f"skipped: {counts['skipped']}")
        out.details = counts
        return out
    out.verify(KILLS_SURVIVED, counts["kills"])
    out.verify("messages answered once, in order, by several workers", counts["answered"] - counts["answered_twice"] - counts["out_of_order"])
    out.verify("reminders fired once by several workers", counts["reminders_fired"] - counts["reminders_fired_twice"])
    if counts["lost"] or counts["undelivered"]:
        out.fail("lost", "messages never answered (or never taken by any worker)", counts["lost"] + counts["undelivered"])
    if counts["answered_twice"] or counts["stored_replies_twice"]:
        out.fail("duplicated", "messages answered twice", max(counts["answered_twice"], counts["stored_replies_twice"]))
    if counts["reminders_fired_twice"]:
        out.fail("duplicated", "reminders fired twice", counts["reminders_fired_twice"])
    if counts["reminders_fired"] < counts["reminders"]:
        out.fail("lost", "reminders never fired", counts["reminders"] - counts["reminders_fired"])
    if counts["out_of_order"]:
        out.fail("crashed", "replies of one chat out of order", counts["out_of_order"])
    if counts["worker_tracebacks"]:
        out.fail("crashed", f"tracebacks in the workers' logs: {counts['traceback_lines']}", counts["worker_tracebacks"])
    restart = (
        f"PostgreSQL restarted once ({counts['database_restart_s']} s)" if counts["database_restarts"] else f"no database restart ({counts['database']})"
    )
    out.note(
        f"{counts['workers']} workers on {counts['database']}, {counts['kills']} SIGKILLs, {restart}; "
        f"{counts['messages']} messages: answered {counts['answered']}, lost {counts['lost']}, twice {counts['answered_twice']}, "
        f"out of order {counts['out_of_order']}; {counts['reminders']} reminders: fired {counts['reminders_fired']}, twice "
        f"{counts['reminders_fired_twice']}; latency p50 {counts['p50_s']} s, p95 {counts['p95_s']} s; "
        f"{counts['post_retries']} deliveries retried"
    )
    out.details = counts
    return out


# -- the report ---------------------------------------------------------------------------------

SCENARIOS = (
    "crash_import",
    "crash_handle",
    "concurrency",
    "concurrency_litellm",
    "first_open",
    "model_faults",
    "hostile_input",
    "isolation",
    "fail_open",
    "event_cursors",
    "two_processes",
    "worker_kills",
)

_HEAVY: dict[str, dict[str, Any]] = {
    "crash_import": {"messages": 10_000, "kills": 20, "batch": 100},
    "crash_handle": {"messages": 10_000, "chats": 20, "kills": 20},
    "concurrency": {"chats": 50, "per_chat": 40, "writer_messages": 5000},
    "concurrency_litellm": {"chats": 50, "per_chat": 40, "writer_messages": 5000, "use_litellm": True},
    "first_open": {"rounds": 10, "processes": 4},
    "model_faults": {},
    "hostile_input": {"examples": 100_000},
    "isolation": {"scopes": 100},
    "fail_open": {},
    "event_cursors": {"emitters": 10, "per_emitter": 1000, "consumers": 3, "kills": 20},
    "two_processes": {"chats": 10, "per_chat": 20, "reminders": 50},
    "worker_kills": {"workers": 3, "chats": 30, "kills": 10, "reminders": 20},
}
_QUICK: dict[str, dict[str, Any]] = {
    "crash_import": {"messages": 2000, "kills": 3, "batch": 50},
    "crash_handle": {"messages": 300, "chats": 5, "kills": 3},
    "concurrency": {"chats": 10, "per_chat": 10, "writer_messages": 500},
    "concurrency_litellm": {"chats": 5, "per_chat": 5, "writer_messages": 200, "use_litellm": True},
    "first_open": {"rounds": 3, "processes": 3},
    "model_faults": {},
    "hostile_input": {"examples": 300},
    "isolation": {"scopes": 10},
    "fail_open": {},
    "event_cursors": {"emitters": 3, "per_emitter": 100, "consumers": 2, "kills": 4},
    "two_processes": {"chats": 3, "per_chat": 4, "reminders": 6},
    "worker_kills": {"workers": 3, "chats": 5, "kills": 2, "reminders": 4},
}
_FUNCTIONS: dict[str, Callable[..., Outcome]] = {
    "crash_import": crash_import,
    "crash_handle": crash_handle,
    "concurrency": concurrency,
    "concurrency_litellm": concurrency,
    "first_open": first_open,
    "model_faults": model_faults,
    "hostile_input": hostile_input,
    "isolation": isolation,
    "fail_open": fail_open,
    "event_cursors": event_cursors,
    "two_processes": two_processes,
    "worker_kills": worker_kills,
}

# The Maildir scenarios (issue 17) live in faults_maildir.py.
SCENARIOS = (*SCENARIOS, *MAILDIR_SCENARIOS)
_HEAVY.update(MAILDIR_HEAVY)
_QUICK.update(MAILDIR_QUICK)
_FUNCTIONS.update(MAILDIR_FUNCTIONS)


def run_faults(
    workdir: Path,
    *,
    quick: bool = False,
    seed: int = 0,
    only: Sequence[str] = (),
    echo: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the scenarios; returns the report.

    ``{"ok": bool, "failed": [scenario, ...], "seconds": float, "scenarios": {name: {"verified":
    {unit: count}, "lost": n, "duplicated": n, "leaked": n, "crashed": n, "seconds": s,
    "notes": [...]}}}``. Nothing is summed across scenarios: their units differ.
    """
    sizes = _QUICK if quick else _HEAVY
    scenarios: dict[str, Outcome] = {}
    for name in SCENARIOS:
        if only and name not in only:
            continue
        if echo:
            echo(f"{name} ...")
        kwargs = dict(sizes[name])
        if name == "hostile_input" and echo is not None:
            kwargs["progress"] = True
        try:
            outcome = _FUNCTIONS[name](workdir / name, seed=seed, **kwargs)
            outcome.name = name
        except Exception as exc:  # a broken scenario is reported, not allowed to hide the others
            log.exception("scenario %s failed", name)
            outcome = Outcome(name)
            outcome.fail("crashed", f"the scenario itself failed: {type(exc).__name__}: {exc}")
        scenarios[name] = outcome
        if echo:
            echo(
                f"{name}: {outcome.verified_text()}; "
                + ", ".join(f"{c} {getattr(outcome, c)}" for c in COUNTS)
                + f" ({outcome.seconds:.1f} s)"
            )
    failed = [name for name, outcome in scenarios.items() if not outcome.ok]
    return {
        "ok": not failed,
        "failed": failed,
        "seconds": round(sum(o.seconds for o in scenarios.values()), 1),
        "scenarios": {name: outcome.as_dict() for name, outcome in scenarios.items()},
    }


def format_faults(report: dict[str, Any]) -> str:
    """The report as a table (each scenario's failures, then what it verified, in its own units) plus its notes."""
    rows = [
        [name, *(s[c] for c in COUNTS), round(s["seconds"], 1), "; ".join(f"{n:,} {unit}" for unit, n in s["verified"].items()) or "nothing"]
        for name, s in report["scenarios"].items()
    ]
    lines = [_report.format_table(["scenario", *COUNTS, "seconds", "verified"], rows, title="Faults and hostile input")]
    for name, scenario in report["scenarios"].items():
        lines.append(f"\n{name}:")
        lines.extend(f"  - {note}" for note in scenario["notes"])
    if report["ok"]:
        verdict = f"nothing lost, duplicated, leaked or crashed in {len(report['scenarios'])} scenario(s)"
    else:
        verdict = f"FAILED: {', '.join(report['failed'])} (see the counts above)"
    lines.append(f"\n{verdict}")
    return "\n".join(lines)


@click.command("faults")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="write the report as JSON here")
@click.option("--quick", is_flag=True, help="the small versions the test suite runs (about a minute; the full run takes about half an hour)")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of every random choice and of hypothesis")
@click.option("--scenario", "-k", "only", multiple=True, type=click.Choice(SCENARIOS), help="run only these (repeatable)")
@click.option("--workdir", type=click.Path(file_okay=False), default=None, help="keep the scenarios' databases here (default: a temporary directory)")
def faults_command(json_out: str | None, quick: bool, seed: int, only: tuple[str, ...], workdir: str | None) -> None:
    """Crash, concurrency, model-fault, hostile-input, isolation and fail-open scenarios: what was verified and lost.

    Exits with status 1 when anything was lost, duplicated, leaked or crashed.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # The scenarios provoke failures on purpose; the hub's logs of them are not the report.
    logging.getLogger().addHandler(logging.NullHandler())
    with contextlib.ExitStack() as stack:
        if workdir is None:
            base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="agents-hub-faults-")))
        else:
            base = Path(workdir)
            base.mkdir(parents=True, exist_ok=True)
        report = run_faults(base, quick=quick, seed=seed, only=only, echo=lambda line: click.echo(line, err=True))
    click.echo(format_faults(report))
    if json_out:
        _report.write_json(json_out, report)
        click.echo(f"wrote {json_out}", err=True)
    if not report["ok"]:
        # sys.exit, not ctx.exit: hub.cli.main runs click with standalone_mode=False, where
        # ctx.exit(1) comes back as a return value it drops (exit status 0; see the report).
        sys.exit(1)

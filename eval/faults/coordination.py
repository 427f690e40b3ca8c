"""Coordination faults: events under kill -9, and two hubs on one database.

``event_storm``
    emitter processes each emit ``per_emitter`` events while consumer processes read
    them through their cursors; emitters and consumers are SIGKILLed at random points
    and restarted. Counted per consumer: events it never saw (lost) and events it was
    shown again after its cursor had passed them (shown again after commit). Being shown
    an event twice *before* the cursor moved is the at-least-once promise, not a fault.
``two_hubs``
    two hub processes on one database get the same stream of messages (every message
    delivered to both, as a retried webhook would) and the same due reminders: messages
    answered twice and reminders fired twice are counted.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from scopehub.memory import (
    EventPayload,
    Reminder,
    Store,
    add_reminder,
    advance_cursor,
    cursor_of,
    emit_event,
    event_type,
    register_event_type,
    unconsumed_events,
)

from ._harness import child_env
from ._outcome import KILLS_SURVIVED, Outcome, Scenario, timed

__all__ = ["event_storm", "two_hubs"]

STORM_SCOPE = "group:-777"
STORM_TYPE = "fault.tick"


class Tick(EventPayload):
    """One numbered event of one emitter (the storm's own type)."""

    emitter: str = Field(min_length=1)
    seq: int


if event_type(STORM_TYPE) is None:
    register_event_type(STORM_TYPE, Tick, description="a numbered event of the fault storm")


def _spawn(code: str, *args: str, out: Path) -> subprocess.Popen:
    handle = out.open("a")
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=handle, stderr=subprocess.STDOUT, env=child_env())


# -- children -----------------------------------------------------------------------------------

_EMITTER = "from scopehub.eval.faults.coordination import _emitter_child; _emitter_child()"
_CONSUMER = "from scopehub.eval.faults.coordination import _consumer_child; _consumer_child()"


def _emitter_child(argv: Sequence[str] | None = None) -> None:
    """Emit ticks ``start..end``; print ``ack N`` after each one is committed."""
    db, name, start, end = (argv or sys.argv[1:])[:4]
    with Store(db) as store:
        for seq in range(int(start), int(end)):
            emit_event(store, STORM_SCOPE, name, STORM_TYPE, {"emitter": name, "seq": seq})
            print(f"ack {seq}", flush=True)


def _consumer_child(argv: Sequence[str] | None = None) -> None:
    """Read past the cursor, log what was shown (with the cursor it was read at), then commit the cursor."""
    db, agent, log_path, done_path = (argv or sys.argv[1:])[:4]
    with Store(db) as store, open(log_path, "a") as log:
        idle_after_done = 0
        while True:
            cursor = cursor_of(store, STORM_SCOPE, agent)
            shown = unconsumed_events(store, STORM_SCOPE, agent, interests={STORM_TYPE}, limit=200)
            if shown:
                log.write(json.dumps({"cursor": cursor, "ids": [e.id for e in shown]}) + "\n")
                log.flush()
                os.fsync(log.fileno())
                advance_cursor(store, STORM_SCOPE, agent, shown[-1].id)
                idle_after_done = 0
                continue
            if os.path.exists(done_path):
                idle_after_done += 1
                if idle_after_done >= 3:
                    return
            time.sleep(0.01)


# -- event storm --------------------------------------------------------------------------------


def _acked(path: Path) -> int:
    if not path.exists():
        return -1
    seqs = [int(line.split()[1]) for line in path.read_text().splitlines() if line.startswith("ack ")]
    return max(seqs, default=-1)


def event_storm(
    workdir: Path, *, emitters: int = 10, per_emitter: int = 1000, consumers: int = 3, kills: int = 20, seed: int = 0
) -> dict[str, int]:
    """Run the storm; returns the counts (see the module docstring)."""
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "storm.db"
    Store(db).close()  # migrate once before the crowd arrives
    done = workdir / "emitters.done"
    emit_procs: dict[str, subprocess.Popen] = {}
    cons_procs: dict[str, subprocess.Popen] = {}
    names = [f"e{i}" for i in range(emitters)]
    agents = [f"c{i}" for i in range(consumers)]

    def start_emitter(name: str) -> None:
        out = workdir / f"{name}.out"
        emit_procs[name] = _spawn(_EMITTER, str(db), name, str(_acked(out) + 1), str(per_emitter), out=out)

    def start_consumer(agent: str) -> None:
        cons_procs[agent] = _spawn(_CONSUMER, str(db), agent, str(workdir / f"{agent}.log"), str(done), out=workdir / f"{agent}.out")

    for name in names:
        start_emitter(name)
    for agent in agents:
        start_consumer(agent)
    killed = {"emitter": 0, "consumer": 0}
    for _ in range(kills):
        time.sleep(rng.uniform(0.05, 0.4))
        if rng.random() < 0.5:
            running = [n for n, p in emit_procs.items() if p.poll() is None]
            if not running:
                continue
            victim = rng.choice(running)
            emit_procs[victim].send_signal(signal.SIGKILL)
            emit_procs[victim].wait()
            killed["emitter"] += 1
            start_emitter(victim)
        else:
            victim = rng.choice(agents)
            cons_procs[victim].send_signal(signal.SIGKILL)
            cons_procs[victim].wait()
            killed["consumer"] += 1
            start_consumer(victim)
    # Let every emitter finish (restarting any that died on its own), then the consumers drain.
    while True:
        for name, proc in emit_procs.items():
            if proc.poll() not in (None, 0):
                start_emitter(name)
        if all(p.poll() == 0 for p in emit_procs.values()):
            break
        time.sleep(0.05)
    done.touch()
    for agent, proc in cons_procs.items():
        if proc.wait(timeout=300) != 0:
            start_consumer(agent)
            cons_procs[agent].wait(timeout=300)
    with Store(db) as store:
        ids = [row[0] for row in store.query("SELECT id FROM events WHERE scope = ? ORDER BY id", (STORM_SCOPE,))]
        ticks = Counter(
            tuple(json.loads(row[0]).values()) for row in store.query("SELECT payload FROM events WHERE scope = ?", (STORM_SCOPE,))
        )
    expected = {(name, seq) for name in names for seq in range(per_emitter)}
    counts = {
        "events_committed": len(ids),
        "ticks_missing": len(expected - set(ticks)),
        "emitters_killed": killed["emitter"],
        "consumers_killed": killed["consumer"],
        "consumers": consumers,
        "events_lost": 0,
        "shown_again_after_commit": 0,
        "shown_again_before_commit": 0,
    }
    all_ids = set(ids)
    for agent in agents:
        seen: Counter[int] = Counter()
        for line in (workdir / f"{agent}.log").read_text().splitlines():
            entry = json.loads(line)
            for event_id in entry["ids"]:
                if event_id <= entry["cursor"]:
                    counts["shown_again_after_commit"] += 1
                seen[event_id] += 1
        counts["events_lost"] += len(all_ids - set(seen))
        counts["shown_again_before_commit"] += sum(n - 1 for n in seen.values() if n > 1)
    return counts


# -- two hubs -----------------------------------------------------------------------------------

_HUB = "from scopehub.eval.faults.coordination import _hub_child; _hub_child()"


def _hub_child(argv: Sequence[str] | None = None) -> None:
    """One hub process: answer every message of the stream file, fire every due reminder."""
    db, stream_path, fired_path, holder = (argv or sys.argv[1:])[:4]
    from scopehub.eval.faults._harness import echo_model, make_hub
    from scopehub.hub.orchestrator import Inbound
    from scopehub.hub.reminders import fire_reminder
    from scopehub.memory import due_reminders

    stream = [json.loads(line) for line in Path(stream_path).read_text().splitlines()]

    async def run() -> None:
        with Store(db) as store:
            hub = make_hub(store, echo_model(max_latency=0.02, seed=sum(map(ord, holder))))
            for item in stream:
                await hub.handle(Inbound(scope=item["scope"], text=item["text"], ext_id=item["ext_id"]))
            async def send(reminder: Reminder) -> bool:
                with open(fired_path, "a") as fired:  # O_APPEND: both processes' lines survive whole
                    fired.write(f"{reminder.scope} {reminder.id}\n")
                return True

            for reminder in due_reminders(store, time.time()):
                await fire_reminder(store, reminder.scope, reminder.id, send=send, holder=holder)

    asyncio.run(run())


def two_hubs(workdir: Path, *, chats: int = 10, per_chat: int = 20, reminders: int = 50, seed: int = 0) -> dict[str, int]:
    """Two hub processes, one database, one stream delivered to both; returns the counts."""
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "two.db"
    scopes = [f"user:{900 + i}" for i in range(chats)]
    stream = [{"scope": scope, "text": f"message {n} of {scope}", "ext_id": f"{scope}:{n}"} for n in range(per_chat) for scope in scopes]
    stream_path = workdir / "stream.jsonl"
    stream_path.write_text("\n".join(json.dumps(item) for item in stream) + "\n")
    with Store(db) as store:
        for i in range(reminders):
            add_reminder(store, rng.choice(scopes), f"reminder {i}", due=time.time() - 1, chat="1")
    fired = workdir / "fired.txt"
    procs = [_spawn(_HUB, str(db), str(stream_path), str(fired), f"hub-{i}", out=workdir / f"hub-{i}.out") for i in range(2)]
    codes = [proc.wait(timeout=600) for proc in procs]
    with Store(db) as store:
        answered = Counter(
            row[0] for row in store.query("SELECT reply_to FROM messages WHERE role = 'agent' AND reply_to IS NOT NULL")
        )
        stored = store.count_messages() - sum(answered.values())
    fires = Counter(fired.read_text().splitlines()) if fired.exists() else Counter()
    return {
        "processes_ok": sum(1 for code in codes if code == 0),
        "messages": len(stream),
        "messages_stored": stored,
        "messages_answered": len(answered),
        "messages_answered_twice": sum(1 for n in answered.values() if n > 1),
        "reminders": reminders,
        "reminders_fired": len(fires),
        "reminders_fired_twice": sum(1 for n in fires.values() if n > 1),
    }


# -- the scenarios' verdicts ---------------------------------------------------------------------



def event_cursors(workdir: Path, *, emitters: int = 10, per_emitter: int = 1000, consumers: int = 3, kills: int = 20, seed: int = 0) -> Outcome:
    """Emitters and consumers SIGKILLed at random: every consumer sees every event, none again after its cursor."""
    out = Outcome("event_cursors")
    with timed(out):
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
    out = Outcome("two_processes")
    with timed(out):
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




SCENARIOS = {
    "event_cursors": Scenario(
        event_cursors,
        heavy={"emitters": 10, "per_emitter": 1000, "consumers": 3, "kills": 20},
        quick={"emitters": 3, "per_emitter": 100, "consumers": 2, "kills": 4},
    ),
    "two_processes": Scenario(
        two_processes, heavy={"chats": 10, "per_chat": 20, "reminders": 50}, quick={"chats": 3, "per_chat": 4, "reminders": 6}
    ),
}

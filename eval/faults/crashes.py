"""Crash safety: ``crash_import`` and ``crash_handle`` SIGKILL a child process at random points."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from scopehub.hub.orchestrator import (
    Inbound,
)
from scopehub.memory import (
    Store,
)

from ._harness import (
    PHRASES,
    Observer,
    child_env,
    echo_model,
    make_hub,
    reopen,
    tail_of,
    write_log,
)
from ._outcome import (
    ANSWERED_ONCE,
    KILLS_SURVIVED,
    PRESENT_ONCE,
    Outcome,
    Scenario,
    timed,
)

log = logging.getLogger(__name__)



def _check_import(
    db: Path, acknowledged: dict[tuple[str, str], str], expected: dict[tuple[str, str], str], out: Outcome, label: str
) -> tuple[int, int]:
    """After a restart: every acknowledged message present once and unaltered.

    Returns how many messages are there, and how many acknowledged ones are there exactly
    once and unaltered.
    """
    store = reopen(db, out, label)
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
    with timed(out):
        rng = random.Random(seed)
        workdir.mkdir(parents=True, exist_ok=True)
        log_path = workdir / "crash_import.jsonl"
        expected = write_log(log_path, messages, [*(f"user:{i}" for i in range(1, 6)), "group:-100"], seed)
        errors = workdir / "crash_import.stderr"
        done = early = runs = rounds = 0
        startup = 0.3  # seconds from spawn to the first commit; measured as runs go
        complete = True
        while done < kills:
            rounds += 1
            db = workdir / f"crash_import.{rounds}.db"
            command = [sys.executable, "-m", "scopehub.hub.cli", "--db", str(db), "import", str(log_path), "--batch", str(batch)]
            observer = Observer(db)
            acknowledged: dict[tuple[str, str], str] = {}
            try:
                while done < kills:
                    before = observer.count()
                    if before >= messages:
                        break
                    with errors.open("ab") as err:
                        proc = subprocess.Popen(command, cwd=workdir, env=child_env(), stdout=subprocess.DEVNULL, stderr=err)
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
                        out.fail("crashed", f"run {runs}: agents-hub import exited {proc.returncode}: {tail_of(errors)}")
                    _check_import(db, acknowledged, expected, out, f"round {rounds}, kill {done}")
                    if killed and out.failures == failures:
                        out.verify(KILLS_SURVIVED)
            finally:
                observer.close()
            # A re-run completes the rest.
            final = subprocess.run(command, cwd=workdir, env=child_env(), capture_output=True, text=True, timeout=900)
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



_HANDLE_CHILD = "from scopehub.eval.faults.crashes import _handle_child; _handle_child()"
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
    store = reopen(db, out, label)
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
    with timed(out):
        rng = random.Random(seed)
        workdir.mkdir(parents=True, exist_ok=True)
        db = workdir / "crash_handle.db"
        inbox = workdir / "crash_handle.inbox.jsonl"
        errors = workdir / "crash_handle.stderr"
        scopes = [f"user:{i}" if i % 2 else f"group:-{i}" for i in range(1, chats + 1)]
        items = [
            {"scope": scopes[i % chats], "ext_id": f"t{i}", "text": f"{rng.choice(PHRASES)} (#{i})"} for i in range(messages)
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
                    env=child_env(),
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
                out.fail("crashed", f"run {runs}: the handling process exited {proc.returncode}: {tail_of(errors)}")
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




SCENARIOS = {
    "crash_import": Scenario(crash_import, heavy={"messages": 10_000, "kills": 20, "batch": 100}, quick={"messages": 2000, "kills": 3, "batch": 50}),
    "crash_handle": Scenario(crash_handle, heavy={"messages": 10_000, "chats": 20, "kills": 20}, quick={"messages": 300, "chats": 5, "kills": 3}),
}

"""``maildir_kill``: the hub SIGKILLed while it ingests a backlog."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scopehub.hub.transports.maildir.send import send_dispatch
from scopehub.memory import Store

from .._outcome import KILLS_SURVIVED, Outcome, Scenario, timed
from ._harness import (
    CLAIM_TTL,
    INBOXES,
    TEAMS,
    _Answered,
    _answered,
    _answers,
    _body,
    _bound,
    _count_files,
    _dlq_entries,
    _HubProcess,
    _payload,
    _report_answered,
    _report_process,
    _rows,
    _running_hub,
    _stored,
    _wait,
)

# -- kill -9 while ingesting ----------------------------------------------------------------------


def _write_backlog(
    root: Path, files: int, scopes: Sequence[str], rng: random.Random
) -> tuple[dict[tuple[str, str], Path], dict[tuple[str, str], str]]:
    """``files`` dispatches asking for a reply, spread over scopes, inboxes and senders: their boxes and tokens."""
    expected, tokens = {}, {}
    base = time.time() - 3600
    for i in range(files):
        scope, inbox = scopes[i % len(scopes)], INBOXES[(i // len(scopes)) % len(INBOXES)]
        path = send_dispatch(
            root,
            scope,
            inbox,
            sender=TEAMS[i % len(TEAMS)],
            body=_body(f"f{i}", _payload(f"f{i}", rng.randint(20, 400))),
            subject=f"file {i}",
            priority=rng.choice(("urgent", "normal", "normal", "low")),
            reply=True,
            created=base + i * 0.37,
        )
        assert path is not None
        expected[(scope, path.name)] = path.parent.parent
        tokens[(scope, path.name)] = f"f{i}"
    return expected, tokens


def _in_flight(db: Path, expected: dict[tuple[str, str], Path]) -> tuple[int, int]:
    """After a kill: files still in new/ whose message is committed, and how many of those are answered."""
    stored = _stored(db)
    answers = _answers(db)
    committed = answered = 0
    for (scope, name), box in expected.items():
        if (scope, name) in stored and os.path.lexists(box / "new" / name):
            committed += 1
            answered += answers.get(stored[(scope, name)][0], 0) > 0
    return committed, answered


def kill_ingest(
    workdir: Path,
    *,
    files: int = 2000,
    kills: int = 20,
    scopes: int = 20,
    seed: int = 0,
    claim_ttl: float = CLAIM_TTL,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Ingest ``files`` with the hub SIGKILLed ``kills`` times; returns the counts (module docstring)."""
    rng = random.Random(seed)
    timeout = _bound(timeout, files)
    workdir.mkdir(parents=True, exist_ok=True)
    db, root = workdir / "hub.db", workdir / "maildir"
    Store(db).close()
    scope_names = [f"user:{7000 + i}" if i % 2 else f"group:-{7000 + i}" for i in range(scopes)]
    started = time.perf_counter()
    expected, tokens = _write_backlog(root, files, scope_names, rng)
    boxes = sorted(set(expected.values()))
    written_in = time.perf_counter() - started
    moved = lambda: _count_files(boxes, "cur")  # noqa: E731
    users = lambda: (_rows(db, "SELECT COUNT(*) FROM messages WHERE role = 'user'") or [(0,)])[0][0]  # noqa: E731
    hub = _HubProcess(workdir, db, root, ttl=claim_ttl)
    targets = sorted(rng.sample(range(1, files), min(kills, files - 1)))
    counts: dict[str, Any] = {
        "files": files,
        "kills": 0,
        "kills_aimed_between_commit_and_move": 0,
        "kills_with_a_file_committed_not_moved": 0,
        "kills_with_a_file_committed_unanswered": 0,
        "moved_at_kills": [],
        "seconds_writing": round(written_in, 1),
    }
    with _running_hub(hub):
        for k, target in enumerate(targets):
            _wait(lambda target=target: moved() >= target, hub, timeout, step=0.005)
            aimed = k % 2 == 1
            if aimed:  # wait (a little) for a file that is committed and not yet in cur/
                counts["kills_aimed_between_commit_and_move"] += 1
                # Long enough for a hub that was just restarted (imports, then its first pass) on
                # a loaded machine: 2 s missed the window there, and the kill then aimed at nothing.
                deadline = time.monotonic() + 10.0
                while time.monotonic() < deadline and users() <= moved():
                    time.sleep(0.002)
            else:
                time.sleep(rng.uniform(0.0, 0.05))
            counts["moved_at_kills"].append(moved())
            hub.kill()
            counts["kills"] += 1
            committed, answered = _in_flight(db, expected)
            counts["kills_with_a_file_committed_not_moved"] += committed > 0
            counts["kills_with_a_file_committed_unanswered"] += committed > answered
            hub.start()
        finished = _wait(lambda: moved() == files or (_count_files(boxes, "new") == 0 and moved() + _dlq_entries(root) >= files), hub, timeout)
        counts["exit_status"] = hub.stop()
    counts["seconds"] = round(time.perf_counter() - started, 1)
    answered, _texts = _answered(db, root, expected, tokens)
    counts.update(
        finished=finished,
        hub_starts=hub.starts,
        hub_died=hub.died,
        failed_passes=hub.failed_passes(),
        dlq=_dlq_entries(root),
        left_in_new=_count_files(boxes, "new"),
        answered=answered,
    )
    return counts


def maildir_kill(
    workdir: Path, *, files: int = 2000, kills: int = 20, scopes: int = 20, seed: int = 0, claim_ttl: float = CLAIM_TTL
) -> Outcome:
    """The hub SIGKILLed while it ingests: every file answered exactly once."""

    out = Outcome("maildir_kill")
    with timed(out):
        counts = kill_ingest(workdir, files=files, kills=kills, scopes=scopes, seed=seed, claim_ttl=claim_ttl)
    answered: _Answered = counts["answered"]
    _report_answered(out, answered)
    _report_process(out, counts)
    out.verify(KILLS_SURVIVED, counts["kills"])
    out.verify("files answered exactly once (database and outbox)", answered.right)
    out.note(
        f"{files:,} files in {scopes} scopes x {len(INBOXES)} inboxes; {counts['kills']} SIGKILLs at "
        f"{counts['moved_at_kills']} files moved; {counts['kills_with_a_file_committed_not_moved']} kills left a file "
        f"committed but still in new/ ({counts['kills_with_a_file_committed_unanswered']} of them unanswered), "
        f"{counts['kills_aimed_between_commit_and_move']} kills aimed there"
    )
    out.note(
        f"answered 0 times: {answered.answered_0} (database), {answered.outbox_0} (outbox); more than once: "
        f"{answered.answered_twice} (database), {answered.outbox_twice} (outbox); not stored: {answered.not_stored}; "
        f"hub starts: {counts['hub_starts']}; writing the backlog: {counts['seconds_writing']} s, in all {counts['seconds']} s"
    )
    out.details = counts
    return out


SCENARIOS = {
    "maildir_kill": Scenario(maildir_kill, heavy={"files": 2000, "kills": 20, "scopes": 20}, quick={"files": 60, "kills": 3, "scopes": 4}),
}

"""``maildir_two_intakes``: two hub processes watching one Maildir (a shared volume), one database.

Both start on a backlog of ``files`` dispatches (each asking for a reply) and keep
taking new ones written while they run. Counted per file: stored, answered once, one reply
file, moved to ``cur/`` (else lost or duplicated, as in the other Maildir scenarios), and
``dlq/`` entries: every file is good, so a reason in ``dlq/`` is a false report of a file
the other intake delivered (duplicated: the audit found 1 of 6 and 3 of 10), a good file
in ``dlq/`` is lost. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scopehub.hub.transports.maildir.send import send_dispatch
from scopehub.memory import open_store

from .._backends import databases
from .._harness import child_env
from .._outcome import Outcome, Scenario, timed
from ._harness import INBOXES, TEAMS, _answered, _listdir, _report_answered

__all__ = ["maildir_two_intakes"]

UNIT = "files taken by one of two intakes, answered once"
_CHILD = "from scopehub.eval.faults.maildir.intakes import _intake_child; _intake_child()"


def _intake_child(argv: Sequence[str] | None = None) -> None:
    """One hub process with the real watcher over ``root`` (either backend), until SIGTERM."""
    import logging

    db, root = (argv or sys.argv[1:])[:2]
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from scopehub.eval.faults._harness import echo_model, make_hub
    from scopehub.hub.transports.maildir.bridge import start_watcher

    async def run() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        store = open_store(db)
        try:
            hub = make_hub(store, echo_model(max_latency=0.01), maildir_rate=100_000)
            watcher = start_watcher(hub, Path(root))
            print(f"ready {watcher.mode}", flush=True)
            await stop.wait()
            await watcher.stop()
            await hub.drain()
        finally:
            store.close()
        print("stopped", flush=True)

    asyncio.run(run())


def _send(root: Path, scopes: Sequence[str], start: int, count: int) -> dict[tuple[str, str], Path]:
    sent = {}
    for i in range(start, start + count):
        scope, inbox = scopes[i % len(scopes)], INBOXES[i % len(INBOXES)]
        path = send_dispatch(root, scope, inbox, sender=TEAMS[i % len(TEAMS)], subject=f"report {i}", body=f"body of report {i}", reply=True)
        assert path is not None
        sent[(scope, path.name)] = path.parent.parent
    return sent


def _dlq(root: Path) -> tuple[int, int]:
    """(reasons, files) in ``dlq/``."""
    reasons = files = 0
    for folder in _listdir(root / "dlq"):
        for inbox in _listdir(root / "dlq" / folder):
            for name in _listdir(root / "dlq" / folder / inbox):
                if name.endswith(".reason"):
                    reasons += 1
                elif not name.startswith("."):
                    files += 1
    return reasons, files


def _two(workdir: Path, db: str, root: Path, files: int, during: int, timeout: float) -> dict[str, Any]:
    scopes = ["user:42", "group:-42", "user:43"]
    expected = _send(root, scopes, 0, files)
    procs, logs = [], []
    for k in range(2):
        log = workdir / f"intake-{k}.out"
        logs.append(log)
        with log.open("w") as handle:
            procs.append(subprocess.Popen([sys.executable, "-c", _CHILD, db, str(root)], stdout=handle, stderr=subprocess.STDOUT, env=child_env()))
    try:
        expected |= _send(root, scopes, files, during)  # written while both start and take
        deadline = time.monotonic() + timeout
        boxes = set(expected.values())

        def settled() -> bool:
            return all(not os.path.lexists(box / "new" / name) for (_scope, name), box in expected.items()) and all(
                not _listdir(box / "new") for box in boxes
            )

        while time.monotonic() < deadline and not settled():
            if any(proc.poll() is not None for proc in procs):
                break
            time.sleep(0.1)
        finished = settled()
        time.sleep(0.5)  # the last replies' receipts
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes = []
        for proc in procs:
            try:
                codes.append(proc.wait(timeout=60))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(-9)
    counts, _texts = _answered(db, root, expected)  # type: ignore[arg-type]
    reasons, in_dlq = _dlq(root)
    tracebacks = sum(log.read_text(errors="replace").count("Traceback") for log in logs)
    return {"answered": counts, "files": len(expected), "dlq_reasons": reasons, "dlq_files": in_dlq, "finished": finished, "codes": codes, "tracebacks": tracebacks}


_FAILURES = (
    ("dlq_files", "lost", "good files moved to dlq/"),
    ("dlq_reasons", "duplicated", "false dlq/ entries (a reason for a file the other intake delivered)"),
)


def maildir_two_intakes(workdir: Path, *, files: int = 60, during: int = 60, timeout: float = 300.0, seed: int = 0) -> Outcome:
    """Two hub processes on one Maildir and one database: each file once, no false dlq/ entry (both backends)."""
    out = Outcome("maildir_two_intakes")
    with timed(out), databases(workdir, out) as found:
        for backend, db in found:
            run_dir = workdir / backend
            run_dir.mkdir(parents=True, exist_ok=True)
            open_store(db).close()  # migrated before the two processes arrive
            counts = _two(run_dir, db, run_dir / "maildir", files, during, timeout)
            out.verify(f"{UNIT} ({backend})", counts["answered"].right)
            _report_answered(out, counts["answered"])
            for field, kind, what in _FAILURES:
                if counts.get(field):
                    out.fail(kind, f"{backend}: {counts[field]} {what}", counts[field])
            if not counts["finished"]:
                out.fail("lost", f"{backend}: the intakes did not settle every file within {timeout:.0f} s")
            if any(code != 0 for code in counts["codes"]) or counts["tracebacks"]:
                out.fail("crashed", f"{backend}: exit statuses {counts['codes']}, {counts['tracebacks']} tracebacks in the logs ({run_dir})")
            out.note(f"{backend}: {counts['files']} files ({files} waiting, {during} written while both ran), dlq/ reasons {counts['dlq_reasons']}")
    return out


SCENARIOS = {
    "maildir_two_intakes": Scenario(maildir_two_intakes, heavy={"files": 150, "during": 150}, quick={"files": 12, "during": 12}),
}

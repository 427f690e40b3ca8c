"""The Maildir scenarios' hub process, and how they look at its results."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scopehub.hub.transports.maildir.files import parse_dispatch_text
from scopehub.memory import Store

from .._harness import child_env
from .._outcome import Outcome

INBOXES = ("notes", "tasks", "hub", "inbox")  # real agents of the registry, and the routed inbox
TEAMS = ("crm", "ci", "cron")  # the senders: replies come back into outbox/<team>/
CLAIM_TTL = 20.0  # the child hub's claim TTL: longer than a restart, so a SIGKILLed answer's claim is still held after it
_TOKEN = re.compile(r"token (\S+) sha256=([0-9a-f]{64})")
_FAILED_PASS = ("an intake pass failed", "the staleness check failed", "Traceback")


# -- the hub process ----------------------------------------------------------------------------

_HUB = "from scopehub.eval.faults.maildir._harness import _hub_child; _hub_child()"


def _hub_child(argv: Sequence[str] | None = None) -> None:
    """The hub process: the echo model, the real intake and watcher over ``root``, until SIGTERM.

    ``prompts`` (or ``-``): a file that gets every model call's messages, one JSON line each.
    """
    import logging

    db, root, ttl, prompts = (argv or sys.argv[1:])[:4]
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from scopehub.eval.faults._harness import echo_model, make_hub
    from scopehub.hub.models.testing import FunctionModel
    from scopehub.hub.transports.maildir.bridge import start_watcher

    echo = echo_model(max_latency=0.002)

    async def recording(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        with open(prompts, "a") as log:
            log.write(json.dumps([str(m.get("content") or "") for m in messages]) + "\n")
        return await echo.func(messages, tools)

    async def run() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        with Store(db) as store:
            model = echo if prompts == "-" else FunctionModel(recording, name="recording-echo")
            hub = make_hub(store, model, maildir_rate=100_000, claim_ttl=float(ttl))
            watcher = start_watcher(hub, Path(root))
            print(f"ready {watcher.mode}", flush=True)
            await stop.wait()
            await watcher.stop()
            await hub.drain()
        print("stopped", flush=True)

    asyncio.run(run())


class _HubProcess:
    """Starts, SIGKILLs and stops the hub child; counts its runs and how each one ended."""

    def __init__(self, workdir: Path, db: Path, root: Path, *, prompts: Path | None = None, ttl: float = CLAIM_TTL) -> None:
        self.workdir, self.db, self.root, self.prompts, self.ttl = workdir, db, root, prompts, ttl
        self.log = workdir / "hub.out"
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.died = 0  # exits nobody asked for

    def start(self) -> None:

        handle = self.log.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HUB, str(self.db), str(self.root), str(self.ttl), str(self.prompts or "-")],
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=child_env(),
        )
        handle.close()
        self.starts += 1

    def alive(self) -> bool:
        """Whether it runs; an unexpected exit is counted and the hub restarted."""
        assert self.proc is not None
        if self.proc.poll() is None:
            return True
        self.died += 1
        self.start()
        return False

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        """SIGTERM and wait: the exit status (0: it shut down cleanly).

        A run restarted just before (the last SIGKILL fell after the last file) is first let
        finish starting: a SIGTERM during its imports, before it listens for one, kills it
        (exit status -15), which says nothing about the hub's shutdown."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.wait_ready(timeout=120.0)
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()
                return -9
        return self.proc.returncode

    def wait_ready(self, timeout: float = 300.0) -> bool:
        """Wait until the current run printed ``ready`` (its first pass is under way)."""
        runs = self.starts
        return _wait(lambda: self.log.read_text(errors="replace").count("ready ") >= runs, self, timeout)

    def failed_passes(self) -> int:
        """Log lines that say an exception escaped (a pass failed, a traceback)."""
        if not self.log.exists():
            return 0
        text = self.log.read_text(errors="replace")
        return sum(text.count(mark) for mark in _FAILED_PASS)


@contextlib.contextmanager
def _running_hub(hub: _HubProcess) -> Iterator[_HubProcess]:
    hub.start()
    try:
        yield hub
    finally:
        if hub.proc is not None and hub.proc.poll() is None:
            hub.kill()


# -- looking at the results -----------------------------------------------------------------------


def _listdir(path: Path | str) -> list[str]:
    try:
        return os.listdir(path)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _rows(db: Path | str, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
    """A read-only query on the hub's database while the hub may be writing (WAL), or on a PostgreSQL URL."""
    if str(db).startswith("postgresql"):
        from scopehub.memory import open_store

        store = open_store(str(db))
        try:
            return store.query(sql, params)
        finally:
            store.close()
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as conn:
            return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError:
        return []


def _stored(db: Path) -> dict[tuple[str, str], tuple[int, str]]:
    """``(scope, file name) -> (message id, text)`` of every message stored from a file."""
    rows = _rows(db, "SELECT scope, ext_id, id, text FROM messages WHERE role = 'user' AND ext_id LIKE 'maildir:%'")
    return {(scope, ext[len("maildir:") :]): (mid, text) for scope, ext, mid, text in rows}


def _answers(db: Path) -> Counter[int]:
    """How many agent replies each message has."""
    rows = _rows(db, "SELECT reply_to, COUNT(*) FROM messages WHERE role = 'agent' AND reply_to IS NOT NULL GROUP BY reply_to")
    return Counter({reply_to: n for reply_to, n in rows})


def _outbox_replies(root: Path) -> list[dict[str, Any]]:
    """Every reply file in every team's outbox (new/ and cur/): front matter plus body."""
    found = []
    for team in _listdir(root / "outbox"):
        for sub in ("new", "cur"):
            for name in _listdir(root / "outbox" / team / sub):
                meta, body = parse_dispatch_text((root / "outbox" / team / sub / name).read_bytes())
                found.append({**meta, "team": team, "body": body, "file": name})
    return found


def _count_files(boxes: Sequence[Path], sub: str) -> int:
    return sum(len(_listdir(box / sub)) for box in boxes)


def _dlq_entries(root: Path) -> int:
    return sum(
        1
        for folder in _listdir(root / "dlq")
        for inbox in _listdir(root / "dlq" / folder)
        for name in _listdir(root / "dlq" / folder / inbox)
        if name.endswith(".reason")
    )


def _wait(done: Callable[[], bool], hub: _HubProcess, timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return True
        hub.alive()
        time.sleep(step)
    return done()


def _bound(timeout: float | None, files: int) -> float:
    """How long to wait for the hub to finish ``files`` files before counting what is missing.

    Generous (a loaded machine is slow), yet a hub that never settles some file fails the
    scenario in minutes at the small sizes, not after half an hour.
    """
    return timeout if timeout is not None else 120.0 + 0.5 * files


def _body(token: str, payload: str) -> str:
    """A body whose first line names it and carries the digest of the rest: a partial read shows."""
    return f"token {token} sha256={hashlib.sha256(payload.encode()).hexdigest()}\n\n{payload}"


def _check_body(text: str) -> tuple[str | None, bool]:
    """``(token, whole)`` of a stored message text made by :func:`_body`."""
    match = _TOKEN.search(text)
    if match is None:
        return None, False
    payload = text[match.end() :].strip()
    return match[1], hashlib.sha256(payload.encode()).hexdigest() == match[2]


def _payload(token: str, size: int) -> str:
    return (f"{token}-" * (size // (len(token) + 1) + 1))[:size]


@dataclass
class _Answered:
    """Per delivered file: stored, answered (database), replied (outbox), moved (cur/)."""

    files: int = 0
    not_stored: int = 0
    answered_0: int = 0
    answered_twice: int = 0
    outbox_0: int = 0
    outbox_twice: int = 0
    not_moved: int = 0
    stored_twice: int = 0
    right: int = 0  # stored, answered once, one reply file, in cur/

    def lost(self) -> int:
        return self.not_stored + self.answered_0 + self.outbox_0 + self.not_moved

    def duplicated(self) -> int:
        return self.stored_twice + self.answered_twice + self.outbox_twice


def _answered(
    db: Path, root: Path, expected: dict[tuple[str, str], Path], tokens: dict[tuple[str, str], str] | None = None
) -> tuple[_Answered, dict[tuple[str, str], str]]:
    """Count, for every expected ``(scope, name) -> inbox``, what happened to it; also the stored texts.

    With ``tokens`` (``(scope, name) -> the token in its body``) a file's messages are found
    by the token in their text, not by the key the hub stored them under: a hub that keys
    a redelivery differently (and so stores and answers it twice) is caught too.
    """
    rows = _rows(db, "SELECT scope, ext_id, id, text FROM messages WHERE role = 'user'")
    by_key: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for scope, ext, mid, text in rows:
        if tokens is not None:
            token = _check_body(text)[0]
            if token is not None:
                by_key.setdefault((scope, token), []).append((mid, text))
        elif ext and ext.startswith("maildir:"):
            by_key.setdefault((scope, ext[len("maildir:") :]), []).append((mid, text))
    answers = _answers(db)
    replies = Counter((reply.get("scope"), reply.get("reply_to")) for reply in _outbox_replies(root))
    out = _Answered(files=len(expected))
    texts = {}
    for (scope, name), box in expected.items():
        moved = (box / "cur" / name).exists()
        out.not_moved += not moved
        found = by_key.get((scope, tokens[(scope, name)] if tokens is not None else name), [])
        if not found:
            out.not_stored += 1
            continue
        out.stored_twice += len(found) > 1
        texts[(scope, name)] = found[0][1]
        n = sum(answers.get(mid, 0) for mid, _text in found)
        out.answered_0 += n == 0
        out.answered_twice += n > 1
        m = replies.get((scope, name), 0)
        out.outbox_0 += m == 0
        out.outbox_twice += m > 1
        out.right += moved and len(found) == 1 and n == 1 and m == 1
    return out, texts


# What each count of _Answered means when it is not 0: (field, failure kind, what went wrong).
_ANSWER_FAILURES = (
    ("not_stored", "lost", "files never stored as a message"),
    ("answered_0", "lost", "files answered 0 times (no agent reply stored)"),
    ("outbox_0", "lost", "files with no reply file in the sender's outbox"),
    ("not_moved", "lost", "files not in cur/ at the end"),
    ("stored_twice", "duplicated", "files stored as more than one message"),
    ("answered_twice", "duplicated", "files answered more than once"),
    ("outbox_twice", "duplicated", "files with more than one reply file"),
)


def _report_answered(out: Outcome, counts: _Answered) -> None:
    for field, kind, what in _ANSWER_FAILURES:
        n = getattr(counts, field)
        if n:
            out.fail(kind, f"{n} {what}", n)


def _agents_hub() -> list[str]:
    script = Path(sys.executable).with_name("agents-hub")
    return [str(script)] if script.exists() else [sys.executable, "-m", "scopehub.hub.cli.main"]


def _report_process(out: Outcome, counts: dict[str, Any]) -> None:
    if not counts.get("finished", True):
        out.fail("lost", "the hub did not finish the files in time", counts.get("left_in_new", 0) or 1)
    if counts.get("hub_died"):
        out.fail("crashed", f"the hub process exited {counts['hub_died']} time(s) without being killed", counts["hub_died"])
    if counts.get("failed_passes"):
        out.fail("crashed", f"{counts['failed_passes']} exceptions escaped in the hub's log", counts["failed_passes"])
    if counts.get("exit_status") not in (0, None):
        out.fail("crashed", f"the hub did not shut down cleanly (exit status {counts['exit_status']})")
    if counts.get("dlq"):
        out.fail("lost", f"{counts['dlq']} good files went to dlq/", counts["dlq"])

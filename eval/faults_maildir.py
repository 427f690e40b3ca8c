"""Maildir faults (issue 17): the real intake in a hub process, attacked from outside.

Every scenario runs the hub as a child process the way ``agents-hub dispatch run`` does
(``bridge.start_watcher`` over the root: inotify, polling as the fallback), with the fast
echo model, and writes files the way outside programs do. Then it counts, per file name:

``maildir_kill``
    ``files`` dispatches (each asking for a reply) wait in the inboxes of ``scopes`` scopes;
    the hub is SIGKILLed ``kills`` times while it ingests them, at random points of its
    progress (every other kill aimed at the moment a file is committed but not yet moved
    to ``cur/``), and restarted each time. Every file must be answered exactly once:
    counted are files answered 0 times and more than once, in the database (the agent's
    reply to the file's message) and in the sender's outbox (the reply file).
``maildir_writers``
    ``writers`` writer processes deliver ``per_writer`` files each while the hub ingests,
    all under the same origin and subjects (so their names collide), every
    ``cli_every``-th one through ``agents-hub dispatch send``: every acknowledged file
    is stored once, whole, and answered once.
``maildir_half_written``
    slow writers stream large files into ``tmp/`` in chunks with pauses while the hub
    ingests, and ``crashers`` writers are SIGKILLed in the middle of a file: the hub never
    reads a partial file (a stored body whose digest is wrong, or a dlq entry), and never
    ingests a crashed writer's ``tmp/`` file. Those stay in ``tmp/``, counted: the hub
    deletes nothing, and never looks at ``tmp/``.
``maildir_hostile``
    ``rounds`` rounds of hostile files dropped straight into ``new/`` (bypassing the
    writer): path traversal and very long names, control characters, names that are not
    UTF-8, no front matter, over 1 MiB, NUL bytes, YAML bombs and anchors, ``!!python``
    tags, front matter of the wrong types, symlinks in ``new/`` pointing outside, FIFOs,
    folders, unknown agents and scope folders, symlinked scope and ``new/`` folders. Each
    goes to ``dlq/`` with a reason, or is refused (left where it is, never read), or (odd
    names with a valid body) is delivered in its own scope; nothing is lost (every file
    is found again by its inode), nothing outside the root is read or changed, the hub
    never crashes and keeps delivering the good files between them.
``maildir_cross_scope``
    ``scopes`` scopes (look-alike ids: ``user:42``/``group:42``, ``group:-100``/``group:100``)
    each get ``per_scope`` files with the scope's own secret, under the same names in
    every scope, some with front matter that names another scope or agent, plus alias
    folders (a non-canonical spelling, a symlink to another scope's folder): no
    message, prompt sent to the model, reply file or receipt of one scope carries
    another's secret, and every file is delivered in its own scope.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
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
from typing import TYPE_CHECKING, Any

from scopehub.hub.transports.maildir.files import parse_dispatch_text, publish, render
from scopehub.hub.transports.maildir.layout import (
    MAX_FILE_BYTES,
    dispatch_name,
    inbox_dir,
    scope_folder,
)
from scopehub.hub.transports.maildir.send import name_taken_in_scope, send_dispatch
from scopehub.memory import Store

if TYPE_CHECKING:  # faults imports this module to register the scenarios
    from .faults import Outcome

__all__ = [
    "MAILDIR_FUNCTIONS",
    "MAILDIR_HEAVY",
    "MAILDIR_QUICK",
    "MAILDIR_SCENARIOS",
    "concurrent_writers",
    "cross_scope",
    "half_written",
    "hostile_files",
    "kill_ingest",
    "maildir_cross_scope",
    "maildir_half_written",
    "maildir_hostile",
    "maildir_kill",
    "maildir_writers",
]

INBOXES = ("notes", "tasks", "hub", "inbox")  # real agents of the registry, and the routed inbox
TEAMS = ("crm", "ci", "cron")  # the senders: replies come back into outbox/<team>/
CLAIM_TTL = 20.0  # the child hub's claim TTL: longer than a restart, so a SIGKILLed answer's claim is still held after it
_TOKEN = re.compile(r"token (\S+) sha256=([0-9a-f]{64})")
_FAILED_PASS = ("an intake pass failed", "the staleness check failed", "Traceback")


# -- the hub process ----------------------------------------------------------------------------

_HUB = "from scopehub.eval.faults_maildir import _hub_child; _hub_child()"


def _hub_child(argv: Sequence[str] | None = None) -> None:
    """The hub process: the echo model, the real intake and watcher over ``root``, until SIGTERM.

    ``prompts`` (or ``-``): a file that gets every model call's messages, one JSON line each.
    """
    import logging

    db, root, ttl, prompts = (argv or sys.argv[1:])[:4]
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from scopehub.eval.faults import echo_model, make_hub
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
        from .faults import _child_env

        handle = self.log.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HUB, str(self.db), str(self.root), str(self.ttl), str(self.prompts or "-")],
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=_child_env(),
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
        """SIGTERM and wait: the exit status (0: it shut down cleanly)."""
        assert self.proc is not None
        if self.proc.poll() is None:
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


def _rows(db: Path, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
    """A read-only query on the hub's database while the hub may be writing (WAL)."""
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
                deadline = time.monotonic() + 2.0
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
    from .faults import KILLS_SURVIVED, Outcome, _timed

    out = Outcome("maildir_kill")
    with _timed(out):
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


# -- concurrent writers ---------------------------------------------------------------------------

_WRITER = "from scopehub.eval.faults_maildir import _writer_child; _writer_child()"


def _agents_hub() -> list[str]:
    script = Path(sys.executable).with_name("agents-hub")
    return [str(script)] if script.exists() else [sys.executable, "-m", "scopehub.hub.cli.main"]


def _writer_child(argv: Sequence[str] | None = None) -> None:
    """Write ``count`` files, every ``cli_every``-th through ``agents-hub dispatch send``; ``ack`` each one."""
    root, writer, count, cli_every, size, scopes = (argv or sys.argv[1:])[:6]
    root_path, k, scope_list = Path(root), int(writer), scopes.split(",")
    for i in range(int(count)):
        scope, inbox = scope_list[i % len(scope_list)], INBOXES[i % len(INBOXES)]
        token = f"w{k}-{i}"
        body = _body(token, _payload(token, int(size)))
        subject = f"file {i}"  # the same in every writer: the names collide
        if int(cli_every) and i % int(cli_every) == 0:
            done = subprocess.run(
                [*_agents_hub(), "dispatch", "send", "--root", root, "--scope", scope, "--to", inbox, "--from", "cron",
                 "--subject", subject, "--reply", "--json", "-"],
                input=body.encode(),
                capture_output=True,
                check=True,
            )
            name, via = json.loads(done.stdout)["name"], "cli"
        else:
            path = send_dispatch(root_path, scope, inbox, sender="cron", body=body, subject=subject, reply=True)
            assert path is not None
            name, via = path.name, "lib"
        print(f"ack {token} {scope} {inbox} {via} {name}", flush=True)


def concurrent_writers(
    workdir: Path, *, writers: int = 5, per_writer: int = 400, cli_every: int = 20, size: int = 2000, seed: int = 0, timeout: float | None = None
) -> dict[str, Any]:
    """``writers`` processes deliver while the hub ingests; returns the counts."""
    timeout = _bound(timeout, writers * per_writer)
    from .faults import _child_env

    workdir.mkdir(parents=True, exist_ok=True)
    db, root = workdir / "hub.db", workdir / "maildir"
    Store(db).close()
    scopes = ["user:42", "group:-42", "user:43"]
    hub = _HubProcess(workdir, db, root)
    started = time.perf_counter()
    with _running_hub(hub):
        hub.wait_ready()
        procs = []
        for k in range(writers):
            with (workdir / f"writer-{k}.out").open("w") as handle:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-c", _WRITER, str(root), str(k), str(per_writer), str(cli_every), str(size), ",".join(scopes)],
                        stdout=handle,
                        stderr=subprocess.STDOUT,
                        env=_child_env(),
                    )
                )
        codes = [proc.wait(timeout=timeout) for proc in procs]
        acks = [line.split() for k in range(writers) for line in (workdir / f"writer-{k}.out").read_text().splitlines() if line.startswith("ack ")]
        expected = {(scope, name): root / scope_folder(scope) / inbox for _, _token, scope, inbox, _via, name in acks}
        tokens = {(scope, name): token for _, token, scope, _inbox, _via, name in acks}
        boxes = sorted(set(expected.values()))
        moved_while_writing = _count_files(boxes, "cur")
        finished = _wait(lambda: _count_files(boxes, "new") == 0 and _count_files(boxes, "cur") >= len(expected), hub, timeout)
        exit_status = hub.stop()
    answered, _texts = _answered(db, root, expected, tokens)
    stored_tokens: Counter[str | None] = Counter()
    broken = 0
    for _scope, _ext, _mid, text in _rows(db, "SELECT scope, ext_id, id, text FROM messages WHERE role = 'user'"):
        token, whole = _check_body(text)
        stored_tokens[token] += 1
        broken += not whole
    acked_tokens = {token for _, token, *_ in acks}
    return {
        "writers": writers,
        "writer_failures": sum(1 for code in codes if code != 0),
        "acked": len(acks),
        "expected": writers * per_writer,
        "via_cli": sum(1 for ack in acks if ack[4] == "cli"),
        "names_distinct": len({name for *_, name in acks}),
        "acked_not_stored": len(acked_tokens - set(stored_tokens)),
        "stored_twice": sum(1 for n in stored_tokens.values() if n > 1),
        "broken": broken,
        "moved_while_writing": moved_while_writing,
        "finished": finished,
        "exit_status": exit_status,
        "hub_died": hub.died,
        "failed_passes": hub.failed_passes(),
        "dlq": _dlq_entries(root),
        "answered": answered,
        "seconds": round(time.perf_counter() - started, 1),
    }


def maildir_writers(workdir: Path, *, writers: int = 5, per_writer: int = 400, cli_every: int = 20, seed: int = 0) -> Outcome:
    """Concurrent writer processes: every file stored once, whole, answered once."""
    from .faults import Outcome, _timed

    out = Outcome("maildir_writers")
    with _timed(out):
        counts = concurrent_writers(workdir, writers=writers, per_writer=per_writer, cli_every=cli_every, seed=seed)
    answered: _Answered = counts["answered"]
    _report_answered(out, answered)
    _report_process(out, counts)
    if counts["writer_failures"]:
        out.fail("crashed", f"{counts['writer_failures']} writer processes failed", counts["writer_failures"])
    if counts["acked"] != counts["expected"]:
        out.fail("lost", f"{counts['expected'] - counts['acked']} files never acknowledged by their writer", abs(counts["expected"] - counts["acked"]))
    if counts["names_distinct"] != counts["acked"]:
        out.fail("lost", "two acknowledged files got the same name (one overwrote the other)", counts["acked"] - counts["names_distinct"])
    if counts["acked_not_stored"]:
        out.fail("lost", "acknowledged files whose body was never stored", counts["acked_not_stored"])
    if counts["stored_twice"]:
        out.fail("duplicated", "bodies stored more than once", counts["stored_twice"])
    if counts["broken"]:
        out.fail("lost", "stored bodies that are not whole (digest differs)", counts["broken"])
    if not counts["broken"] and not counts["stored_twice"]:
        out.verify("concurrently written files stored once, whole, answered once", answered.right)
    out.note(
        f"{counts['writers']} writer processes, {counts['acked']:,} files acknowledged ({counts['via_cli']} through "
        f"`agents-hub dispatch send`), all under one origin and the same subjects: {counts['names_distinct']:,} distinct "
        f"names; {counts['moved_while_writing']:,} delivered while the writers were still writing; lost "
        f"{counts['acked_not_stored'] + answered.lost()}, duplicated {counts['stored_twice'] + answered.duplicated()}"
    )
    out.details = counts
    return out


# -- half-written files ---------------------------------------------------------------------------

_SLOW = "from scopehub.eval.faults_maildir import _slow_child; _slow_child()"


def _slow_child(argv: Sequence[str] | None = None) -> None:
    """Write ``count`` files in ``chunks`` pieces with pauses; ``crash`` > 0: stop forever inside file ``crash - 1``."""
    root, writer, count, chunks, size, scope, crash = (argv or sys.argv[1:])[:7]
    rng = random.Random(int(writer))
    for i in range(int(count)):
        token = f"s{writer}-{i}"
        crashing = int(crash) and i == int(crash) - 1
        if crashing:
            token = f"crashed-{writer}-{i}"
        inbox = INBOXES[i % len(INBOXES)]
        data = render({"from": "cron", "subject": f"slow {i}", "reply": True}, _body(token, _payload(token, int(size)))).encode()
        step = len(data) // int(chunks) + 1

        def pieces(data: bytes = data, crashing: bool = bool(crashing), step: int = step, token: str = token) -> Iterator[bytes]:
            for n, start in enumerate(range(0, len(data), step)):
                yield data[start : start + step]
                if crashing and n == 1:
                    # tell the parent it is mid-write, then wait for the SIGKILL
                    print(f"mid-write {token}", flush=True)
                    time.sleep(3600)
                time.sleep(rng.uniform(0.005, 0.04))  # slow: the intake passes many times meanwhile

        box = inbox_dir(Path(root), scope, inbox)
        path = publish(
            box,
            dispatch_name(time.time(), "normal", "cron", f"slow {i}"),
            pieces(),
            taken=lambda name: name_taken_in_scope(Path(root), scope, name),
        )
        assert path is not None
        print(f"ack {token} {inbox} {path.name}", flush=True)


def half_written(
    workdir: Path, *, writers: int = 3, per_writer: int = 100, chunks: int = 8, size: int = 64_000, crashers: int = 2, seed: int = 0, timeout: float | None = None
) -> dict[str, Any]:
    """Slow writers and writers killed mid-write while the hub ingests; returns the counts."""
    timeout = _bound(timeout, writers * per_writer * max(1, size // 4000))  # a big message takes the hub longer
    from .faults import _child_env

    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    db, root = workdir / "hub.db", workdir / "maildir"
    Store(db).close()
    scope = "user:31337"
    hub = _HubProcess(workdir, db, root)
    started = time.perf_counter()
    with _running_hub(hub):
        hub.wait_ready()
        procs: dict[str, subprocess.Popen] = {}

        def spawn(name: str, count: int, crash: int) -> None:
            with (workdir / f"{name}.out").open("w") as handle:
                procs[name] = subprocess.Popen(
                    [sys.executable, "-c", _SLOW, str(root), name, str(count), str(chunks), str(size), scope, str(crash)],
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    env=_child_env(),
                )

        for k in range(writers):
            spawn(f"{k}", per_writer, 0)
        for k in range(crashers):  # a few whole files, then one that stops mid-write (SIGKILLed below)
            crash_at = rng.randint(1, 3)
            spawn(f"{writers + k}", crash_at, crash_at)
        killed_mid_write = 0
        for k in range(crashers):
            name = f"{writers + k}"
            out_path = workdir / f"{name}.out"
            _wait(lambda out_path=out_path, proc=procs[name]: "mid-write" in out_path.read_text() or proc.poll() is not None, hub, timeout)
            if procs[name].poll() is None:
                procs[name].send_signal(signal.SIGKILL)
                procs[name].wait()
                killed_mid_write += 1
        codes = {name: proc.wait(timeout=timeout) for name, proc in procs.items()}
        acks = [line.split() for name in procs for line in (workdir / f"{name}.out").read_text().splitlines() if line.startswith("ack ")]
        box = lambda inbox: root / scope_folder(scope) / inbox  # noqa: E731
        expected = {(scope, name): box(inbox) for _, _token, inbox, name in acks}
        tokens = {(scope, name): token for _, token, _inbox, name in acks}
        boxes = [box(inbox) for inbox in INBOXES]
        moved_while_writing = _count_files(boxes, "cur")
        finished = _wait(lambda: _count_files(boxes, "new") == 0 and _count_files(boxes, "cur") >= len(expected), hub, timeout)
        exit_status = hub.stop()
    answered, _texts = _answered(db, root, expected, tokens)
    partial = crashed_ingested = 0
    for _scope, _ext, _mid, text in _rows(db, "SELECT scope, ext_id, id, text FROM messages WHERE role = 'user'"):
        token, whole = _check_body(text)
        partial += not whole
        crashed_ingested += bool(token and token.startswith("crashed-"))
    return {
        "writers": writers,
        "crashers": crashers,
        "killed_mid_write": killed_mid_write,
        "writer_failures": sum(1 for name, code in codes.items() if code != 0 and int(name) < writers),
        "acked": len(acks),
        "partial_reads": partial + _dlq_entries(root),
        "dlq": 0,  # counted in partial_reads: every file written here is valid once whole
        "tmp_ingested": crashed_ingested,
        "stale_tmp_left": _count_files(boxes, "tmp"),
        "moved_while_writing": moved_while_writing,
        "finished": finished,
        "exit_status": exit_status,
        "hub_died": hub.died,
        "failed_passes": hub.failed_passes(),
        "answered": answered,
        "seconds": round(time.perf_counter() - started, 1),
    }


def maildir_half_written(
    workdir: Path, *, writers: int = 3, per_writer: int = 100, chunks: int = 8, size: int = 64_000, crashers: int = 2, seed: int = 0
) -> Outcome:
    """Slow and crashing writers: no partial file is ever read, no tmp/ file ever ingested."""
    from .faults import Outcome, _timed

    out = Outcome("maildir_half_written")
    with _timed(out):
        counts = half_written(workdir, writers=writers, per_writer=per_writer, chunks=chunks, size=size, crashers=crashers, seed=seed)
    _report_answered(out, counts["answered"])
    _report_process(out, counts)
    if counts["writer_failures"]:
        out.fail("crashed", f"{counts['writer_failures']} slow writers failed", counts["writer_failures"])
    if counts["partial_reads"]:
        out.fail("lost", "partial reads: stored bodies not whole, or files sent to dlq/", counts["partial_reads"])
    if counts["tmp_ingested"]:
        out.fail("lost", "a crashed writer's tmp/ file was ingested", counts["tmp_ingested"])
    if counts["stale_tmp_left"] != counts["killed_mid_write"]:
        out.fail("lost", f"{counts['stale_tmp_left']} files left in tmp/, expected the {counts['killed_mid_write']} of the killed writers")
    if not counts["partial_reads"]:
        out.verify("files written in chunks read only whole", counts["answered"].right)
    if not counts["tmp_ingested"] and counts["stale_tmp_left"] == counts["killed_mid_write"]:
        out.verify("writers killed mid-write, their tmp/ file never read", counts["killed_mid_write"])
    out.note(
        f"{counts['writers']} slow writers ({chunks} chunks of a {size:,}-byte file, pauses between) and "
        f"{counts['crashers']} writers SIGKILLed mid-write; {counts['acked']} files, {counts['moved_while_writing']} "
        f"delivered while writers were still writing; partial reads {counts['partial_reads']}; tmp/ files ingested "
        f"{counts['tmp_ingested']}; stale tmp/ files left in place {counts['stale_tmp_left']} (never read, never deleted)"
    )
    out.details = counts
    return out


# -- hostile files --------------------------------------------------------------------------------

GOOD = b"---\nfrom: cron\nsubject: fine\nreply: true\n---\n"


def _bomb(levels: int = 9, width: int = 9, key: str = "subject") -> bytes:
    """Billion laughs: 9 anchors, each 9 aliases of the one before (9**9 strings if expanded)."""
    lines = ['a0: &a0 "lol"']
    lines += [f"a{n}: &a{n} [{', '.join(f'*a{n - 1}' for _ in range(width))}]" for n in range(1, levels + 1)]
    return ("---\nfrom: cron\n" + "\n".join(lines) + f"\n{key}: *a{levels}\n---\nboom\n").encode()


@dataclass
class _Case:
    """One hostile thing under the root: where it is, what it is, what must happen to it."""

    kind: str
    expect: str  # "dlq" | "refused" | "delivered"
    path: bytes  # where it was put (bytes: names need not be UTF-8)
    scope: str | None = None  # the scope it belongs to, for "delivered"
    inode: tuple[int, int] | None = None


def _put(path: bytes, data: bytes | None = None, *, link_to: bytes | None = None, fifo: bool = False, folder: bool = False) -> tuple[int, int]:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if link_to is not None:
        os.symlink(link_to, path)
    elif fifo:
        os.mkfifo(path)
    elif folder:
        os.makedirs(path)
    else:
        # the safe way even for hostile content: whole in tmp/, then one rename into new/
        tmp = os.path.join(os.path.dirname(os.path.dirname(path)), b"tmp", b"hostile." + os.urandom(4).hex().encode())
        os.makedirs(os.path.dirname(tmp), exist_ok=True)
        with open(tmp, "wb") as handle:
            handle.write(data or b"")
        os.rename(tmp, path)
    info = os.lstat(path)
    return info.st_dev, info.st_ino


def _hostile_round(root: Path, outside: Path, r: int) -> list[_Case]:
    """Drop one round of hostile files (and the folders they need); returns what must become of each."""
    scope = f"user:{4000 + r}"
    folder = os.fsencode(scope_folder(scope))
    rootb = os.fsencode(root)
    cases: list[_Case] = []

    def drop(kind: str, expect: str, name: bytes | str, data: bytes | None = None, *, inbox: bytes = b"notes", top: bytes = folder, **how: Any) -> None:
        raw = name if isinstance(name, bytes) else name.encode()
        path = os.path.join(rootb, top, inbox, b"new", raw)
        cases.append(_Case(kind, expect, path, scope if top == folder else None, _put(path, data, **how)))

    tag = f"r{r}-"
    # contents -> dlq/
    drop("no front matter", "dlq", tag + "nofm.md", b"just a plain text file\n")
    drop("empty file", "dlq", tag + "empty.md", b"")
    drop("front matter not closed", "dlq", tag + "unclosed.md", b"---\nfrom: cron\nsubject: x\nbody without an end\n")
    drop("over 1 MiB", "dlq", tag + "huge.md", GOOD + b"a" * (MAX_FILE_BYTES + 10))
    drop("not UTF-8", "dlq", tag + "latin1.md", GOOD + "caf\xe9 cr\xe8me\n".encode("latin-1"))
    drop("NUL bytes", "dlq", tag + "nul.md", GOOD + b"x\x00y\n")
    drop("YAML bomb in a field", "dlq", tag + "bomb.md", _bomb())
    drop("YAML bomb in an unknown field", "dlq", tag + "bomb-x.md", _bomb(key="x"))
    drop("YAML anchors", "dlq", tag + "anchors.md", b"---\nfrom: &who cron\nsubject: *who\n---\nhi\n")
    drop("!!python tag", "dlq", tag + "pytag.md", f'---\nfrom: !!python/object/apply:os.system ["touch {outside}/pwned"]\n---\nx\n'.encode())
    drop("deep nesting", "dlq", tag + "deep.md", b"---\nfrom: " + b"[" * 5000 + b"]" * 5000 + b"\n---\nx\n")
    drop("front matter over 64 KiB", "dlq", tag + "bigfm.md", b"---\nfrom: cron\nsubject: " + b"s" * 70_000 + b"\n---\nx\n")
    drop("front matter a list", "dlq", tag + "list.md", b"---\n- from\n- cron\n---\nx\n")
    drop("front matter a string", "dlq", tag + "str.md", b"---\njust words\n---\nx\n")
    drop("'from' a list", "dlq", tag + "from-list.md", b"---\nfrom: [cron, ci]\n---\nx\n")
    drop("'from' a mapping", "dlq", tag + "from-map.md", b"---\nfrom: {a: 1}\n---\nx\n")
    drop("'from' missing", "dlq", tag + "from-none.md", b"---\nsubject: hi\n---\nx\n")
    drop("'from' a path", "dlq", tag + "from-path.md", b"---\nfrom: ../../../etc/cron\n---\nx\n")
    drop("'from' with a line break", "dlq", tag + "from-nl.md", b'---\nfrom: "cr\\non"\n---\nx\n')
    drop("'priority' a number", "dlq", tag + "prio-int.md", b"---\nfrom: cron\npriority: 5\n---\nx\n")
    drop("'priority' unknown", "dlq", tag + "prio-bad.md", b"---\nfrom: cron\npriority: URGENT!!\n---\nx\n")
    drop("'reply' not a flag", "dlq", tag + "reply-bad.md", b"---\nfrom: cron\nreply: maybe\n---\nx\n")
    drop("'subject' a list", "dlq", tag + "subj-list.md", b"---\nfrom: cron\nsubject: [a, b]\n---\nx\n")
    drop("invalid YAML", "dlq", tag + "badyaml.md", b"---\nfrom: cron\n  subject: : : [\n---\nx\n")
    # names and things that are not files -> dlq/
    drop("name not UTF-8", "dlq", tag.encode() + b"caf\xe9\xff.md", GOOD + b"body\n")
    drop("symlink to a valid dispatch outside", "dlq", tag + "link-secret.md", link_to=os.fsencode(outside / "secret.md"))
    drop("symlink to /etc/passwd", "dlq", tag + "link-passwd.md", link_to=b"/etc/passwd")
    drop("symlink up and out", "dlq", tag + "link-up.md", link_to=b"../../../../outside/secret.md")
    drop("dangling symlink", "dlq", tag + "link-dangling.md", link_to=os.fsencode(outside / "nothing-here"))
    drop("FIFO", "dlq", tag + "fifo.md", fifo=True)
    drop("folder", "dlq", tag + "folder.md", folder=True)
    drop("unknown agent", "dlq", tag + "agent.md", GOOD + b"body\n", inbox=b"no-such-agent")
    drop("non-canonical scope folder", "dlq", tag + "alias.md", GOOD + b"body\n", top=f"user-%34{4000 + r}".encode())
    drop("folder that is no scope", "dlq", tag + "evil.md", GOOD + b"body\n", top=b"evil..folder")
    # folders that are symlinks: never followed, never read, left in place
    target = _plant(outside, r)
    os.symlink(outside / f"scopebox-{r}", root / f"user-{5000 + r}")
    cases.append(_Case("symlinked scope folder", "refused", os.fsencode(target / "planted.md"), inode=_lstat_key(target / "planted.md")))
    newdir = outside / f"newbox-{r}"
    (root / scope_folder(scope) / "tasks").mkdir(parents=True, exist_ok=True)
    os.symlink(newdir, root / scope_folder(scope) / "tasks" / "new")
    cases.append(_Case("symlinked new/ folder", "refused", os.fsencode(newdir / "planted.md"), inode=_lstat_key(newdir / "planted.md")))
    # odd names and fields with a valid dispatch: delivered in their own scope, nothing outside touched
    valid = GOOD + b"odd but valid\n"
    drop("traversal-looking name", "delivered", tag + "..%2F..%2Fetc%2Fpasswd.md", valid)
    drop("backslash traversal name", "delivered", tag + "..\\..\\..\\evil.md", valid)
    drop("dot name", "delivered", "." + tag + "hidden.md", valid)
    drop("very long name", "delivered", tag + "x" * (251 - len(tag)) + ".md", valid)
    drop("long multibyte name", "delivered", tag + "ü" * ((251 - len(tag)) // 2) + ".md", valid)
    drop("control characters in the name", "delivered", tag + "ctl-\x1b[31m-\r-\t-\n-\x07.md", valid)
    drop("option-looking name", "delivered", "-rf " + tag + "--no-preserve-root.md", valid)
    drop("traversal in reply_to and thread", "delivered", tag + "fields.md",
         b"---\nfrom: cron\nreply: true\nreply_to: ../../../../etc/passwd\nthread: ../../outbox/x\n---\nx\n")
    drop("front matter naming another scope and agent", "delivered", tag + "lies.md",
         b"---\nfrom: cron\nreply: true\nscope: user:1\nto: ../../dlq\n---\nx\n")
    return cases


def _plant(outside: Path, r: int) -> Path:
    """The valid dispatches outside the root that round ``r``'s symlinked folders point at; their scope box's new/."""
    target = outside / f"scopebox-{r}" / "notes" / "new"
    for folder in (target, outside / f"newbox-{r}"):
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "planted.md").exists():
            (folder / "planted.md").write_bytes(GOOD + b"OUTSIDE-SECRET planted\n")
    return target


def _lstat_key(path: Path | bytes) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_dev, info.st_ino


def _tree(path: Path) -> dict[str, str]:
    """Every entry under ``path`` (not following symlinks): its kind and the digest of its content."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(os.fsencode(path)):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                found[os.fsdecode(full)] = "link:" + os.fsdecode(os.readlink(full))
            elif os.path.isfile(full):
                found[os.fsdecode(full)] = hashlib.sha256(Path(os.fsdecode(full)).read_bytes()).hexdigest()
            elif not os.path.isdir(full):
                found[os.fsdecode(full)] = "special"
    return found


def _inodes(root: Path) -> dict[tuple[int, int], bytes]:
    """Every entry under ``root`` (not following symlinks) by inode."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(os.fsencode(root)):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            found[_lstat_key(full)] = full
    return found


def hostile_files(workdir: Path, *, rounds: int = 10, seed: int = 0, timeout: float | None = None) -> dict[str, Any]:
    """Drop ``rounds`` rounds of hostile files (and good ones between) while the hub runs; returns the counts."""
    timeout = _bound(timeout, rounds * 50)
    workdir.mkdir(parents=True, exist_ok=True)
    db, root, outside = workdir / "hub.db", workdir / "maildir", workdir / "outside"
    Store(db).close()
    root.mkdir(parents=True, exist_ok=True)
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.md").write_bytes(GOOD + b"OUTSIDE-SECRET: never to be read by the hub\n")
    for r in range(rounds):
        _plant(outside, r)
    outside_before = _tree(outside)
    hub = _HubProcess(workdir, db, root)
    started = time.perf_counter()
    cases: list[_Case] = []
    good: dict[tuple[str, str], Path] = {}
    with _running_hub(hub):
        hub.wait_ready()
        for r in range(rounds):
            cases.extend(_hostile_round(root, outside, r))
            scope = f"user:{4000 + r}"
            for g in range(3):  # good files between the hostile ones: they must still be answered
                path = send_dispatch(root, scope, "notes", sender="cron", body=f"good {r}.{g}", subject=f"good {r} {g}", reply=True)
                assert path is not None
                good[(scope, path.name)] = path.parent.parent
        pending = [case for case in cases if case.expect != "refused"]
        finished = _wait(lambda: not any(os.path.lexists(case.path) for case in pending), hub, timeout)
        # the good files are answered too (the last pass may still be writing them)
        _wait(lambda: all((box / "cur" / name).exists() for (_s, name), box in good.items()), hub, 60)
        alive = hub.proc is not None and hub.proc.poll() is None
        exit_status = hub.stop()
    outside_after = _tree(outside)
    everything = _inodes(root)
    everything.update(_inodes(outside))
    stored = _stored(db)
    stored_names = {name for _scope, name in stored}
    texts = " ".join(text for _mid, text in stored.values())
    counts: dict[str, Any] = {
        "cases": len(cases),
        "rounds": rounds,
        "by_expect": dict(Counter(case.expect for case in cases)),
        "lost": 0,
        "wrong_outcome": 0,
        "dlq_without_reason": 0,
        "outside_read_or_changed": 0,
        "kinds": sorted({case.kind for case in cases}),
        "problems": [],
    }

    def problem(count: str, case: _Case, text: str) -> None:
        counts[count] += 1
        counts["problems"].append(f"{case.kind} ({os.fsdecode(os.path.basename(case.path))!r}): {text}")

    dlq_root = os.fsencode(root / "dlq")
    for case in cases:
        where = everything.get(case.inode) if case.inode else None
        name = os.fsdecode(os.path.basename(case.path))
        if where is None:
            problem("lost", case, "not found anywhere (deleted)")
            continue
        if case.expect == "dlq":
            if not where.startswith(dlq_root + b"/"):
                problem("wrong_outcome", case, f"expected in dlq/, found at {os.fsdecode(where)!r}")
            elif not os.path.exists(where + b".reason") or not Path(os.fsdecode(where + b".reason")).read_text().strip():
                problem("dlq_without_reason", case, "no reason beside it in dlq/")
            if name in stored_names:
                problem("wrong_outcome", case, "stored as a message although it went to dlq/")
        elif case.expect == "refused":
            if where != case.path:
                problem("wrong_outcome", case, f"moved to {os.fsdecode(where)!r}; a symlinked folder must not be touched")
        else:
            if os.path.basename(os.path.dirname(where)) != b"cur" or (case.scope, name) not in stored:
                problem("wrong_outcome", case, f"expected delivered in {case.scope}, found at {os.fsdecode(where)!r}")
    if "OUTSIDE-SECRET" in texts:
        counts["outside_read_or_changed"] += texts.count("OUTSIDE-SECRET")
        counts["problems"].append("a file outside the root (through a symlink) was stored as a message")
    if outside_before != outside_after or (outside / "pwned").exists():
        counts["outside_read_or_changed"] += 1
        counts["problems"].append("something outside the root changed")
    good_answered, _ = _answered(db, root, good)
    counts.update(
        finished=finished,
        alive_to_the_end=alive,
        exit_status=exit_status,
        hub_died=hub.died,
        failed_passes=hub.failed_passes(),
        good=len(good),
        answered=good_answered,
        dlq_entries=_dlq_entries(root),
        seconds=round(time.perf_counter() - started, 1),
    )
    return counts


def maildir_hostile(workdir: Path, *, rounds: int = 10, seed: int = 0) -> Outcome:
    """Hostile names and contents: each to dlq/ with a reason or refused; nothing deleted; the hub never crashes."""
    from .faults import Outcome, _timed

    out = Outcome("maildir_hostile")
    with _timed(out):
        counts = hostile_files(workdir, rounds=rounds, seed=seed)
    _report_answered(out, counts["answered"])
    _report_process(out, counts)
    if not counts["alive_to_the_end"]:
        out.fail("crashed", "the hub process was not running at the end")
    if counts["lost"]:
        out.fail("lost", "hostile files deleted (not found by inode anywhere)", counts["lost"])
    if counts["wrong_outcome"]:
        out.fail("crashed", "hostile files without their promised outcome", counts["wrong_outcome"])
    if counts["dlq_without_reason"]:
        out.fail("crashed", "dlq/ entries without a reason", counts["dlq_without_reason"])
    if counts["outside_read_or_changed"]:
        out.fail("leaked", "files outside the root read or changed", counts["outside_read_or_changed"])
    for text in counts["problems"]:
        out.note(text)
    if out.ok:
        out.verify("hostile files with their promised outcome", counts["cases"])
        out.verify("good files between them answered once", counts["good"])
    by = counts["by_expect"]
    out.note(
        f"{counts['rounds']} rounds x {len(counts['kinds'])} kinds = {counts['cases']} hostile files: "
        f"{by.get('dlq', 0)} to dlq/ with a reason, {by.get('refused', 0)} refused (symlinked folders, left in place), "
        f"{by.get('delivered', 0)} odd names or fields delivered in their own scope; lost {counts['lost']}, "
        f"hub crashes {counts['hub_died'] + counts['failed_passes'] + (not counts['alive_to_the_end'])}, "
        f"outside the root read or changed {counts['outside_read_or_changed']}"
    )
    out.details = counts
    return out


# -- cross-scope ----------------------------------------------------------------------------------


def _cross_scopes(n: int) -> list[str]:
    """Look-alike scopes first (same id as user and group, signs, prefixes), then more."""
    looks = ["user:42", "group:42", "group:-42", "user:4", "user:420", "group:-100", "group:100", "user:1", "user:11"]
    extra = [f"user:{9000 + i}" if i % 2 else f"group:-{9000 + i}" for i in range(max(0, n - len(looks)))]
    return (looks + extra)[:n]


def _secret(scope: str) -> str:
    return "SECRET" + hashlib.sha256(scope.encode()).hexdigest()[:12].upper()


def cross_scope(workdir: Path, *, scopes: int = 50, per_scope: int = 10, seed: int = 0, timeout: float | None = None) -> dict[str, Any]:
    """Files for many look-alike scopes, some lying about their scope, plus alias folders; returns the counts."""
    timeout = _bound(timeout, scopes * per_scope)
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    db, root, prompts = workdir / "hub.db", workdir / "maildir", workdir / "prompts.jsonl"
    Store(db).close()
    names = _cross_scopes(scopes)
    secrets_of = {scope: _secret(scope) for scope in names}
    owner = {secret: scope for scope, secret in secrets_of.items()}
    expected: dict[tuple[str, str], Path] = {}
    base = time.time() - 3600
    lies = 0
    for i in range(per_scope):
        for scope in names:
            other = rng.choice([s for s in names if s != scope]) if len(names) > 1 else scope
            lie = i % 3 == 1
            lies += lie
            inbox = INBOXES[i % len(INBOXES)]
            body = f"{secrets_of[scope]} item {i} of this scope only"
            if lie:  # front matter naming another scope and another agent: the folder decides
                meta = {"from": "cron", "to": "tasks", "scope": other, "subject": f"item {i}", "reply": True}
                path = publish(inbox_dir(root, scope, inbox), dispatch_name(base + i, "normal", "cron", f"item {i}"),
                               render(meta, body).encode(), taken=lambda n, scope=scope: name_taken_in_scope(root, scope, n))
            else:  # the same name in every scope: keyed per scope, never a duplicate of another's
                path = send_dispatch(root, scope, inbox, sender="cron", body=body, subject=f"item {i}", reply=True, created=base + i)
            assert path is not None
            expected[(scope, path.name)] = path.parent.parent
    # alias folders: another spelling of a scope (dlq), a symlink to another scope's folder (not followed)
    victim = names[0]
    alias = f"user-%3{victim.split(':')[1][0]}{victim.split(':')[1][1:]}" if victim.startswith("user:") else "user-%342"
    (root / alias / "notes" / "new").mkdir(parents=True, exist_ok=True)
    (root / alias / "notes" / "new" / "alias.md").write_bytes(render({"from": "cron"}, "ALIAS-SPELLING must not reach any scope").encode())
    spare = root / "user-777777"
    os.symlink(root / scope_folder(victim), spare)
    hub = _HubProcess(workdir, db, root, prompts=prompts)
    started = time.perf_counter()
    boxes = sorted(set(expected.values()))
    with _running_hub(hub):
        finished = _wait(lambda: _count_files(boxes, "new") == 0 and not (root / alias / "notes" / "new" / "alias.md").exists(), hub, timeout)
        exit_status = hub.stop()
    answered, _texts = _answered(db, root, expected)
    leaks: Counter[str] = Counter()
    stored = _stored(db)
    pattern = re.compile(r"SECRET[0-9A-F]{12}")
    for (scope, _name), (_mid, text) in stored.items():
        leaks["message"] += sum(1 for s in pattern.findall(text) if owner.get(s) != scope)
        leaks["alias"] += "ALIAS-SPELLING" in text
    for scope, text in _rows(db, "SELECT scope, text FROM messages WHERE role = 'agent'"):
        leaks["reply stored"] += sum(1 for s in pattern.findall(text) if owner.get(s) != scope)
    for reply in _outbox_replies(root):
        scope = reply.get("scope")
        leaks["reply file"] += sum(1 for s in pattern.findall(reply["body"]) if owner.get(s) != scope)
        leaks["reply file"] += (scope, reply.get("reply_to")) not in expected
    calls = 0
    for line in prompts.read_text().splitlines() if prompts.exists() else []:
        calls += 1
        found = {owner.get(s) for s in pattern.findall(" ".join(json.loads(line)))}
        leaks["prompt"] += len(found) > 1
        leaks["alias"] += "ALIAS-SPELLING" in line
    for folder in _listdir(root / "receipts"):
        for inbox in _listdir(root / "receipts" / folder):
            for name in _listdir(root / "receipts" / folder / inbox):
                receipt = json.loads((root / "receipts" / folder / inbox / name).read_text())
                if receipt["outcome"] == "drained" and scope_folder(receipt["scope"]) != folder:
                    leaks["receipt"] += 1
    return {
        "scopes": len(names),
        "files": len(expected),
        "lying_front_matter": lies,
        "same_name_in_every_scope": per_scope - sum(1 for i in range(per_scope) if i % 3 == 1),
        "prompts_checked": calls,
        "alias_in_dlq": _dlq_entries(root),
        "alias_symlink_untouched": os.path.islink(spare),
        "leaks": dict(leaks),
        "leaked": sum(leaks.values()),
        "finished": finished,
        "exit_status": exit_status,
        "hub_died": hub.died,
        "failed_passes": hub.failed_passes(),
        "answered": answered,
        "seconds": round(time.perf_counter() - started, 1),
    }


def maildir_cross_scope(workdir: Path, *, scopes: int = 50, per_scope: int = 10, seed: int = 0) -> Outcome:
    """A file for another scope never reaches this one: messages, prompts, replies, receipts."""
    from .faults import SCOPE_PAIRS, Outcome, _timed

    out = Outcome("maildir_cross_scope")
    with _timed(out):
        counts = cross_scope(workdir, scopes=scopes, per_scope=per_scope, seed=seed)
    _report_answered(out, counts["answered"])
    _report_process(out, {**counts, "dlq": 0})
    if counts["leaked"]:
        out.fail("leaked", f"another scope's secret reached a scope: {counts['leaks']}", counts["leaked"])
    if counts["alias_in_dlq"] != 1:
        out.fail("leaked", f"the alias folder's file was not sent to dlq/ ({counts['alias_in_dlq']} dlq entries)")
    if not counts["alias_symlink_untouched"]:
        out.fail("crashed", "the symlinked scope folder was changed")
    if out.ok:
        out.verify("files delivered only in their own scope", counts["files"])
        out.verify(SCOPE_PAIRS, counts["scopes"] * (counts["scopes"] - 1))
        out.verify("model prompts with one scope's secrets only", counts["prompts_checked"])
    out.note(
        f"{counts['scopes']} look-alike scopes x {per_scope} files ({counts['lying_front_matter']} naming another scope "
        f"and agent in their front matter; the same names in every scope), an alias spelling (to dlq/) and a symlinked "
        f"scope folder (not followed); {counts['prompts_checked']:,} model prompts checked; leaks {counts['leaked']}"
    )
    out.details = counts
    return out


MAILDIR_SCENARIOS = ("maildir_kill", "maildir_writers", "maildir_half_written", "maildir_hostile", "maildir_cross_scope")
MAILDIR_FUNCTIONS: dict[str, Callable[..., Outcome]] = {
    "maildir_kill": maildir_kill,
    "maildir_writers": maildir_writers,
    "maildir_half_written": maildir_half_written,
    "maildir_hostile": maildir_hostile,
    "maildir_cross_scope": maildir_cross_scope,
}
# The sizes (the command's default) and the small ones of --quick and the tests.
MAILDIR_HEAVY: dict[str, dict[str, Any]] = {
    "maildir_kill": {"files": 2000, "kills": 20, "scopes": 20},
    "maildir_writers": {"writers": 5, "per_writer": 400, "cli_every": 20},
    "maildir_half_written": {"writers": 3, "per_writer": 100, "crashers": 2},
    "maildir_hostile": {"rounds": 10},
    "maildir_cross_scope": {"scopes": 50, "per_scope": 10},
}
MAILDIR_QUICK: dict[str, dict[str, Any]] = {
    "maildir_kill": {"files": 60, "kills": 3, "scopes": 4},
    "maildir_writers": {"writers": 5, "per_writer": 12, "cli_every": 6},
    "maildir_half_written": {"writers": 2, "per_writer": 8, "crashers": 1},
    "maildir_hostile": {"rounds": 1},
    "maildir_cross_scope": {"scopes": 9, "per_scope": 3},
}

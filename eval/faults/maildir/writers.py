"""``maildir_writers`` and ``maildir_half_written``: many writers, slow writers, writers killed mid-file."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from scopehub.hub.transports.maildir.files import publish, render
from scopehub.hub.transports.maildir.layout import (
    dispatch_name,
    inbox_dir,
    scope_folder,
)
from scopehub.hub.transports.maildir.send import name_taken_in_scope, send_dispatch
from scopehub.memory import Store

from .._harness import child_env
from .._outcome import Outcome, Scenario, timed
from ._harness import (
    INBOXES,
    _agents_hub,
    _Answered,
    _answered,
    _body,
    _bound,
    _check_body,
    _count_files,
    _dlq_entries,
    _HubProcess,
    _payload,
    _report_answered,
    _report_process,
    _rows,
    _running_hub,
    _wait,
)

# -- concurrent writers ---------------------------------------------------------------------------

_WRITER = "from scopehub.eval.faults.maildir.writers import _writer_child; _writer_child()"


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
                        env=child_env(),
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

    out = Outcome("maildir_writers")
    with timed(out):
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

_SLOW = "from scopehub.eval.faults.maildir.writers import _slow_child; _slow_child()"


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
                    env=child_env(),
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

    out = Outcome("maildir_half_written")
    with timed(out):
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


SCENARIOS = {
    "maildir_writers": Scenario(
        maildir_writers, heavy={"writers": 5, "per_writer": 400, "cli_every": 20}, quick={"writers": 5, "per_writer": 12, "cli_every": 6}
    ),
    "maildir_half_written": Scenario(
        maildir_half_written, heavy={"writers": 3, "per_writer": 100, "crashers": 2}, quick={"writers": 2, "per_writer": 8, "crashers": 1}
    ),
}

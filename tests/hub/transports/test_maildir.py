"""The maildir intake as an outside program sees it: send a file, the right chat gets it once."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
from pathlib import Path

import pytest

from scopehub.hub.transports.maildir import (
    MaildirIntake,
    backlog,
    dispatch_name,
    dispatch_out,
    dlq_count,
    erase_scope,
    list_outbox,
    parse_name,
    read_outbox,
    scope_folder,
    scope_from_folder,
    send_dispatch,
)
from tests.hub.transports.helpers import AGENTS, StoreHub, crash_child, files_under


def intake_for(root: Path, hub: StoreHub, **kwargs) -> MaildirIntake:
    kwargs.setdefault("rate_per_scope", None)
    return MaildirIntake(root, agents=AGENTS, deliver=hub.deliver, **kwargs)


def drain(intake: MaildirIntake):
    return asyncio.run(intake.drain_once())


def receipt(root: Path, folder: str, inbox: str, name: str) -> dict:
    return json.loads((root / "receipts" / folder / inbox / f"{name}.json").read_text())


# -- layout and names -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "folder"),
    [
        ("user:42", "user-42"),
        ("group:-100123", "group--100123"),
        ("user:a.b", "user-a%2Eb"),
        ("user:../../etc", "user-%2E%2E%2F%2E%2E%2Fetc"),
        ("group:ü%", "group-%C3%BC%25"),
    ],
)
def test_scope_folders_are_safe_and_reversible(scope: str, folder: str) -> None:
    assert scope_folder(scope) == folder
    assert scope_from_folder(folder) == scope
    assert "/" not in folder and folder not in (".", "..")


@pytest.mark.parametrize("folder", ["user-%342", "USER-42", "user42", "outbox", "user-", "user-4%2"])
def test_only_the_canonical_folder_names_a_scope(folder: str) -> None:
    with pytest.raises(ValueError):
        scope_from_folder(folder)


def test_the_file_name_is_enough_to_triage(root: Path) -> None:
    path = send_dispatch(
        root, "user:42", "hub", sender="cron", subject="Daily report!", body="x", priority="urgent", created=1769869800
    )
    assert path.name == "2026-01-31T14-30-00Z_urgent_cron_daily-report.md"
    info = parse_name(path.name)
    assert (info.priority, info.origin, info.slug, info.created) == ("urgent", "cron", "daily-report", 1769869800)
    again = send_dispatch(
        root, "user:42", "notes", sender="cron", subject="Daily report!", body="y", priority="urgent", created=1769869800
    )
    assert again.name != path.name and again.name.startswith("2026-01-31T14-30-00Z_urgent_cron_daily-report.")
    assert again.name.endswith(".md") and parse_name(again.name) is not None


# -- the happy path -------------------------------------------------------------------


def test_send_then_intake_delivers_to_the_right_scope_and_agent(root: Path, hub: StoreHub, store) -> None:
    path = send_dispatch(
        root, "user:42", "notes", sender="cron", subject="Daily report", body="Three **new** tickets.\n", thread="t-1"
    )
    other = send_dispatch(root, "group:-100123", "hub", sender="ci", subject="Build", body="Green.")
    assert path.parent == root / "user-42" / "notes" / "new"

    report = drain(intake_for(root, hub))

    assert report.delivered == 2 and report.rejected == 0
    by_name = {d.name: d for d in hub.seen}
    first = by_name[path.name]
    assert (first.scope, first.agent, first.sender, first.subject) == ("user:42", "notes", "cron", "Daily report")
    assert (first.body, first.thread, first.priority, first.wants_reply) == ("Three **new** tickets.", "t-1", "normal", False)
    assert by_name[other.name].scope == "group:-100123" and by_name[other.name].agent is None
    assert store.find_ext("user:42", f"maildir:{path.name}").text == "Daily report\n\nThree **new** tickets."
    assert store.find_ext("group:-100123", f"maildir:{path.name}") is None
    assert not path.exists() and (root / "user-42" / "notes" / "cur" / path.name).exists()
    got = receipt(root, "user-42", "notes", path.name)
    assert (got["outcome"], got["scope"], got["agent"], got["reason"]) == ("drained", "user:42", "notes", None)
    assert got["message_id"] == store.find_ext("user:42", f"maildir:{path.name}").id
    assert list_outbox(root, "cron") == []  # no reply asked for

    assert drain(intake_for(root, hub)).delivered == 0  # cur/ is never read again
    assert len(hub.answered) == 2


def test_the_reply_comes_back_in_the_senders_outbox(root: Path, hub: StoreHub) -> None:
    path = send_dispatch(root, "user:42", "tasks", sender="billing", subject="Invoice 7", body="paid?", reply=True, thread="inv-7", priority="urgent")

    drain(intake_for(root, hub))

    [(name, state)] = list_outbox(root, "billing")
    assert state == "new"
    item = read_outbox(root, "billing", name)
    assert (item.sender, item.reply_to, item.thread, item.scope) == ("tasks", path.name, "inv-7", "user:42")
    assert item.body == "tasks read: Invoice 7" and item.priority == "urgent" and item.kind == "reply"
    assert "to: billing" in item.text
    assert receipt(root, "user-42", "tasks", path.name)["reply"] == name


def test_a_front_matter_scope_or_to_cannot_redirect_a_file(root: Path, hub: StoreHub, store) -> None:
    box = root / "user-1" / "hub" / "new"
    box.mkdir(parents=True)
    (box / "x.md").write_text("---\nfrom: mallory\nscope: user:2\nto: tasks\n---\nhi\n")

    drain(intake_for(root, hub))

    [dispatch] = hub.seen
    assert (dispatch.scope, dispatch.agent) == ("user:1", None)
    assert store.find_ext("user:1", "maildir:x.md") is not None
    assert store.count_messages("user:2") == 0


# -- rejects --------------------------------------------------------------------------

REJECTS = {
    "no-front-matter.md": (b"just text\n", "no front matter"),
    "empty.md": (b"", "no front matter"),
    "unclosed.md": (b"---\nfrom: cron\nbody\n", "not closed"),
    "list.md": (b"---\n- from\n- cron\n---\nbody\n", "mapping of fields, not a list"),
    "bad-priority.md": (b"---\nfrom: cron\npriority: asap\n---\nbody\n", "bad priority 'asap'"),
    "latin1.md": ("---\nfrom: cron\n---\ncaf\u00e9\n".encode("latin-1"), "not UTF-8"),
    "nul.md": (b"---\nfrom: cron\n---\na\x00b\n", "NUL"),
    "huge.md": (b"---\nfrom: cron\n---\n" + b"x" * (1024 * 1024), "over 1 MiB"),
    "no-from.md": (b"---\nsubject: hi\n---\nbody\n", "no 'from'"),
}


def test_each_reject_lands_in_dlq_with_its_reason_and_nothing_is_deleted(root: Path, hub: StoreHub) -> None:
    for name, (data, _reason) in REJECTS.items():
        box = root / "user-5" / "notes" / "new"
        box.mkdir(parents=True, exist_ok=True)
        (box / name).write_bytes(data)
    for folder, inbox in (("user-5", "ghost"), ("nobody", "hub"), ("user-%35", "hub")):
        (root / folder / inbox / "new").mkdir(parents=True)
        (root / folder / inbox / "new" / "ok.md").write_bytes(b"---\nfrom: cron\n---\nhello\n")

    report = drain(intake_for(root, hub))

    assert hub.seen == [] and report.rejected == len(REJECTS) + 3
    for name, (data, reason) in REJECTS.items():
        dead = root / "dlq" / "user-5" / "notes" / name
        assert dead.read_bytes() == data, name  # moved whole, not rewritten or deleted
        assert reason in (root / "dlq" / "user-5" / "notes" / f"{name}.reason").read_text(), name
        got = receipt(root, "user-5", "notes", name)
        assert (got["outcome"], got["scope"]) == ("dlq", "user:5") and reason in got["reason"], name
    assert "unknown agent 'ghost'" in (root / "dlq" / "user-5" / "ghost" / "ok.md.reason").read_text()
    assert "unknown scope" in (root / "dlq" / "nobody" / "hub" / "ok.md.reason").read_text()
    assert "unknown scope" in (root / "dlq" / "user-%35" / "hub" / "ok.md.reason").read_text()
    assert dlq_count(root) == len(REJECTS) + 3
    assert [row.waiting for row in backlog(root)] == [0] * len(backlog(root))


def test_a_scope_the_hub_does_not_serve_is_rejected(root: Path, hub: StoreHub) -> None:
    send_dispatch(root, "user:9", "hub", sender="cron", body="x")
    drain(intake_for(root, hub, scope_ok=lambda scope: scope != "user:9"))
    assert hub.seen == []
    [reason] = (root / "dlq" / "user-9" / "hub").glob("*.reason")
    assert "unknown scope 'user:9'" in reason.read_text()


def test_a_reused_name_is_rejected_not_silently_dropped(root: Path, hub: StoreHub) -> None:
    path = send_dispatch(root, "user:1", "notes", sender="cron", subject="daily", body="one")
    drain(intake_for(root, hub))
    (root / "user-1" / "hub" / "new").mkdir(parents=True)
    (root / "user-1" / "hub" / "new" / path.name).write_text("---\nfrom: cron\n---\ntwo\n")

    drain(intake_for(root, hub))

    assert len(hub.answered) == 1
    assert "already delivered" in (root / "dlq" / "user-1" / "hub" / f"{path.name}.reason").read_text()


def test_a_failing_delivery_keeps_the_file_for_a_retry(root: Path, hub: StoreHub) -> None:
    path = send_dispatch(root, "user:1", "notes", sender="cron", body="x")
    now = [1000.0]
    calls = []

    async def flaky(dispatch):
        calls.append(dispatch.name)
        if len(calls) == 1:
            raise RuntimeError("database is locked")
        return await hub.deliver(dispatch)

    intake = MaildirIntake(root, agents=AGENTS, deliver=flaky, rate_per_scope=None, retry_after=30, clock=lambda: now[0])
    assert drain(intake).failed == 1 and path.exists()
    assert drain(intake).delivered == 0 and len(calls) == 1  # waits out retry_after
    now[0] += 31
    assert drain(intake).delivered == 1 and not path.exists() and len(calls) == 2


# -- crash between the commit and the move --------------------------------------------


@pytest.mark.parametrize("point", ["after_commit", "before_move"])
def test_a_crash_between_commit_and_move_never_answers_twice(root: Path, tmp_path: Path, point: str) -> None:
    db = tmp_path / "hub.db"
    path = send_dispatch(root, "user:3", "notes", sender="billing", subject="Invoice", body="pay", reply=True)

    child = multiprocessing.get_context("spawn").Process(target=crash_child, args=(str(root), str(db), point))
    child.start()
    child.join(60)
    assert child.exitcode == 3  # it died mid-way
    assert path.exists()  # still in new/: the restarted intake must see it again

    from scopehub.memory import Store

    with Store(db) as store:
        assert store.count_messages("user:3") == 2  # the message and its answer were committed
        restarted = StoreHub(store)
        report = drain(intake_for(root, restarted))
        assert report.delivered == 1
        assert [d.name for d in restarted.seen] == [path.name]  # delivered again, same key...
        assert restarted.answered == []  # ...and the hub double saw the duplicate key
        assert store.count_messages("user:3") == 2
    assert not path.exists() and (root / "user-3" / "notes" / "cur" / path.name).exists()
    assert receipt(root, "user-3", "notes", path.name)["outcome"] == "drained"
    [(reply, _state)] = list_outbox(root, "billing")  # exactly one reply, written once
    assert read_outbox(root, "billing", reply).body == "notes read: Invoice"


def test_a_move_cut_short_after_the_link_is_finished_not_rejected(root: Path, hub: StoreHub) -> None:
    path = send_dispatch(root, "user:3", "notes", sender="cron", body="x")
    drain(intake_for(root, hub))
    os.link(root / "user-3" / "notes" / "cur" / path.name, path)  # as if unlink() never ran

    report = drain(intake_for(root, hub))

    assert (report.delivered, report.rejected) == (0, 0) and not path.exists()
    assert (root / "user-3" / "notes" / "cur" / path.name).exists() and len(hub.answered) == 1


# -- order and rate -------------------------------------------------------------------


def test_urgent_goes_before_normal_before_low_then_oldest_first(root: Path, hub: StoreHub) -> None:
    t = 1_700_000_000
    low = send_dispatch(root, "user:1", "notes", sender="a", subject="low", body="x", priority="low", created=t)
    normal_new = send_dispatch(root, "user:1", "notes", sender="a", subject="n2", body="x", created=t + 20)
    urgent = send_dispatch(root, "user:1", "tasks", sender="a", subject="urgent", body="x", priority="urgent", created=t + 30)
    normal_old = send_dispatch(root, "user:1", "hub", sender="a", subject="n1", body="x", created=t + 10)

    drain(intake_for(root, hub))

    assert [d.name for d in hub.seen] == [urgent.name, normal_old.name, normal_new.name, low.name]


def test_the_rate_limit_holds_a_burst_back_oldest_and_urgent_first(root: Path, hub: StoreHub) -> None:
    t = 1_700_000_000
    box = root / "user-1" / "notes" / "new"
    box.mkdir(parents=True)
    burst = [box / dispatch_name(t + i, "normal", "flood", f"item {i}") for i in range(1000)]
    for path in burst:  # a burst dropped straight into new/ (fast: no fsync)
        path.write_text("---\nfrom: flood\n---\nx\n")
    urgent = send_dispatch(root, "user:1", "notes", sender="flood", subject="fire", body="x", priority="urgent", created=t + 2000)
    quiet = send_dispatch(root, "user:2", "notes", sender="cron", subject="hello", body="x", created=t + 5000)
    now = [2_000_000_000.0]
    intake = intake_for(root, hub, rate_per_scope=10, rate_period=60, clock=lambda: now[0])

    report = drain(intake)

    names = [d.name for d in hub.seen]
    assert names == [urgent.name] + [p.name for p in burst[:9]] + [quiet.name]  # the other chat is not starved
    assert (report.delivered, report.waiting) == (11, 991)
    assert report.next_in == pytest.approx(6.0)
    assert next(row for row in backlog(root) if row.box == "user-1/notes").waiting == 991

    assert drain(intake).delivered == 0  # nothing refilled yet
    now[0] += 30
    assert drain(intake).delivered == 5
    now[0] += 3600
    assert drain(intake).delivered == 10  # saved up at most one minute's worth
    assert [d.name for d in hub.seen[11:]] == [p.name for p in burst[9:24]]


# -- backlog and staleness ------------------------------------------------------------


def test_backlog_and_one_stale_warning_per_inbox(root: Path, hub: StoreHub, caplog) -> None:
    old = send_dispatch(root, "user:1", "notes", sender="cron", body="x")
    send_dispatch(root, "user:1", "notes", sender="cron", body="y")
    other = send_dispatch(root, "user:2", "hub", sender="cron", body="z")
    now = old.stat().st_mtime
    os.utime(old, (now - 900, now - 900))
    os.utime(other, (now - 30, now - 30))  # each file's age set, not left to how fast this runs
    intake = intake_for(root, hub, stale_after=600, clock=lambda: now)

    rows = {row.box: row for row in backlog(root, now=now)}
    assert rows["user-1/notes"].waiting == 2 and rows["user-1/notes"].oldest_age == pytest.approx(900)
    assert rows["user-2/hub"].waiting == 1 and rows["user-2/hub"].oldest_age == pytest.approx(30)  # its own box's oldest

    with caplog.at_level("WARNING"):
        for _tick in range(3):
            intake.check_stale()
    stale = [r.getMessage() for r in caplog.records if "stale after" in r.getMessage()]
    assert len(stale) == 1 and "user-1/notes/new" in stale[0] and "2 file(s)" in stale[0]

    drain(intake)
    caplog.clear()
    assert intake.check_stale() == []
    send_dispatch(root, "user:1", "notes", sender="cron", body="late")
    [late] = (root / "user-1" / "notes" / "new").iterdir()
    os.utime(late, (now - 700, now - 700))
    with caplog.at_level("WARNING"):
        intake.check_stale()
    assert sum("stale after" in r.getMessage() for r in caplog.records) == 1  # warned again: new backlog


def test_files_left_in_tmp_for_36_hours_are_removed_and_nothing_else(root: Path, hub: StoreHub, caplog) -> None:
    waiting = send_dispatch(root, "user:1", "notes", sender="cron", body="x")
    now = waiting.stat().st_mtime
    tmp = root / "user-1" / "notes" / "tmp"
    tmp.mkdir(exist_ok=True)
    (root / "outbox" / "cron" / "tmp").mkdir(parents=True, exist_ok=True)
    ages = {tmp / "dead.writer": 37, tmp / "slow.writer": 30, root / "outbox" / "cron" / "tmp" / "dead.out": 40}
    for path, hours in ages.items():
        path.write_text("partial")
        os.utime(path, (now - hours * 3600, now - hours * 3600))
    os.utime(waiting, (now - 40 * 3600, now - 40 * 3600))  # waiting in new/: never removed, however old
    intake = intake_for(root, hub, stale_after=600, clock=lambda: now)
    assert {row.box: row.abandoned for row in backlog(root, now=now)} == {"user-1/notes": 2, "outbox/cron": 1}
    with caplog.at_level("WARNING"):
        intake.check_stale()
    assert sorted(p.name for p in ages if p.exists()) == ["slow.writer"]
    assert waiting.exists() and "removed 2 file(s) left in tmp/" in caplog.text


# -- erasure --------------------------------------------------------------------------


def test_erase_scope_removes_the_scopes_files_and_nothing_else(root: Path, hub: StoreHub) -> None:
    send_dispatch(root, "user:1", "notes", sender="billing", subject="mine", body="secret", reply=True)
    send_dispatch(root, "user:1", "hub", sender="cron", body="waiting")
    (root / "user-1" / "tasks" / "new").mkdir(parents=True)
    (root / "user-1" / "tasks" / "new" / "bad.md").write_text("no front matter")
    send_dispatch(root, "user:2", "notes", sender="billing", subject="theirs", body="kept", reply=True)
    dispatch_out(root, "billing", sender="hub", subject="note", body="about user 1", scope="user:1")
    drain(intake_for(root, hub))
    send_dispatch(root, "user:1", "notes", sender="cron", body="arrived later")
    before = files_under(root)

    def of_user_1(path: str) -> bool:
        return "user-1" in path or (path.startswith("outbox/") and "scope: user:1\n" in (root / path).read_text())

    doomed = {path for path in before if of_user_1(path)}
    assert len([p for p in doomed if p.startswith("outbox/")]) == 2  # the reply and the dispatch out

    removed = erase_scope(root, "user:1")

    assert set(files_under(root)) == set(before) - doomed
    assert removed == {"inbox": 3, "receipts": 3, "dlq": 2, "outbox": 2}
    [(name, _)] = list_outbox(root, "billing")
    assert read_outbox(root, "billing", name).scope == "user:2"

"""Hostile files never crash the intake: each goes to dlq/ with a reason or is delivered normally."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from scopehub.hub.transports.maildir import MaildirIntake, backlog
from tests.hub.transports.helpers import AGENTS, StoreHub

GOOD = b"---\nfrom: cron\nsubject: fine\n---\nhello\n"


def drop(root: Path, name: str | bytes, data: bytes, inbox: str = "notes") -> Path:
    box = root / "user-1" / inbox / "new"
    box.mkdir(parents=True, exist_ok=True)
    path = os.path.join(os.fsencode(box), name if isinstance(name, bytes) else os.fsencode(name))
    with open(path, "wb") as handle:
        handle.write(data)
    return Path(os.fsdecode(path))


def drain(root: Path, hub: StoreHub):
    intake = MaildirIntake(root, agents=AGENTS, deliver=hub.deliver, rate_per_scope=None)
    return asyncio.run(intake.drain_once())


@pytest.mark.parametrize(
    "name",
    [
        "with spaces in it.md",
        "ünïcødé 日本語.md",
        "..md",
        "a..b.md",
        "...",
        "-rf.md",
        "line\nbreak.md",
        "x" * 251 + ".md",  # 254 bytes: no room for '.json' beside it
        "ü" * 126 + ".md",  # 255 bytes of UTF-8
    ],
)
def test_odd_names_are_delivered_normally(root: Path, hub: StoreHub, store, name: str) -> None:
    drop(root, name, GOOD)

    report = drain(root, hub)

    assert report.delivered == 1 and report.rejected == 0
    assert [d.name for d in hub.seen] == [name]
    assert store.find_ext("user:1", f"maildir:{name}") is not None
    assert (root / "user-1" / "notes" / "cur" / name).read_bytes() == GOOD
    [receipt] = (root / "receipts" / "user-1" / "notes").iterdir()
    assert json.loads(receipt.read_text())["name"] == name


def test_a_name_that_is_not_utf8_goes_to_dlq(root: Path, hub: StoreHub) -> None:
    drop(root, b"caf\xe9.md", GOOD)
    assert drain(root, hub).rejected == 1 and hub.seen == []
    assert (root / "dlq" / "user-1" / "notes" / os.fsdecode(b"caf\xe9.md")).read_bytes() == GOOD
    [reason] = (root / "dlq" / "user-1" / "notes").glob("*.reason")
    assert "file name is not UTF-8" in reason.read_text()


BILLION_LAUGHS = (
    "---\nfrom: cron\n"
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    "subject: *g\n---\nboom\n"
)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"---\nfrom: cron\n---\nbody with a \x00 NUL\n", "NUL"),
        (b"\x00\x00\x00\x00", "NUL"),
        (b"---\nfrom: cron\npad: " + b"y" * 70_000 + b"\n---\nbody\n", "front matter over 64 KiB"),
        (b"---\n!!python/object/apply:os.system ['touch pwned']\n---\nx\n", "not valid YAML"),
        (b"---\nfrom: !!python/object/apply:os.system ['touch pwned']\n---\nx\n", "not valid YAML"),
        (b"---\nfrom: !custom cron\n---\nx\n", "not valid YAML"),
        (b"---\n- from: cron\n---\nx\n", "not a list"),
        (b"---\njust a string\n---\nx\n", "not a str"),
        (b"---\n42\n---\nx\n", "not a int"),
        (b"---\n---\nx\n", "front matter is empty"),
        (b"---\nfrom: [cron, ci]\n---\nx\n", "'from' must be a single value"),
        (b"---\nfrom: cron\nsubject: {a: 1}\n---\nx\n", "'subject' must be a single value"),
        (BILLION_LAUGHS.encode(), "anchors or aliases"),
        (BILLION_LAUGHS.replace("subject: *g", "x: *g").encode(), "anchors or aliases"),  # under a field nobody reads
        (b"---\nfrom: &who cron\nsubject: *who\n---\nx\n", "anchors or aliases"),
        (b"---\nfrom: " + b"[" * 20_000 + b"\n---\nx\n", "not valid YAML"),
        (b"---\nfrom: cron\nreply: maybe\n---\nx\n", "'reply' must be true or false"),
        (b"---\nfrom: ../../etc\n---\nx\n", "'from' must be a simple name"),
        (b"---\nfrom: cron\n: : :\n\t- bad\n---\nx\n", "not valid YAML"),
        (b"---\nfrom: 1" + b"0" * 5000 + b"\n---\nx\n", "not valid YAML"),  # int over the str limit
        (b"---\nfrom: cron\nn: 1" + b"0" * 5000 + b"\n---\nx\n", "not valid YAML"),
        (b"\xef\xbb\xbf\xff---\nfrom: cron\n---\nx\n", "not UTF-8"),
    ],
)
def test_hostile_contents_go_to_dlq_with_a_reason(root: Path, hub: StoreHub, data: bytes, reason: str) -> None:
    drop(root, "evil.md", data)

    report = drain(root, hub)

    assert (report.delivered, report.rejected) == (0, 1) and hub.seen == []
    assert (root / "dlq" / "user-1" / "notes" / "evil.md").read_bytes() == data
    assert reason in (root / "dlq" / "user-1" / "notes" / "evil.md.reason").read_text()
    assert not Path("pwned").exists()


def test_a_bom_and_windows_line_ends_are_fine(root: Path, hub: StoreHub) -> None:
    drop(root, "win.md", b"\xef\xbb\xbf---\r\nfrom: cron\r\nsubject: hi\r\n---\r\nbody\r\n")
    assert drain(root, hub).delivered == 1
    assert (hub.seen[0].sender, hub.seen[0].subject, hub.seen[0].body) == ("cron", "hi", "body")


def test_a_symlink_is_never_followed(root: Path, hub: StoreHub, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("---\nfrom: cron\n---\nthe server's private key\n")
    box = root / "user-1" / "notes" / "new"
    box.mkdir(parents=True)
    (box / "link.md").symlink_to(secret)

    assert drain(root, hub).rejected == 1 and hub.seen == []

    moved = root / "dlq" / "user-1" / "notes" / "link.md"
    assert moved.is_symlink() and secret.read_text().endswith("private key\n")
    assert "not a regular file" in (root / "dlq" / "user-1" / "notes" / "link.md.reason").read_text()


def test_folders_and_fifos_in_new_go_to_dlq_without_hanging(root: Path, hub: StoreHub) -> None:
    box = root / "user-1" / "notes" / "new"
    (box / "folder.md").mkdir(parents=True)
    (box / "folder.md" / "inner.md").write_bytes(GOOD)
    os.mkfifo(box / "pipe.md")

    assert drain(root, hub).rejected == 2 and hub.seen == []

    dead = root / "dlq" / "user-1" / "notes"
    assert (dead / "folder.md" / "inner.md").read_bytes() == GOOD  # moved whole
    assert "not a regular file" in (dead / "pipe.md.reason").read_text()
    assert [row.waiting for row in backlog(root) if row.box == "user-1/notes"] == [0]


def test_symlinked_scope_and_inbox_folders_are_not_followed(root: Path, hub: StoreHub, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "hub" / "new").mkdir(parents=True)
    (elsewhere / "hub" / "new" / "x.md").write_bytes(GOOD)
    root.mkdir()
    (root / "user-1").symlink_to(elsewhere)
    (root / "user-2").mkdir()
    (root / "user-2" / "notes").symlink_to(elsewhere / "hub")

    assert drain(root, hub).delivered == 0 and hub.seen == []
    assert (elsewhere / "hub" / "new" / "x.md").exists()


def test_a_mixed_bag_never_stops_the_good_files(root: Path, hub: StoreHub) -> None:
    drop(root, "a-bad.md", b"\xff\xfe")
    drop(root, "b-good.md", GOOD)
    drop(root, "c-bad.md", b"---\n[\n---\n")
    drop(root, "d-good.md", GOOD, inbox="hub")

    report = drain(root, hub)

    assert (report.delivered, report.rejected) == (2, 2)
    assert sorted(d.name for d in hub.seen) == ["b-good.md", "d-good.md"]

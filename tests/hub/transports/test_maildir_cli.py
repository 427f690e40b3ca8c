"""``dispatch send|status|list|read|ack`` through click's CliRunner."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from scopehub.hub.transports.maildir import MaildirIntake
from scopehub.hub.transports.maildir.cli import dispatch_group
from tests.hub.transports.helpers import AGENTS, StoreHub


def run(*args: str, input: str | bytes | None = None, env: dict | None = None):
    return CliRunner().invoke(dispatch_group, list(args), input=input, env=env, catch_exceptions=False)


def test_every_command_has_help() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for command in ("send", "status", "list", "read", "ack"):
        assert command in result.output
        help_text = run(command, "--help").output
        assert "--root" in help_text and "HUB_MAILDIR" in help_text
        assert len(help_text.split("Options:")[0].strip()) > 40, command


def test_send_from_stdin_then_status_then_intake(root: Path, hub: StoreHub) -> None:
    result = run(
        "send", "--root", str(root), "--scope", "user:42", "--to", "notes", "--from", "cron",
        "--priority", "urgent", "--subject", "Daily report", "--thread", "t9", "--reply", "-",
        input="Three new tickets.\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    path = Path(result.output.strip())
    assert path.parent == root / "user-42" / "notes" / "new"
    assert path.name.endswith("_urgent_cron_daily-report.md")

    status = json.loads(run("status", "--root", str(root), "--json").output)
    [row] = status["inboxes"]
    assert (row["box"], row["scope"], row["waiting"], status["dlq"]) == ("user-42/notes", "user:42", 1, 0)

    asyncio.run(MaildirIntake(root, agents=AGENTS, deliver=hub.deliver).drain_once())
    [dispatch] = hub.seen
    assert (dispatch.body, dispatch.thread, dispatch.priority, dispatch.wants_reply) == ("Three new tickets.", "t9", "urgent", True)

    text = run("status", "--root", str(root)).output
    assert "user-42/notes" in text and "outbox/cron" in text and "dlq: 0 file(s)" in text


def test_send_reads_a_file_and_prints_json(root: Path, tmp_path: Path) -> None:
    body = tmp_path / "body.md"
    body.write_text("# Title\n\nünïcode body\n", encoding="utf-8")
    result = run("send", "--root", str(root), "-s", "group:-100", "--to", "hub", "--from", "ci", "--json", str(body))
    data = json.loads(result.output)
    assert Path(data["path"]).read_text(encoding="utf-8").endswith("# Title\n\nünïcode body\n")
    assert Path(data["path"]).parent.parent.parent.name == "group--100"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scope", "chat:1", "--to", "hub", "--from", "cron"], "invalid scope"),
        (["--scope", "user:1", "--to", "../x", "--from", "cron"], "to must be a simple name"),
        (["--scope", "user:1", "--to", "hub", "--from", "a b"], "from must be a simple name"),
        (["--scope", "user:1", "--to", "hub", "--from", "cron", "--priority", "asap"], "asap"),
    ],
)
def test_send_refuses_bad_arguments(root: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(dispatch_group, ["send", "--root", str(root), *args, "-"], input="x")
    assert result.exit_code == 2 and message in result.output
    assert not list(root.glob("*/*/new/*"))


def test_send_refuses_a_body_that_is_not_utf8_or_has_nul(root: Path) -> None:
    base = ["send", "--root", str(root), "-s", "user:1", "--to", "hub", "--from", "cron", "-"]
    assert "not UTF-8" in CliRunner().invoke(dispatch_group, base, input=b"\xff\xfe").output
    assert "NUL" in CliRunner().invoke(dispatch_group, base, input=b"a\x00b").output
    assert not list(root.glob("*/*/new/*"))


def test_the_root_defaults_to_hub_maildir_then_a_local_folder(tmp_path: Path) -> None:
    args = ["send", "-s", "user:1", "--to", "hub", "--from", "cron", "-"]
    from_env = Path(run(*args, input="x", env={"HUB_MAILDIR": str(tmp_path / "env-root")}).output.strip())
    assert from_env.is_relative_to(tmp_path / "env-root")
    local = Path(run(*args, input="x").output.strip())  # the tests run from a temp folder
    assert local.parts[0] == "agents-hub-maildir" and local.exists()


def test_a_team_lists_reads_and_acks_its_outbox(root: Path, hub: StoreHub) -> None:
    run("send", "--root", str(root), "-s", "user:1", "--to", "tasks", "--from", "billing", "--subject", "Invoice 7", "--reply", "-", input="paid?")
    asyncio.run(MaildirIntake(root, agents=AGENTS, deliver=hub.deliver).drain_once())

    [name] = run("list", "--root", str(root), "--team", "billing").output.split()
    assert json.loads(run("list", "--root", str(root), "-t", "billing", "--json").output) == [{"name": name, "state": "new"}]

    text = run("read", "--root", str(root), "--team", "billing", name).output
    assert text.startswith("---\n") and "from: tasks" in text and text.rstrip().endswith("tasks read: Invoice 7")
    item = json.loads(run("read", "--root", str(root), "--team", "billing", "--json", name).output)
    assert (item["sender"], item["scope"], item["body"], item["state"]) == ("tasks", "user:1", "tasks read: Invoice 7", "new")

    acked = run("ack", "--root", str(root), "--team", "billing", name).output.strip()
    assert Path(acked) == root / "outbox" / "billing" / "cur" / name
    assert run("list", "--root", str(root), "--team", "billing").output == ""
    assert run("list", "--root", str(root), "--team", "billing", "--all").output.strip() == f"{name}  (acked)"
    assert "already acked" in run("ack", "--root", str(root), "--team", "billing", name).output
    assert json.loads(run("read", "--root", str(root), "-t", "billing", "--json", name).output)["state"] == "cur"


@pytest.mark.parametrize("name", ["../../user-1/notes/cur/x.md", "..", "nope.md"])
def test_read_and_ack_refuse_paths_and_unknown_names(root: Path, name: str) -> None:
    (root / "outbox" / "billing" / "new").mkdir(parents=True)
    for command in ("read", "ack"):
        result = CliRunner().invoke(dispatch_group, [command, "--root", str(root), "--team", "billing", name])
        assert result.exit_code in (1, 2) and ("not a file name" in result.output or "no 'nope.md'" in result.output)
    bad_team = CliRunner().invoke(dispatch_group, ["list", "--root", str(root), "--team", "../user-1"])
    assert bad_team.exit_code == 2 and "team must be a simple name" in bad_team.output


def test_status_counts_the_dlq(root: Path, hub: StoreHub) -> None:
    (root / "user-1" / "notes" / "new").mkdir(parents=True)
    (root / "user-1" / "notes" / "new" / "junk.md").write_text("junk")
    asyncio.run(MaildirIntake(root, agents=AGENTS, deliver=hub.deliver).drain_once())
    assert "dlq: 1 file(s)" in run("status", "--root", str(root)).output
    assert json.loads(run("status", "--root", str(root), "--json").output)["dlq"] == 1


def test_status_shows_files_a_dead_writer_left_in_tmp(root: Path) -> None:
    run("send", "--root", str(root), "--scope", "user:1", "--to", "notes", "--from", "cron", "-", input="ok\n")
    tmp = root / "user-1" / "notes" / "tmp"
    tmp.mkdir(exist_ok=True)
    left, writing = tmp / "1700000000.M1P9.host", tmp / "1700000001.M2P9.host"
    left.write_text("half a dispatch")
    writing.write_text("being written now")
    hour_ago = left.stat().st_mtime - 2 * 3600
    os.utime(left, (hour_ago, hour_ago))

    [row] = json.loads(run("status", "--root", str(root), "--json").output)["inboxes"]
    assert (row["box"], row["waiting"], row["abandoned"]) == ("user-1/notes", 1, 1)  # the fresh write is not counted
    assert "1 abandoned in tmp/" in run("status", "--root", str(root)).output


@pytest.mark.parametrize("command", [["status"], ["list", "--team", "crm"]])
def test_a_maildir_setting_that_names_a_file_is_one_clear_error(tmp_path: Path, command: list[str]) -> None:
    # `dispatch run` said "File exists: ..." and `dispatch status` "no inboxes under" a file.
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("x")
    result = CliRunner().invoke(dispatch_group, command, env={"HUB_MAILDIR": str(not_a_folder)})
    assert result.exit_code == 2, result.output
    assert f"'{not_a_folder}' is a file, not a folder" in result.output and "no inboxes" not in result.output
    assert not_a_folder.read_text() == "x"

"""A closed bot: invite codes and pairing, through PTB's real client and the CLI."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from scopehub.hub.cli.main import cli
from scopehub.hub.transports.telegram import REFUSAL
from scopehub.hub.transports.telegram.access import BAD_CODE, OPEN_BOT, OWNERS_ONLY, PAIRED
from scopehub.memory import Store, invites, is_paired
from tests.hub.telegram_helpers import bot_run, make_hub, rows

OWNER, STRANGER, LATE = 1, 55, 56


def test_an_owner_invites_a_stranger_who_pairs_with_the_code_and_is_let_in_on_every_worker(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    seen: dict[str, str] = {}

    async def first(hub, tg, bot) -> None:
        tg.push_message(STRANGER, "hello?")
        assert (await tg.await_sent(1, chat_id=STRANGER))[0]["text"] == REFUSAL  # says how to get in
        tg.push_message(OWNER, "/invite for Sam")
        invite = (await tg.await_sent(1, chat_id=OWNER))[0]["text"]
        link = invite.splitlines()[1]
        assert link.startswith("https://t.me/hub_test_bot?start=")
        seen["code"] = link.rsplit("=", 1)[1]
        tg.push_message(STRANGER, f"/start {seen['code']}")  # what opening the link sends
        assert (await tg.await_sent(2, chat_id=STRANGER))[1]["text"] == PAIRED
        tg.push_message(STRANGER, "add buy milk to my tasks")
        assert (await tg.await_sent(3, chat_id=STRANGER))[2]["text"].startswith("[tasks]")
        tg.push_message(LATE, f"/start {seen['code']}")  # one use only
        assert (await tg.await_sent(1, chat_id=LATE))[0]["text"] == BAD_CODE
        tg.push_message(STRANGER, "/invite")  # a paired person is not an owner
        assert (await tg.await_sent(4, chat_id=STRANGER))[3]["text"] == OWNERS_ONLY

    bot_run(tmp_path, first, hub=make_hub(db, allowed_users=str(OWNER)))
    assert [r[1] for r in rows(db, f"user:{STRANGER}")][:1] == ["add buy milk to my tasks"]  # nothing before pairing kept
    assert rows(db, f"user:{LATE}") == []

    async def second(hub, tg, bot) -> None:  # another worker (a restart): the pairing is in the database
        tg.push_message(STRANGER, "add eggs to my tasks")
        assert (await tg.await_sent(1, chat_id=STRANGER))[0]["text"].startswith("[tasks]")

    bot_run(tmp_path, second, hub=make_hub(db, allowed_users=str(OWNER)))
    with Store(db) as store:
        assert is_paired(store, STRANGER) and not is_paired(store, LATE)
        assert invites(store, now=0) == []  # used up


def test_the_cli_makes_invites_for_a_closed_bot_only(tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "hub.db"
    runner = CliRunner()
    monkeypatch.setenv("HUB_ALLOWED_USERS", "")
    refused = runner.invoke(cli, ["--db", str(db), "telegram", "invite"])
    assert refused.exit_code != 0 and "open to everyone" in refused.output
    monkeypatch.setenv("HUB_ALLOWED_USERS", str(OWNER))
    made = runner.invoke(cli, ["--db", str(db), "telegram", "invite", "--uses", "2", "--note", "the team", "--bot-username", "@hub_test_bot"])
    assert made.exit_code == 0, made.output
    code, link = made.output.strip().splitlines()
    assert link == f"https://t.me/hub_test_bot?start={code}"
    with Store(db) as store:
        (invite,) = invites(store, now=0)
    assert (invite.code, invite.uses_left, invite.note, invite.created_by) == (code, 2, "the team", "cli")

    async def scenario(hub, tg, bot) -> None:
        tg.push_message(STRANGER, f"/start {code}")
        assert (await tg.await_sent(1, chat_id=STRANGER))[0]["text"] == PAIRED

    bot_run(tmp_path, scenario, hub=make_hub(db, allowed_users=str(OWNER)))


def test_an_open_bot_has_nobody_to_invite(tmp_path: Path) -> None:
    async def scenario(hub, tg, bot) -> None:
        tg.push_message(OWNER, "/invite")
        assert (await tg.await_sent(1, chat_id=OWNER))[0]["text"] == OPEN_BOT

    bot_run(tmp_path, scenario)

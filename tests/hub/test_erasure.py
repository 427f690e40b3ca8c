"""Erasure: after /forget all or `agents-hub forget --yes`, nothing of the scope can be
found, not even in the raw database file, while other scopes are untouched."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from scopehub.agents import AgentRegistry, AgentSpec
from scopehub.hub import Deps, Hub, Inbound, load_settings
from scopehub.hub.cli import cli
from scopehub.hub.facts import FactKeeper
from scopehub.hub.models.testing import ScriptedModel
from scopehub.memory import Store, current_facts, fact_history

GONE = "user:1"
KEPT = "group:5"
# Distinctive strings: one per kind of data, for the scope to erase and the one to keep.
SECRETS = {
    "message": "ZEBRAFISH7731",
    "fact": "quokka4490",
    "old_fact": "wombat2288",
    "derived": "axolotl6604",
    "vault": "NARWHAL1177",
    "task": "OCELOT3321",
    "reminder": "TAPIR8080",
}
KEEP = "PANGOLIN5150"
SCOPED_TABLES = ("messages", "facts", "vault", "tasks", "reminders", "calls", "scopes")


def registry() -> AgentRegistry:
    reg = AgentRegistry()
    reg.add(AgentSpec(name="general", description="small talk and help", instructions="Be nice.", examples=("hi",)), "t")
    return reg


def make_hub(db: Path) -> Hub:
    store = Store(db)


    def extract(messages: list[dict[str, Any]], tools: list[Any]) -> str:
        if "backup" not in messages[-1]["content"]:
            return json.dumps({"facts": []})
        tag = KEEP if KEEP in messages[-1]["content"] else ""  # the kept scope's known facts carry its tag
        fact = {"text": f"User's backup email is {SECRETS['derived']}{tag}@example.com", "key": "user.backup_email", "op": "add"}
        return json.dumps({"facts": [fact]})

    extractor = ScriptedModel(default=extract)
    return Hub(
        Deps(
            store=store,
            settings=load_settings(db=db),
            model=ScriptedModel(default="noted"),
            facts=FactKeeper(store, extractor),
        ),
        registry(),
    )


def say(hub: Hub, scope: str, text: str) -> Any:
    async def run() -> Any:
        reply = await hub.handle(Inbound(scope=scope, text=text, chat=scope.split(":")[1], sender="Ram"))
        await hub.after_send(reply)
        return reply

    return asyncio.run(run())


def fill(hub: Hub) -> None:
    """Messages, agent calls, explicit facts with history, a derived fact, vault, tasks, reminders."""
    for scope, tag in ((GONE, ""), (KEPT, KEEP)):
        say(hub, scope, f"hello, my code word is {SECRETS['message']}{tag}")
        say(hub, scope, f"/remember my email is {SECRETS['old_fact']}{tag}@example.com")
        say(hub, scope, f"/remember actually my email is {SECRETS['fact']}{tag}@example.com")
        # The extractor learns a derived fact (facts are only ever taken from the person's words).
        say(hub, scope, f"my backup email is {SECRETS['derived']}{tag}@example.com")
        now = time.time()
        with hub.store.transaction() as conn:
            conn.execute(
                "INSERT INTO vault(scope, kind, title, body, created, updated) VALUES (?, 'note', 'n', ?, ?, ?)",
                (scope, f"note {SECRETS['vault']}{tag}", now, now),
            )
            conn.execute("INSERT INTO tasks(scope, title, created) VALUES (?, ?, ?)", (scope, f"task {SECRETS['task']}{tag}", now))
            conn.execute(
                "INSERT INTO reminders(scope, chat, text, due, created) VALUES (?, ?, ?, ?, ?)",
                (scope, "1", f"reminder {SECRETS['reminder']}{tag}", now + 3600, now),
            )
    # The scope to erase really has everything, facts history included.
    assert len(fact_history(hub.store, GONE)) == 3 and len(current_facts(hub.store, GONE)) == 2
    for table in SCOPED_TABLES:
        assert hub.store.query(f"SELECT count(*) FROM {table} WHERE scope = ?", (GONE,))[0][0] > 0, table


def file_bytes(db: Path) -> bytes:
    """The database file with its write-ahead log and shared memory, as on disk."""
    return b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists())


def all_text(store: Store) -> str:
    """Every row of every table (search index shadow tables included), as text."""
    tables = [row[0] for row in store.query("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return "\n".join(repr(row) for table in tables for row in store.query(f'SELECT * FROM "{table}"'))


def assert_erased(db: Path) -> None:
    with Store(db) as store:
        for table in SCOPED_TABLES:
            assert store.query(f"SELECT count(*) FROM {table} WHERE scope = ?", (GONE,))[0][0] == 0, table
        assert fact_history(store, GONE) == []
        for secret in SECRETS.values():
            assert store.search(GONE, secret) == [], secret
        assert store.search(KEPT, SECRETS["message"] + KEEP)  # the kept scope is still searchable
        everything = all_text(store).lower()
        for secret in SECRETS.values():
            # The scope's own text is gone from every table; the kept scope's copy is intact.
            assert everything.count(secret.lower()) == everything.count((secret + KEEP).lower()), secret
        raw = file_bytes(db)
        for secret in SECRETS.values():
            for variant in (secret, secret.lower()):
                at = raw.find(variant.encode())
                while at != -1:  # only the kept scope's copy, never the erased one
                    assert raw[at : at + len(variant) + len(KEEP)].lower() == (secret + KEEP).lower().encode(), variant
                    at = raw.find(variant.encode(), at + 1)
        # The other scope keeps everything.
        for table in SCOPED_TABLES:
            assert store.query(f"SELECT count(*) FROM {table} WHERE scope = ?", (KEPT,))[0][0] > 0, table
        # The group's history has one more version: the backup email kept before the reply, in
        # the member's words, then the extractor's "Ram: ..." version of it.
        assert len(fact_history(store, KEPT)) == 4
        assert (SECRETS["message"] + KEEP).encode() in raw
        assert (SECRETS["fact"] + KEEP).encode() in raw
        assert store.integrity_check() == "ok"


def test_forget_all_in_chat_erases_the_scope_down_to_the_file(tmp_path):
    db = tmp_path / "hub.db"
    hub = make_hub(db)
    fill(hub)
    reply = say(hub, GONE, "/forget all")
    assert reply.kind == "command" and "erased" in reply.text and "3 facts" in reply.text
    assert hub.facts_block(GONE) == ""  # the next call of this chat carries no facts
    hub.store.close()
    assert_erased(db)


def test_forget_command_erases_the_scope_down_to_the_file(tmp_path):
    db = tmp_path / "hub.db"
    hub = make_hub(db)
    fill(hub)
    hub.store.close()
    runner = CliRunner()
    declined = runner.invoke(cli, ["--db", str(db), "forget", "--scope", GONE], input="n\n")
    assert declined.exit_code != 0
    with Store(db) as store:
        assert store.count_messages(GONE) > 0  # nothing erased without confirmation
    result = runner.invoke(cli, ["--db", str(db), "forget", "--scope", GONE, "--yes"])
    assert result.exit_code == 0, result.output
    assert f"erased {GONE}" in result.output
    assert_erased(db)


def test_forget_command_asks_and_accepts_confirmation(tmp_path):
    db = tmp_path / "hub.db"
    hub = make_hub(db)
    say(hub, GONE, f"hello {SECRETS['message']}")
    hub.store.close()
    result = CliRunner().invoke(cli, ["--db", str(db), "forget", "--scope", GONE, "--json"], input="y\n")
    assert result.exit_code == 0, result.output
    removed = json.loads(result.output[result.output.index("{") :])["removed"]
    assert removed["messages"] == 2 and removed["calls"] == 1
    with Store(db) as store:
        assert store.count_messages(GONE) == 0

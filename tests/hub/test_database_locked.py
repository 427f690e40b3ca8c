"""A PostgreSQL table that another session holds locked, as people see it: a command waits
at most HUB_PG_LOCK_TIMEOUT and then says so in one line (never a hang, never a
traceback); a locked side table fails open and the reply still comes; a locked messages
table stores nothing and says the message was not stored. The one wait that stays
unbounded is a writer's turn in its scope (``hub_lock_scope``): a message waits behind the
scope's other writer instead of failing."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from scopehub.hub.cli.main import main
from scopehub.hub.models.testing import ScriptedModel
from scopehub.memory import NewMessage
from scopehub.memory.postgres import PostgresStore

pytestmark = pytest.mark.timeout(120)  # without the bound a locked table would hang the command


@pytest.fixture
def locked_db(postgres_store_url, monkeypatch):
    """The database URL, with a quick lock timeout and a scripted model for ``chat``."""
    monkeypatch.setenv("HUB_PG_LOCK_TIMEOUT", "0.3")
    monkeypatch.setenv("HUB_CLAIM_TTL", "5")
    model = ScriptedModel(default="noted")
    monkeypatch.setattr("scopehub.hub.app.build_model", lambda settings: model)
    return postgres_store_url, model


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exited:
        code = exited.code if isinstance(exited.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def holding(url: str, table: str) -> psycopg.Connection:
    """A second session holding ``table`` locked against every reader and writer until rollback."""
    holder = psycopg.connect(url)
    holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
    return holder


def stored(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return [(r, t) for r, t in conn.execute("SELECT role, text FROM messages WHERE scope = 'user:local' ORDER BY id")]


def test_a_command_on_a_locked_table_says_so_in_one_line(locked_db, capsys):
    url, _ = locked_db
    holder = holding(url, "facts")
    try:
        code, out, err = run_cli(capsys, "--db", url, "facts", "list", "--scope", "user:1")
    finally:
        holder.rollback()
        holder.close()
    assert code != 0 and out == ""
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "PostgreSQL is busy" in err and "HUB_PG_LOCK_TIMEOUT" in err and "try again" in err
    # once the lock is gone the same command works
    assert run_cli(capsys, "--db", url, "facts", "list", "--scope", "user:1")[0] == 0


def test_a_locked_side_table_still_gets_the_reply(locked_db, capsys):
    url, model = locked_db
    holder = holding(url, "claims")  # the answer claim's table: fails open
    try:
        code, out, err = run_cli(capsys, "--db", url, "chat", "-m", "buy milk")
    finally:
        holder.rollback()
        holder.close()
    assert code == 0, err
    assert "noted" in out and "Traceback" not in err
    assert stored(url) == [("user", "buy milk"), ("agent", "noted")]
    assert len(model.calls) == 1


def test_a_locked_messages_table_stores_nothing_and_says_so(locked_db, capsys):
    url, model = locked_db
    holder = holding(url, "messages")
    try:
        code, out, err = run_cli(capsys, "--db", url, "chat", "-m", "buy milk")
    finally:
        holder.rollback()
        holder.close()
    assert code != 0 and "noted" not in out
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 2  # the notice that it is tried again, then the verdict
    assert lines[0].startswith("the database is busy; trying again") and "lock timeout" in lines[0]
    assert lines[1].startswith("error: the database stayed busy") and lines[1].endswith("it was not stored")
    assert stored(url) == [] and model.calls == []  # nothing half-done, no model call


def test_a_writer_waits_its_turn_in_its_scope_however_long(postgres_store_url):
    store = PostgresStore(postgres_store_url, lock_timeout=0.2)
    holder = psycopg.connect(postgres_store_url)
    holder.execute("SELECT hub_lock_scope('user:1')")  # another writer of the scope, mid-transaction
    failures: list[BaseException] = []

    def write() -> None:
        try:
            store.append(NewMessage(scope="user:1", role="user", text="waits its turn"))
        except BaseException as exc:  # the test reports it
            failures.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(1.0)  # five lock timeouts: a bounded wait would have failed by now
    still_waiting = writer.is_alive()
    holder.commit()
    holder.close()
    writer.join(30)
    store.close()
    assert failures == [] and still_waiting
    with psycopg.connect(postgres_store_url) as conn:
        assert conn.execute("SELECT text FROM messages WHERE scope = 'user:1'").fetchall() == [("waits its turn",)]

"""``agents-hub migrate``: a SQLite database copied into PostgreSQL, read back through the
store API; a killed copy resumed without duplicates; clear errors for bad URLs."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from scopehub.hub.cli import cli
from scopehub.memory import (
    NewMessage,
    add_task,
    current_facts,
    emit_event,
    events_after,
    get_digest,
    lessons_of,
    list_reminders,
    list_tasks,
    open_store,
    read_channel,
    traits_of,
    unconsumed_events,
)

from .test_conformance import A, B, fill, rows_of


def table_rows(store, scope: str) -> dict[str, int]:
    """Rows per copied table of the scope (each backend's search index is its own)."""
    from scopehub.memory.postgres.copy import COPY_TABLES

    return {table: n for table, n in rows_of(store, scope).items() if table in COPY_TABLES}

pytest.importorskip("psycopg", reason="the PostgreSQL driver is not installed (pip install -e '.[dev]')")


@pytest.fixture
def old_db(tmp_path):
    """A SQLite database with rows in every table group, in two scopes."""
    path = tmp_path / "old.db"
    with open_store(path) as store:
        fill(store, A, "ann")
        fill(store, B, "grp")
        for i in range(30):
            store.append(NewMessage(scope=A, role="user", text=f"chatter {i}", ts=1_700_000_000 + i))
        # The newest event is erased: its id must never be given again (AUTOINCREMENT).
        newest = emit_event(store, A, "tasks", "task.done", {"task_id": 1, "title": "gone"})
        with store.transaction() as conn:
            conn.execute("DELETE FROM events WHERE id = ?", (newest.id,))
    return path, newest.id


def run(*args: str):
    return CliRunner().invoke(cli, ["migrate", *args], catch_exceptions=False)


def test_a_sqlite_database_is_copied_and_reads_back_the_same(old_db, postgres_url):
    path, erased_event = old_db
    result = run("--from", f"sqlite:///{path}", "--to", postgres_url, "--batch", "7")
    assert result.exit_code == 0, result.output
    assert "counts verified" in result.output and "MISMATCH" not in result.output
    with open_store(path) as old, open_store(postgres_url) as new:
        for scope in (A, B):
            assert table_rows(new, scope) == table_rows(old, scope)
            assert new.window(scope, 50) == old.window(scope, 50)  # ids, texts, routes, replies
            assert [f.text for f in current_facts(new, scope)] == [f.text for f in current_facts(old, scope)]
            assert events_after(new, scope, 0) == events_after(old, scope, 0)
            assert lessons_of(new, scope, "general") == lessons_of(old, scope, "general")
            assert traits_of(new, scope, "general") == traits_of(old, scope, "general")
            assert read_channel(new, scope, "team") == read_channel(old, scope, "team")
            assert get_digest(new, scope) == get_digest(old, scope)
            assert list_tasks(new, scope) == list_tasks(old, scope)
            assert list_reminders(new, scope) == list_reminders(old, scope)
            assert new.usage(scope) == old.usage(scope)
        assert unconsumed_events(new, A, "general", interests=["*"]) == []  # the cursor came along
        # New rows continue after the copied ones: no id or number is given twice.
        assert add_task(new, A, "after the move").id == 2
        assert new.append(NewMessage(scope=A, role="user", text="next")).id > max(m.id for m in old.window(A, 100))
        assert emit_event(new, A, "tasks", "task.created", {"task_id": 3, "title": "x"}).id > erased_event


def test_a_killed_copy_resumes_without_duplicates(old_db, postgres_url):
    from scopehub.memory.postgres.copy import copy_store

    path, _ = old_db
    source = f"sqlite:///{path}"
    batches = []

    def killed(table: str, rows: int) -> None:
        batches.append(table)
        if len(batches) == 4:
            raise KeyboardInterrupt  # as if killed between two batches

    with open_store(path) as old, open_store(postgres_url) as new:
        with pytest.raises(KeyboardInterrupt):
            copy_store(old, new, source_name=source, batch_size=5, on_batch=killed)
        before = new.count_messages()
        assert 0 < before < old.count_messages()
        # The re-run starts after the last committed batch: it copies only what is missing.
        report = copy_store(old, new, source_name=source, batch_size=5)
        assert report.copied["messages"] == old.count_messages() - before and report.resumed["messages"] == before
        assert report.copied["scopes"] == 0 and report.ok
    result = run("--from", source, "--to", postgres_url, "--batch", "5")
    assert result.exit_code == 0, result.output
    with open_store(path) as old, open_store(postgres_url) as new:
        assert new.count_messages() == old.count_messages()
        assert table_rows(new, A) == table_rows(old, A) and table_rows(new, B) == table_rows(old, B)


def test_a_target_with_other_data_is_refused(old_db, postgres_url, tmp_path):
    path, _ = old_db
    with open_store(postgres_url) as new:
        new.append(NewMessage(scope=A, role="user", text="already here"))
    result = CliRunner().invoke(cli, ["migrate", "--from", str(path), "--to", postgres_url])
    assert result.exit_code != 0 and "already has data (scopes, messages)" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "old.db", "--to", "sqlite:///new.db"], "--to must be a postgresql:// URL"),
        (["--from", "mysql://x/y", "--to", "postgresql://h/db"], "--from must be a sqlite:/// or postgresql:// URL"),
        (["--from", "missing.db", "--to", "postgresql://h/db"], "--from: no database at missing.db"),
        (["--from", "postgresql://h/db", "--to", "postgres://h/db"], "--from and --to name the same database"),
    ],
)
def test_bad_urls_are_clear_errors(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["migrate", *args])
    assert result.exit_code != 0 and message in result.output
    assert not (tmp_path / "missing.db").exists() and not (tmp_path / "new.db").exists()


def test_every_table_of_the_store_is_copied(postgres_url):
    """A table added to the schema later must be added to the copy too (the search index excepted)."""
    from scopehub.memory.postgres.copy import COPY_TABLES

    with open_store(":memory:") as sqlite:
        tables = {row[0] for row in sqlite.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {t for t in tables if not t.startswith(("search_", "sqlite_"))} == set(COPY_TABLES)
    with open_store(postgres_url) as pg:
        assert all(pg.query("SELECT to_regclass(?) IS NOT NULL", (table,))[0][0] for table in COPY_TABLES)

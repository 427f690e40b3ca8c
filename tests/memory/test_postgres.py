"""What only the PostgreSQL backend has to show: selection by URL, clear errors, safe
concurrent migration, ids that commit in order within a scope (cursors never skip), one
row per transport id across workers, and erasure down to the pages (VACUUM).

The shared behaviour is in test_conformance.py, which runs on both backends.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from scopehub.memory import (
    DuplicateMessage,
    NewMessage,
    StoreError,
    emit_event,
    events_after,
    open_store,
    post_to_channel,
    unseen_channel_messages,
)

pytest.importorskip("psycopg", reason="the PostgreSQL driver is not installed (pip install -e '.[dev]')")

A, B = "user:1", "group:-100"


@pytest.fixture
def pg(postgres_store_url):
    store = open_store(postgres_store_url)
    yield store
    store.close()


# -- selecting the backend ----------------------------------------------------------------


def test_a_postgresql_url_opens_the_postgres_store_and_data_survives_reopening(postgres_url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    alias = postgres_url.replace("postgresql://", "postgres://", 1)
    with open_store(alias) as store:
        assert type(store).__name__ == "PostgresStore"
        store.append(NewMessage(scope=A, role="user", text="kept"))
    with open_store(postgres_url) as again:
        assert [m.text for m in again.window(A, 5)] == ["kept"]
    assert list(tmp_path.iterdir()) == []  # no folder named "postgresql:" with a SQLite file in it


def test_without_the_driver_the_error_names_the_extra_to_install(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for name in [n for n in sys.modules if n == "psycopg" or n.startswith(("psycopg.", "scopehub.memory.postgres"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now fails
    with pytest.raises(StoreError, match=r"pip install 'scopehub\[postgres\]'"):
        open_store("postgresql://hub@db.example/hub")
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_scheme_is_refused_not_taken_for_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="unknown database URL scheme 'mysql'"):
        open_store("mysql://hub@db/hub")
    assert list(tmp_path.iterdir()) == []


def test_an_unreachable_database_is_a_clear_error_without_the_password(postgres_url):
    missing = postgres_url.rsplit("?", 1)
    bad = missing[0].rsplit("/", 1)[0] + "/no_such_db" + ("?" + missing[1] if len(missing) > 1 else "")
    bad = bad.replace("postgres:@", "postgres:s3cret@", 1)
    with pytest.raises(StoreError) as caught:
        open_store(bad)
    assert "cannot use PostgreSQL" in str(caught.value) and "no_such_db" in str(caught.value)
    assert "s3cret" not in str(caught.value)


# -- migrations -----------------------------------------------------------------------------


def test_several_processes_migrating_at_once_all_succeed_and_migrate_once(postgres_url):
    from scopehub.memory.postgres._schema import SCHEMA_VERSION

    def opener(_: int) -> str:
        with open_store(postgres_url) as store:
            return store.query("SELECT version FROM schema_version")[0][0]

    with ThreadPoolExecutor(6) as pool:
        versions = list(pool.map(opener, range(6)))
    assert versions == [SCHEMA_VERSION] * 6
    with open_store(postgres_url) as store:
        assert store.query("SELECT count(*) FROM schema_version")[0][0] == 1


def test_a_newer_database_is_refused(pg, postgres_store_url):
    pg.query("UPDATE schema_version SET version = version + 1 RETURNING version")
    with pytest.raises(StoreError, match="newer than this release"):
        open_store(postgres_store_url)


# -- order within a scope ------------------------------------------------------------------


def _raw_event(store, scope: str, title: str) -> None:
    """An event inserted without the record function (no ensure_scope): only the id trigger orders it."""
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO events(scope, ts, agent, type, payload) VALUES (?, 0, 'tasks', 'task.created', ?)",
            (scope, json.dumps({"task_id": 1, "title": title})),
        )


def _emitted(store, scope: str, title: str) -> None:
    emit_event(store, scope, "tasks", "task.created", {"task_id": 1, "title": title})


@pytest.mark.parametrize("write", [_emitted, _raw_event], ids=["emit_event", "raw_insert"])
def test_an_event_committed_late_is_not_skipped_by_a_reader_that_moved_on(pg, write):
    """Writer 1 draws its id, then holds its transaction open; writer 2 commits meanwhile.

    With ids drawn before commit, the reader would see writer 2's later id, move its
    cursor past writer 1's, and never see writer 1's event. Here writer 2 waits until
    writer 1 commits, so every read is a prefix of the scope's events.
    """
    # The scope exists already (its first row would make everyone wait on the scopes key).
    start = emit_event(pg, A, "tasks", "task.created", {"task_id": 0, "title": "earlier"}).id
    emit_event(pg, B, "tasks", "task.created", {"task_id": 0, "title": "earlier"})
    inserted, release = threading.Event(), threading.Event()

    def slow_writer() -> None:
        with pg.transaction():
            write(pg, A, "slow")
            inserted.set()
            release.wait(10)

    slow = threading.Thread(target=slow_writer)
    slow.start()
    assert inserted.wait(10)
    fast = threading.Thread(target=write, args=(pg, A, "fast"))
    fast.start()
    fast.join(1.0)  # with the order lock it is still waiting for the slow writer; without, it committed
    emit_event(pg, B, "tasks", "task.created", {"task_id": 9, "title": "another scope never waits"})
    first_read = events_after(pg, A, start)
    cursor = first_read[-1].id if first_read else start  # the reader moves on to what it saw
    release.set()
    slow.join(10)
    fast.join(10)
    seen = [e.payload["title"] for e in [*first_read, *events_after(pg, A, cursor)]]
    assert sorted(seen) == ["fast", "slow"]  # each event seen once; none skipped
    assert [e.payload["title"] for e in events_after(pg, A, start)] == ["slow", "fast"]


def test_concurrent_writers_and_a_polling_reader_never_lose_an_event_or_a_channel_message(pg):
    writers, per_writer = 6, 15
    stop = threading.Event()
    seen_events: list[int] = []
    seen_posts: list[int] = []

    def write(n: int) -> None:
        for i in range(per_writer):
            with pg.transaction():
                emit_event(pg, A, "tasks", "task.created", {"task_id": n * 100 + i, "title": f"w{n}"})
                post_to_channel(pg, A, "team", "tasks", f"w{n} {i}")
                pg.query("SELECT pg_sleep(0.002)")  # commit a little after drawing the id

    def read() -> None:
        cursor = post_cursor = 0
        while True:
            done = stop.is_set()  # read once more after the writers finished
            batch = events_after(pg, A, cursor, limit=1000)
            seen_events.extend(e.payload["task_id"] for e in batch)
            cursor = batch[-1].id if batch else cursor
            posts = unseen_channel_messages(pg, A, "reader", ["team"], limit=1000)
            seen_posts.extend(m.id for m in posts)
            if posts:
                post_cursor = posts[-1].id
                from scopehub.memory import advance_channel_cursor

                advance_channel_cursor(pg, A, "reader", post_cursor)
            if done:
                return

    reader = threading.Thread(target=read)
    reader.start()
    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(write, range(writers)))
    stop.set()
    reader.join(30)
    assert sorted(seen_events) == sorted(n * 100 + i for n in range(writers) for i in range(per_writer))
    assert len(seen_posts) == len(set(seen_posts)) == writers * per_writer


def test_a_digest_written_from_a_stale_version_is_refused_while_another_worker_writes(pg):
    """save_digest reads the version, then writes version + 1: one step per scope, so of
    two workers that started from version 1 exactly one writes version 2."""
    from scopehub.memory import DigestLine, get_digest, save_digest

    mid = pg.append(NewMessage(scope=A, role="user", text="we moved to Pune")).id
    line = DigestLine("moved to Pune", (mid,), 1.0)
    save_digest(pg, A, [line], upto_id=mid, covered=1, kind="full", mode="extractive")
    written, release = threading.Event(), threading.Event()
    results: dict[str, object] = {}

    def first_worker() -> None:
        with pg.transaction():
            results["first"] = save_digest(pg, A, [line], upto_id=mid, covered=1, kind="incremental", mode="extractive", expect_version=1)
            written.set()
            release.wait(10)

    def second_worker() -> None:
        results["second"] = save_digest(pg, A, [line], upto_id=mid, covered=1, kind="full_recompact", mode="extractive", expect_version=1)

    first = threading.Thread(target=first_worker)
    first.start()
    assert written.wait(10)
    second = threading.Thread(target=second_worker)
    second.start()
    second.join(1.0)  # it waits for the first worker's commit before reading the version
    release.set()
    first.join(10)
    second.join(10)
    assert results["first"].version == 2 and results["second"] is None
    assert (get_digest(pg, A).version, get_digest(pg, A).kind) == (2, "incremental")


def test_two_workers_storing_the_same_update_store_it_once(postgres_url):
    workers = [open_store(postgres_url) for _ in range(2)]
    barrier = threading.Barrier(2)

    def store_update(store) -> str:
        barrier.wait(5)
        try:
            store.append(NewMessage(scope=A, role="user", text="hi", ext_id="update-77"))
            return "stored"
        except DuplicateMessage:
            return "duplicate"

    with ThreadPoolExecutor(2) as pool:
        outcomes = sorted(pool.map(store_update, workers))
    assert outcomes == ["duplicate", "stored"]
    assert workers[0].count_messages(A) == 1
    for store in workers:
        store.close()


def test_a_nested_transaction_error_undoes_only_the_inner_block(pg):
    from scopehub.memory import add_task, list_tasks

    with pg.transaction():
        add_task(pg, A, "kept")
        with pytest.raises(DuplicateMessage), pg.transaction():
            add_task(pg, A, "undone")
            pg.append(NewMessage(scope=A, role="user", text="x", ext_id="1"))
            pg.append(NewMessage(scope=A, role="user", text="y", ext_id="1"))
    assert [t.title for t in list_tasks(pg, A)] == ["kept"]


# -- erasure --------------------------------------------------------------------------------


def _raw_pages(store, table: str) -> bytes:
    """Every page of ``table`` as stored, dead rows and free space included (pageinspect)."""
    pages = store.query(f"SELECT pg_relation_size('{table}') / current_setting('block_size')::int")[0][0]
    return b"".join(bytes(store.query(f"SELECT get_raw_page('{table}', {n})")[0][0]) for n in range(pages))


def _fill_secrets(store) -> None:
    store.append(NewMessage(scope=B, role="user", text="the group's plans"))
    for i in range(20):
        store.append(NewMessage(scope=A, role="user", text=f"secret-door-code-{i}"))
    store.append(NewMessage(scope=B, role="user", text="more group chatter"))


def _pageinspect(store) -> None:
    try:
        store.query("CREATE EXTENSION IF NOT EXISTS pageinspect")
    except Exception as exc:  # a server where we may not create extensions
        pytest.skip(f"pageinspect is not available: {exc}")


def test_erase_leaves_no_tuple_of_the_scope_on_any_page(pg):
    _pageinspect(pg)
    _fill_secrets(pg)
    removed = pg.erase(A)
    assert removed["messages"] == 20 and pg.count_messages(A) == 0 and pg.count_messages(B) == 2
    # After the VACUUM every line pointer left on the pages is a live row of the other scope.
    items = pg.query(
        "SELECT item.lp_flags, item.t_data IS NOT NULL"
        " FROM generate_series(0, pg_relation_size('messages') / current_setting('block_size')::int - 1) AS n,"
        " heap_page_items(get_raw_page('messages', n::int)) AS item WHERE item.lp_flags <> 0"
    )
    assert items == [(1, True), (1, True)]


def test_erase_with_vacuum_full_leaves_no_byte_of_the_scope_in_the_table(postgres_url):
    with open_store(postgres_url) as plain:
        _pageinspect(plain)
    from scopehub.memory.postgres import PostgresStore

    with PostgresStore(postgres_url, erase_vacuum="full") as store:
        _fill_secrets(store)
        assert _raw_pages(store, "messages").count(b"secret-door-code") == 20
        store.erase(A)
        assert b"secret-door-code" not in _raw_pages(store, "messages")
        assert b"more group chatter" in _raw_pages(store, "messages")


def test_a_bad_erase_vacuum_setting_is_refused_naming_the_variable(postgres_store_url, monkeypatch):
    from scopehub.hub.settings import ConfigError, load_settings

    with pytest.raises(StoreError, match=r"\(HUB_PG_ERASE_VACUUM\) is 'plain' or 'full'"):
        open_store(postgres_store_url, pg_erase_vacuum="sometimes")
    monkeypatch.setenv("HUB_PG_ERASE_VACUUM", "sometimes")
    with pytest.raises(ConfigError, match="HUB_PG_ERASE_VACUUM"):
        load_settings()


def test_forget_from_the_cli_honours_hub_pg_erase_vacuum_full(postgres_store_url, monkeypatch, tmp_path):
    from click.testing import CliRunner

    from scopehub.hub.cli import cli

    monkeypatch.chdir(tmp_path)
    with open_store(postgres_store_url) as store:
        _pageinspect(store)
        _fill_secrets(store)
    monkeypatch.setenv("HUB_PG_ERASE_VACUUM", "full")
    result = CliRunner().invoke(cli, ["--db", postgres_store_url, "forget", "--scope", A, "--yes"])
    assert result.exit_code == 0, result.output
    with open_store(postgres_store_url) as store:
        assert b"secret-door-code" not in _raw_pages(store, "messages")


def test_forget_vacuums_so_no_dead_tuples_remain(pg):
    try:
        pg.query("CREATE EXTENSION IF NOT EXISTS pgstattuple")
    except Exception as exc:
        pytest.skip(f"pgstattuple is not available: {exc}")
    for i in range(50):
        pg.append(NewMessage(scope=A, role="user", text=f"private {i}"))
    emit_event(pg, A, "tasks", "task.created", {"task_id": 1, "title": "private"})
    pg.erase(A)
    for table in ("messages", "events", "scopes"):
        assert pg.query(f"SELECT dead_tuple_count FROM pgstattuple('{table}')")[0][0] == 0, table


@pytest.mark.skipif(os.environ.get("HUB_TEST_POSTGRES_URL") is not None, reason="needs the session's own server")
def test_the_session_server_runs_postgresql_18_with_pg_trgm(pg):
    assert pg.query("SHOW server_version_num")[0][0] >= "180000"
    pg.query("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    assert pg.query("SELECT similarity('plumber', 'plumbr') > 0.3")[0][0] is True


def test_the_password_never_shows_in_the_stores_path_or_repr(postgres_store_url):
    from scopehub.memory.postgres import redact_url

    assert redact_url("postgresql://hub:s3cret@db:5432/hub") == "postgresql://hub:***@db:5432/hub"
    assert redact_url("postgresql://db/hub") == "postgresql://db/hub"
    url = postgres_store_url.replace("postgres:@", "postgres:s3cret@", 1)  # trust auth ignores it
    with open_store(url) as store:
        assert "s3cret" not in store.path and "s3cret" not in repr(store)
        assert store.count_messages() == 0


def test_the_cli_imports_shows_usage_and_forgets_a_scope_on_postgresql(postgres_store_url, tmp_path, monkeypatch):

    from click.testing import CliRunner

    from scopehub.hub.cli import cli

    monkeypatch.chdir(tmp_path)
    log = tmp_path / "log.jsonl"
    log.write_text(
        "\n".join(
            json.dumps({"id": f"m{i}", "scope": scope, "role": "user", "text": f"hello {i}", "ts": 1_700_000_000 + i})
            for i, scope in enumerate([A, A, B])
        ),
        encoding="utf-8",
    )
    runner = CliRunner()
    imported = runner.invoke(cli, ["--db", postgres_store_url, "import", str(log)])
    assert imported.exit_code == 0, imported.output
    usage = runner.invoke(cli, ["--db", postgres_store_url, "usage", "--scope", A, "--json"])
    assert usage.exit_code == 0 and json.loads(usage.output)["messages"] == 2
    forgot = runner.invoke(cli, ["--db", postgres_store_url, "forget", "--scope", A, "--yes", "--json"])
    assert forgot.exit_code == 0, forgot.output
    assert json.loads(forgot.output)["removed"]["messages"] == 2
    with open_store(postgres_store_url) as store:
        assert store.count_messages(A) == 0 and store.count_messages(B) == 1
    assert not any(p.name.startswith("postgres") for p in tmp_path.iterdir())


def test_a_nul_character_is_kept_as_a_replacement_not_refused(pg):
    stored = pg.append(NewMessage(scope=A, role="user", text="door\x00code"))
    assert pg.get(A, stored.id).text == "door\ufffdcode"


@pytest.mark.parametrize(
    ("sql", "named", "expected"),
    [
        ("SELECT * FROM t WHERE a = ? AND b = ?", False, "SELECT * FROM t WHERE a = %s AND b = %s"),
        ("SELECT '?', 'it''s ?', \"odd?col\" FROM t WHERE a = ?", False, "SELECT '?', 'it''s ?', \"odd?col\" FROM t WHERE a = %s"),
        ("SELECT x FROM t WHERE k LIKE 'a%' AND v LIKE ?", False, "SELECT x FROM t WHERE k LIKE 'a%%' AND v LIKE %s"),
        ("SELECT 5 % 2 -- why?\n, ?", False, "SELECT 5 %% 2 -- why?\n, %s"),
        ("SELECT /* ? */ ?", False, "SELECT /* ? */ %s"),
        ("SELECT extra::jsonb, :name, ':quoted'", True, "SELECT extra::jsonb, %(name)s, ':quoted'"),
    ],
)
def test_placeholders_are_converted_outside_literals_only(sql, named, expected):
    from scopehub.memory.postgres._conn import to_pyformat

    assert to_pyformat(sql, named) == expected


def test_the_hub_runs_on_postgresql_tools_events_awareness_and_usage(pg):
    """The whole hub on PostgreSQL: a tool's row and event, the awareness of the next agent,
    the stored reply and the token records (the same flow tests/hub/test_coordination.py runs on SQLite)."""
    import asyncio

    from scopehub.agents import discover_agents
    from scopehub.hub import Deps, Hub, Inbound, load_settings
    from scopehub.hub.context.awareness import AWARENESS_HEADER
    from scopehub.hub.models import ModelResponse, ToolCall
    from scopehub.hub.models.testing import ScriptedModel
    from scopehub.memory import list_vault_items

    email = "From: Ram <ram@example.com>\nSubject: Quarterly report\n\nPlease send it by 2024-05-03."
    model = ScriptedModel(
        [
            ModelResponse(tool_calls=(ToolCall("c1", "keep_email", json.dumps({"text": email})),)),
            "Kept the email from Ram.",
            "No notes.",
            "Still none.",
            "Noted.",
        ]
    )
    hub = Hub(Deps(store=pg, settings=load_settings(), model=model, clock=lambda: 1_714_550_400.0), discover_agents())

    async def talk():
        await hub.handle(Inbound(scope=A, text="/inbox " + email))
        # Two exchanges later the email is out of the last messages every agent sees,
        # so the tasks agent learns of it from its awareness block.
        await hub.handle(Inbound(scope=A, text="/notes what notes do I have?"))
        await hub.handle(Inbound(scope=A, text="/notes and now?"))
        await hub.handle(Inbound(scope=A, text="/tasks what is on my list?"))

    asyncio.run(talk())
    system = "\n".join(m["content"] for m in model.calls[4].messages if m["role"] == "system")
    assert AWARENESS_HEADER in system and "Quarterly report" in system
    assert [item.kind for item in list_vault_items(pg, A)] == ["email"]
    assert [e.type for e in events_after(pg, A, 0)][:1] == ["email.received"]
    assert [m.text for m in pg.window(A, 10) if m.role == "agent"] == ["Kept the email from Ram.", "No notes.", "Still none.", "Noted."]
    assert [c["agent"] for c in pg.calls(A)] == ["inbox", "notes", "notes", "tasks"] and pg.usage(A).agent_calls == 4


def test_a_forgotten_fact_and_an_edited_message_leave_no_dead_version_after_flush_deleted(pg):
    try:
        pg.query("CREATE EXTENSION IF NOT EXISTS pgstattuple")
    except Exception as exc:
        pytest.skip(f"pgstattuple is not available: {exc}")
    from scopehub.memory import NewFact, add_fact, delete_facts

    fact = add_fact(pg, A, NewFact(text="User PIN is 4711", kind="other", key="user.pin"))
    mid = pg.append(NewMessage(scope=A, role="user", text="my PIN is 4711")).id
    delete_facts(pg, A, [fact.id], with_history=True)
    pg.edit_text(A, mid, "my PIN is (removed)")
    assert pg.query("SELECT dead_tuple_count FROM pgstattuple('facts')")[0][0] > 0
    pg.flush_deleted()  # what `facts forget` and an edit's clean-up call
    for table in ("facts", "messages"):
        assert pg.query(f"SELECT dead_tuple_count FROM pgstattuple('{table}')")[0][0] == 0, table


def test_a_duplicate_caught_inside_a_transaction_leaves_the_rest_of_it_to_commit(pg):
    """A nested append refused as a duplicate undoes only itself, also when its INSERT was
    sent with the nested block's RELEASE: what the outer block writes after it commits."""
    from scopehub.memory import add_task, list_tasks

    pg.append(NewMessage(scope=A, role="user", text="first", ext_id="9"))
    with pg.transaction():
        add_task(pg, A, "before")
        with pytest.raises(DuplicateMessage):
            pg.append(NewMessage(scope=A, role="user", text="again", ext_id="9"))
        add_task(pg, A, "after")
    assert [t.title for t in list_tasks(pg, A)] == ["before", "after"]
    assert [m.text for m in pg.window(A, 5)] == ["first"]

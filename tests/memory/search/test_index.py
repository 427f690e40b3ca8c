"""The search index follows every write (messages, vault, erasure, migration, per-scope counts); stemming matches FTS5's."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import sqlite_utils

from scopehub.memory import Store
from scopehub.memory._schema import MIGRATIONS
from scopehub.memory._search import porter_stem
from tests.memory.search.helpers import NOW, add, add_vault, fts_rows, ids, on_both_backends

# -- index sync -------------------------------------------------------------------------------


@on_both_backends
def test_new_messages_are_searchable_at_once(store: Store) -> None:
    assert store.search("user:1", "marathon") == []
    mid = add(store, "user:1", "signed up for the marathon")
    assert ids(store.search("user:1", "marathon")) == [mid]
    # The typo vocabulary picks up words written since it was loaded.
    assert store.search("user:1", "marathn") != []
    other = add(store, "user:1", "bought new running shoes")
    assert ids(store.search("user:1", "runing shoes"))[:1] == [other]


@on_both_backends
def test_imported_messages_are_indexed(store: Store) -> None:
    from scopehub.memory import LogRecord

    records = [
        LogRecord(id=f"m{n}", role="user", text=f"imported note {n} about kayaks", ts=NOW + n)
        for n in range(5)
    ]
    store.import_records(records, default_scope="group:7")
    assert len(store.search("group:7", "kayak", k=10)) == 5


@on_both_backends
def test_edited_message_text_is_reindexed(store: Store) -> None:
    mid = add(store, "user:1", "meet at the library")
    with store.transaction() as conn:
        conn.execute("UPDATE messages SET text = 'meet at the museum' WHERE id = ?", (mid,))
    assert store.search("user:1", "library") == []
    assert ids(store.search("user:1", "museum")) == [mid]
    store.set_route(mid, "notes", (), "explicit")  # a route change does not touch the index
    assert ids(store.search("user:1", "museum")) == [mid]


@on_both_backends
def test_vault_insert_update_delete_follow_in_the_index(store: Store) -> None:
    vid = add_vault(store, "user:1", "Recipe", "grandma's lasagne with ricotta")
    (hit,) = store.search("user:1", "lasagne")
    assert (hit.kind, hit.id, hit.text) == ("vault", vid, "Recipe\ngrandma's lasagne with ricotta")
    assert ids(store.search("user:1", "recipe")) == [vid]  # the title is indexed too
    with store.transaction() as conn:
        conn.execute("UPDATE vault SET body = 'pumpkin soup', updated = ? WHERE id = ?", (NOW, vid))
    assert store.search("user:1", "lasagne") == []
    assert ids(store.search("user:1", "pumpkin")) == [vid]
    with store.transaction() as conn:
        conn.execute("DELETE FROM vault WHERE id = ?", (vid,))
    assert store.search("user:1", "pumpkin") == []
    assert fts_rows(store) == 0


@on_both_backends
def test_deleting_a_message_removes_it_from_the_index(store: Store) -> None:
    mid = add(store, "user:1", "temporary secret note")
    with store.transaction() as conn:
        conn.execute("DELETE FROM messages WHERE id = ?", (mid,))
    assert store.search("user:1", "secret") == []
    assert fts_rows(store) == 0


def test_erase_removes_the_scope_from_the_index_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    with Store(path) as store:
        for n in range(50):
            add(store, "user:1", f"ultrasecretword entry {n}")
        add(store, "user:2", "keep this ultrasecretword neighbour")
        add_vault(store, "user:1", "Diary", "ultrasecretword diary")
        store.erase("user:1")
        assert store.search("user:1", "ultrasecretword") == []
        assert fts_rows(store) == 1  # only user:2's message is left
        assert store.query("SELECT scope FROM search_scopes") == [("user:2",)]
        assert len(store.search("user:2", "ultrasecretword")) == 1
        assert store.integrity_check() == "ok"
        store.conn.execute("INSERT INTO search_fts(search_fts, rank) VALUES ('integrity-check', 1)")
        # The scope comes back empty, and its old words do not.
        fresh = add(store, "user:1", "a brand new start")
        assert store.search("user:1", "ultrasecretword") == []
        assert ids(store.search("user:1", "brand new")) == [fresh]
    assert b"entry 7" not in path.read_bytes()


def test_erase_works_whichever_table_goes_first(store: Store) -> None:
    """The scope's range is dropped even if the scope row is deleted before its messages."""
    add(store, "user:1", "orphan check words")
    add_vault(store, "user:1", "t", "vault words")
    with store.transaction() as conn:
        conn.execute("DELETE FROM scopes WHERE scope = 'user:1'")
        assert fts_rows(store) == 0
        conn.execute("DELETE FROM messages WHERE scope = 'user:1'")
        conn.execute("DELETE FROM vault WHERE scope = 'user:1'")
    assert fts_rows(store) == 0
    store.conn.execute("INSERT INTO search_fts(search_fts, rank) VALUES ('integrity-check', 1)")


def test_existing_database_is_indexed_by_the_migration(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS[0](sqlite_utils.Database(conn))
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO scopes VALUES ('user:1', 'user', 0)")
    conn.execute(
        "INSERT INTO messages(scope, role, text, ts) VALUES ('user:1', 'user', 'legacy walrus fact', 1)"
    )
    conn.execute(
        "INSERT INTO vault(scope, kind, title, body, created, updated) VALUES ('user:1', 'note', '', 'walrus memo', 1, 1)"
    )
    conn.close()
    with Store(path) as store:
        assert {h.kind for h in store.search("user:1", "walrus")} == {"message", "vault"}
        later = add(store, "user:1", "another walrus")
        assert later in ids(store.search("user:1", "walrus"))


def test_each_scopes_document_count_is_backfilled_and_follows_every_write(tmp_path: Path) -> None:
    # BM25's N per scope: counted by the migration for rows written before it, then kept
    # by triggers through inserts, deletes, a move to another scope and erasure.
    path = tmp_path / "old.db"
    db = sqlite_utils.Database(path)
    for step in MIGRATIONS[:-1]:
        step(db)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) - 1}")
    db.execute("INSERT INTO scopes VALUES ('user:1', 'user', 0)")
    for n in range(3):
        db.execute("INSERT INTO messages(scope, role, text, ts) VALUES ('user:1', 'user', ?, 1)", (f"old {n}",))
    db.execute("INSERT INTO vault(scope, kind, title, body, created, updated) VALUES ('user:1', 'note', '', 'memo', 1, 1)")
    db.conn.commit()
    db.close()

    def counts(store: Store) -> dict[str, int]:
        indexed = {
            scope: store.query("SELECT count(*) FROM search_fts WHERE rowid BETWEEN ? * ? AND (? + 1) * ? - 1", (num, 1 << 40, num, 1 << 40))[0][0]
            for num, scope in store.query("SELECT num, scope FROM search_scopes")
        }
        kept = dict(store.query("SELECT scope, docs FROM search_scopes"))
        assert kept == indexed  # the count is what the index holds
        return kept

    with Store(path) as store:
        assert counts(store) == {"user:1": 4}
        first = add(store, "user:2", "new scope, first message")
        add(store, "user:2", "and a second")
        add_vault(store, "user:2", "Note", "a vault note")
        assert counts(store) == {"user:1": 4, "user:2": 3}
        with store.transaction() as conn:
            conn.execute("DELETE FROM messages WHERE id = ?", (first,))
            conn.execute("UPDATE messages SET text = 'edited' WHERE scope = 'user:1'")  # text only: no change
        assert counts(store) == {"user:1": 4, "user:2": 2}
        store.move_scope("user:2", "group:9")
        assert counts(store) == {"user:1": 4, "group:9": 2}
        store.erase("user:1")
        assert counts(store) == {"group:9": 2}


# -- stemming -----------------------------------------------------------------------------------


def test_python_porter_matches_fts5_porter() -> None:
    words = sorted(
        set(
            re.findall(
                r"[a-z]+",
                """generalizations relational conditional rational valenci hesitanci digitizer conformabli
                radicalli differentli vileli analogousli vietnamization predication operator feudalism
                decisiveness hopefulness callousness formaliti sensitiviti sensibiliti triplicate formative
                formalize electriciti electrical hopeful goodness revival allowance inference airliner
                gyroscopic adjustable defensible irritant replacement adjustment dependent adoption homologou
                communism activate angulariti homologous effective bowdlerize probate rate cease controll roll
                caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated troubled
                sized hopping tanned falling hissing fizzed failing filing happy sky restaurants restaurant
                bookings booked running runner happily generously skies dying lying agreement agreements""",
            )
        )
    )
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(w, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    conn.executemany("INSERT INTO t(rowid, w) VALUES (?, ?)", list(enumerate(words)))
    mismatches = [
        (words[doc], term, porter_stem(words[doc]))
        for doc, term in conn.execute("SELECT doc, term FROM v")
        if porter_stem(words[doc]) != term
    ]
    assert mismatches == []

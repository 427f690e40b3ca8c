"""Archive search: ranking behaviour on hand-made corpora, hostile input, isolation, index sync."""

from __future__ import annotations

import importlib.util
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scopehub.memory import (
    Embedder,
    LiteLLMEmbedder,
    NewMessage,
    SearchError,
    SearchHit,
    Store,
    index_embeddings,
    search_archive,
)
from scopehub.memory._schema import MIGRATIONS
from scopehub.memory._search import porter_stem

DAY = 86_400.0
NOW = 1_750_000_000.0
HAS_NUMPY = importlib.util.find_spec("numpy") is not None


def add(
    store: Store,
    scope: str,
    text: str,
    *,
    ts: float | None = None,
    role: str = "user",
    agent: str | None = None,
) -> int:
    return store.append(
        NewMessage(scope=scope, role=role, text=text, ts=NOW if ts is None else ts, agent=agent)
    ).id


def ids(hits: list[SearchHit]) -> list[int]:
    return [hit.id for hit in hits]


def add_vault(store: Store, scope: str, title: str, body: str) -> int:
    with store.transaction() as conn:  # SQL both backends speak
        conn.execute(
            "INSERT INTO scopes(scope, kind, created) VALUES (?, 'user', ?) ON CONFLICT DO NOTHING",
            (scope, NOW),
        )
        return conn.execute(
            "INSERT INTO vault(scope, kind, title, body, created, updated) VALUES (?, 'note', ?, ?, ?, ?)"
            " RETURNING id",
            (scope, title, body, NOW, NOW),
        ).fetchone()[0]


def fts_rows(store: Store) -> int:
    """Documents in the search index (SQLite's FTS table, PostgreSQL's search_docs)."""
    table = "search_fts" if store.dialect.is_sqlite else "search_docs"
    return store.query(f"SELECT count(*) FROM {table}")[0][0]


def open_backend(request: pytest.FixtureRequest, backend: str) -> Store:
    if backend == "postgres":
        from scopehub.memory import open_store

        server = request.getfixturevalue("postgres_server")
        url = server.new_database()
        request.addfinalizer(lambda: server.drop_database(url))
        opened = open_store(url)
        request.addfinalizer(opened.close)
        return opened
    return Store(":memory:")


@pytest.fixture
def store(request: pytest.FixtureRequest) -> Store:
    """SQLite in memory; a fresh PostgreSQL database for tests marked ``on_both_backends``."""
    opened = open_backend(request, getattr(request, "param", "sqlite"))
    with opened:
        yield opened


# The search contract is the same on both backends: these tests run on each.
on_both_backends = pytest.mark.parametrize("store", ["sqlite", "postgres"], indirect=True)


# -- ranking ----------------------------------------------------------------------------------


@on_both_backends
def test_bm25_finds_stemmed_forms_and_ranks_the_best_match_first(store: Store) -> None:
    add(store, "user:1", "We talked about the weather and the garden.")
    booked = add(store, "user:1", "I booked a table at the Italian restaurant for Friday.")
    add(store, "user:1", "Restaurants in town close early on Sundays.")
    hits = store.search("user:1", "restaurant bookings", method="bm25")
    assert hits[0].id == booked  # "bookings" meets "booked" through the Porter stem
    assert {h.text for h in hits} >= {"Restaurants in town close early on Sundays."}


@on_both_backends
def test_hybrid_fuses_lists_so_a_typo_and_a_correct_word_both_count(store: Store) -> None:
    add(store, "user:1", "The restaurant was closed when we arrived.")
    both = add(store, "user:1", "Book the restaurant for Friday evening, please.")
    add(store, "user:1", "Friday is the last day of the project.")
    for _ in range(5):
        add(store, "user:1", "Nothing to see here, just chatting about films.")
    hits = store.search("user:1", "restarant friday", now=NOW)
    assert hits[0].id == both  # the bm25 list has it for "friday", the fuzzy one for "restaurant"


@on_both_backends
def test_coverage_prefers_the_message_that_answers_every_part_of_the_question(store: Store) -> None:
    partial = add(store, "user:1", "Paris Paris Paris")
    full = add(
        store, "user:1", "The flight to Paris leaves Tuesday from gate 12 at the north terminal"
    )
    for text in ("Tuesday meeting moved", "flight delayed again", "we loved the terminal cafe"):
        add(store, "user:1", text)
    query = "Paris flight Tuesday"
    assert store.search("user:1", query, method="hybrid", now=NOW)[0].id == full
    assert partial in ids(store.search("user:1", query, method="hybrid", now=NOW))


@on_both_backends
def test_coverage_puts_a_message_saying_part_of_it_above_turns_that_only_neighbour_one(store: Store) -> None:
    # Turns after a message carry its words as context (at a lower weight): without the
    # coverage term they outrank a message that says some of the words itself.
    chatter = ("weather was nice today", "we watched a film", "lunch with friends", "a long walk in the park")
    partial = add(store, "user:1", "dentist dentist dentist appointment appointment")
    for text in chatter:
        add(store, "user:1", text)
    full = add(store, "user:1", "I booked the dentist appointment for Friday with the new doctor near the station")
    for text in chatter:
        add(store, "user:1", text)
    assert ids(store.search("user:1", "dentist appointment Friday", method="hybrid", now=NOW))[:2] == [full, partial]


@on_both_backends
def test_recency_breaks_ties_towards_newer_messages(store: Store) -> None:
    # Twins with the same neighbours (the turns after each carry it as context).
    old = add(store, "user:1", "dentist appointment on the calendar", ts=NOW - 400 * DAY)
    for n in range(3):
        add(store, "user:1", f"unrelated chatter {n}", ts=NOW - 400 * DAY)
    new = add(store, "user:1", "dentist appointment on the calendar", ts=NOW - 1 * DAY)
    for n in range(3):
        add(store, "user:1", f"unrelated chatter {n}", ts=NOW - 1 * DAY)
    hits = store.search("user:1", "dentist appointment", now=NOW, half_life_days=30)
    assert ids(hits)[:2] == [new, old]
    assert hits[0].score > hits[1].score
    # With a half-life far longer than their age gap, the twins nearly tie.
    slow = store.search("user:1", "dentist appointment", now=NOW, half_life_days=100_000)
    assert abs(slow[0].score - slow[1].score) < hits[0].score - hits[1].score


@on_both_backends
def test_half_life_none_turns_recency_off(store: Store) -> None:
    first = add(store, "user:1", "quarterly report draft", ts=NOW - 500 * DAY)
    for n in range(3):
        add(store, "user:1", f"unrelated chatter {n}", ts=NOW - 500 * DAY)
    second = add(store, "user:1", "quarterly report draft", ts=NOW)
    for n in range(3):
        add(store, "user:1", f"unrelated chatter {n}", ts=NOW)
    hits = store.search("user:1", "quarterly report", now=NOW, half_life_days=None)
    assert {h.id for h in hits[:2]} == {first, second}
    assert hits[0].score == pytest.approx(hits[1].score, rel=0.05)


@on_both_backends
@pytest.mark.parametrize(
    ("typo", "stored"),
    [
        ("restarant", "restaurant"),
        ("tomorow", "tomorrow"),
        ("adress", "address"),
        ("reciept", "receipt"),  # adjacent letters swapped
        ("calender", "calendar"),
    ],
)
def test_typos_find_the_word_meant(store: Store, typo: str, stored: str) -> None:
    target = add(store, "user:1", f"Remember the {stored} we talked about.")
    add(store, "user:1", "Something else entirely about music.")
    assert store.search("user:1", typo, method="bm25") == []
    assert ids(store.search("user:1", typo, method="fuzzy"))[:1] == [target]
    assert ids(store.search("user:1", typo))[:1] == [target]


@on_both_backends
def test_neighbouring_turns_help_find_the_answer(store: Store) -> None:
    add(store, "user:1", "What did you think of the new sushi place?")
    answer = add(store, "user:1", "Loved it, the salmon was amazing.")
    add(store, "user:1", "Let's plan the weekend hike.")
    hits = store.search("user:1", "sushi place opinion", method="bm25")
    assert answer in ids(hits)  # indexed with the question before it, at a lower weight


def test_a_reply_ranks_next_to_the_question_it_answers(store: Store) -> None:
    # SQLite's BM25 only: PostgreSQL's ts_rank (no saturation, another length norm) puts a
    # longer message sharing one query word second here; its LoCoMo hit@10 is about a point lower.
    # The reply shares no word with the query; the question before it holds them all. It
    # must come before longer messages that each share one of the query's words.
    turns = [
        "The weather was lovely today.",
        "Anyway, see you soon.",
        "How was the charity marathon on Sunday?",
        "Exhausting, but I finished in under four hours!",
        "I'm cooking pasta tonight.",
        "My phone battery died again.",
        "Sunday lunch was at my aunt's place and we stayed for hours.",
        "The charity shop down the road had some nice old books.",
        "I might start a marathon training plan someday, who knows.",
        "Did you watch the game?",
        "Work has been busy lately.",
    ]
    found = [add(store, "user:1", text, ts=NOW - 1000 + n) for n, text in enumerate(turns)]
    hits = ids(store.search("user:1", "How long did the charity marathon take on Sunday?", now=NOW))
    assert hits[:2] == [found[2], found[3]]


@on_both_backends
def test_hit_fields_and_snippet(store: Store) -> None:
    long_text = (
        "filler words " * 40
        + "the passport renewal form is in the blue folder "
        + "more filler " * 40
    )
    mid = add(store, "user:1", long_text, agent="notes")
    (hit,) = store.search("user:1", "passport renewal", k=1, now=NOW)
    assert (hit.id, hit.kind, hit.agent, hit.ts, hit.text) == (
        mid,
        "message",
        "notes",
        NOW,
        long_text,
    )
    assert len(hit.snippet) <= 205
    assert "passport renewal" in hit.snippet
    assert hit.score > 0


@on_both_backends
def test_k_limits_and_non_positive_k(store: Store) -> None:
    for n in range(30):
        add(store, "user:1", f"invoice number {n} was paid")
    assert len(store.search("user:1", "invoice", k=7)) == 7
    assert store.search("user:1", "invoice", k=0) == []


@on_both_backends
def test_before_id_searches_only_older_messages_but_always_the_vault(store: Store) -> None:
    first = add(store, "user:1", "alpha project kickoff")
    second = add(store, "user:1", "alpha project review")
    third = add(store, "user:1", "alpha project retro")
    note = add_vault(store, "user:1", "Alpha", "alpha project notes")
    hits = store.search("user:1", "alpha project", before_id=third)
    assert {(h.kind, h.id) for h in hits} == {
        ("message", first),
        ("message", second),
        ("vault", note),
    }
    assert {(h.kind, h.id) for h in store.search("user:1", "alpha", before_id=first)} == {
        ("vault", note)
    }
    assert {h.id for h in store.search("user:1", "alpha", before_id=0)} == {note}


@on_both_backends
def test_stopword_only_query_falls_back_to_its_words(store: Store) -> None:
    mid = add(store, "user:1", "to be or not to be")
    add(store, "user:1", "completely unrelated")
    assert ids(store.search("user:1", "to be"))[:1] == [mid]


@on_both_backends
def test_unknown_method_and_semantic_without_embedder_raise(store: Store) -> None:
    add(store, "user:1", "hello")
    with pytest.raises(SearchError):
        store.search("user:1", "hello", method="telepathy")
    with pytest.raises(SearchError, match="embedder"):
        store.search("user:1", "hello", method="semantic")


def test_search_archive_accepts_store_database_or_connection(store: Store) -> None:
    mid = add(store, "user:1", "kayak rental booked")
    for source in (store, store.db, store.conn):
        assert ids(search_archive(source, "user:1", "kayak")) == [mid]


@on_both_backends
def test_unknown_scope_returns_nothing(store: Store) -> None:
    add(store, "user:1", "hello there")
    assert store.search("user:404", "hello") == []


# -- hostile queries --------------------------------------------------------------------------

HOSTILE = [
    "",
    "   \n\t ",
    '"',
    '""',
    '"unbalanced',
    "(",
    "()",
    "((a) OR (b",
    "AND",
    "OR OR OR",
    "NOT pizza",
    "pizza NOT",
    "NEAR(pizza order, 2)",
    "pizza*",
    "*",
    "^pizza",
    "body:pizza",
    "ctx : pizza",
    "rowid:1",
    "{body ctx}: pizza",
    "pizza + - order",
    "'; DROP TABLE messages; --",
    "🍕🍕🍕",
    "🍕 pizza",
    "寿司を注文した",
    "пицца заказ",
    "طلب بيتزا",
    "pizza\x00order",
    "\\",
    "a_b_c",
    "x" * 10_000,
    "pizza " * 2_000,
    " ".join(f"word{n}" for n in range(3_000)),
]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def hostile_store(request: pytest.FixtureRequest) -> Store:
    with open_backend(request, request.param) as s:
        for text in (
            "I ordered a pizza",
            "пицца была вкусной",
            "寿司を注文した",
            "NEAR the station",
            "a_b_c",
        ):
            s.append(NewMessage(scope="user:1", role="user", text=text, ts=NOW))
        s.append(
            NewMessage(scope="user:2", role="user", text="pizza secret in another scope", ts=NOW)
        )
        yield s


@pytest.mark.parametrize("method", ["hybrid", "bm25", "fuzzy"])
@pytest.mark.parametrize("query", HOSTILE, ids=lambda q: repr(q[:20]))
def test_hostile_queries_never_raise(hostile_store: Store, query: str, method: str) -> None:
    hits = hostile_store.search("user:1", query, method=method)
    assert isinstance(hits, list)
    assert all(isinstance(h, SearchHit) for h in hits)
    own = {row[0] for row in hostile_store.query("SELECT id FROM messages WHERE scope = 'user:1'")}
    assert {h.id for h in hits} <= own


def test_hostile_queries_still_find_their_words(hostile_store: Store) -> None:
    assert hostile_store.search("user:1", "NOT pizza")[0].text == "I ordered a pizza"
    assert hostile_store.search("user:1", "NEAR(pizza order, 2)")[0].text == "I ordered a pizza"
    assert hostile_store.search("user:1", "пицца")[0].text == "пицца была вкусной"
    assert hostile_store.search("user:1", "寿司を注文した")[0].text == "寿司を注文した"
    assert hostile_store.search("user:1", "") == []
    assert hostile_store.search("user:1", "🍕🍕") == []


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(max_size=300), method=st.sampled_from(["hybrid", "bm25", "fuzzy"]))
def test_any_text_is_a_valid_query(hostile_store: Store, query: str, method: str) -> None:
    hits = hostile_store.search("user:1", query, method=method, k=5)
    assert len(hits) <= 5
    assert "secret" not in " ".join(h.text for h in hits)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    words=st.lists(
        st.sampled_from(
            ["pizza", "AND", "OR", "NOT", "NEAR", '"', "(", ")", "*", "^", ":", "-", "+", "{", "}"]
        ),
        max_size=12,
    )
)
def test_fts_operators_in_any_order(hostile_store: Store, words: list[str]) -> None:
    own = {row[0] for row in hostile_store.query("SELECT id FROM messages WHERE scope = 'user:1'")}
    spaced = hostile_store.search("user:1", " ".join(words))
    glued = hostile_store.search("user:1", "".join(words))
    assert {h.id for h in spaced + glued} <= own
    if "pizza" in words:  # operators around a word are words, never syntax that hides it
        assert "I ordered a pizza" in [h.text for h in spaced], words


# -- isolation --------------------------------------------------------------------------------


@on_both_backends
def test_a_term_from_another_scope_never_returns(store: Store) -> None:
    add(store, "user:1", "my own grocery list")
    add(store, "user:2", "zanzibar holiday restaurant")
    add(store, "group:3", "zanzibar team offsite")
    for method in ("hybrid", "bm25", "fuzzy"):
        assert store.search("user:1", "zanzibar", method=method) == []
        assert (
            store.search("user:1", "zanzibr", method=method) == []
        )  # no typo expansion across scopes either
        assert (
            store.search("user:1", "restaurant zanzibar grocery", method=method)[0].text
            == "my own grocery list"
        )
    assert len(store.search("user:2", "zanzibar")) == 1


@on_both_backends
def test_a_scope_stored_after_others_sees_none_of_theirs(store: Store) -> None:
    # Isolation checked on a scope that is neither the first nor the last stored: its index
    # range lies between two others' (a search of the first scope cannot tell).
    first = add(store, "user:1", "zanzibar ferry timetable from the first scope")
    add_vault(store, "user:1", "Zanzibar", "zanzibar visa notes of the first scope")
    mine = add(store, "group:2", "zanzibar ferry timetable of the middle scope")
    add(store, "user:3", "zanzibar ferry timetable of the last scope")
    later = add(store, "group:2", "a later message of the middle scope")
    own = {mine, later}  # the later one matches through its neighbour, the middle scope's own message
    for method in ("hybrid", "bm25", "fuzzy"):
        for before in (None, later, later + 1000):
            hits = store.search("group:2", "zanzibar ferry timetable visa", method=method, before_id=before)
            assert hits and hits[0].id == mine and set(ids(hits)) <= own and {h.kind for h in hits} == {"message"}, (method, before)
    assert first < mine and {(h.kind, h.id) for h in store.search("user:1", "zanzibar ferry visa", method="bm25")} == {("message", first), ("vault", 1)}


@on_both_backends
def test_a_busy_scope_stored_first_never_crowds_out_a_later_scopes_own_results(store: Store) -> None:
    # An earlier scope with many better matches: read from its index range, they would fill
    # the candidates and leave the later scope nothing of its own.
    for n in range(300):
        add(store, "user:1", f"zanzibar zanzibar ferry zanzibar {n}")
    mine = add(store, "group:2", "the zanzibar trip is booked")
    for method in ("hybrid", "bm25", "fuzzy"):
        for before in (None, mine + 1):
            assert ids(store.search("group:2", "zanzibar", k=5, method=method, before_id=before)) == [mine], (method, before)


@on_both_backends
def test_vault_documents_stay_in_their_scope(store: Store) -> None:
    add_vault(store, "user:2", "Passwords", "wifi password is hunter2")
    add(store, "user:1", "what is the wifi password")
    hits = store.search("user:1", "wifi password")
    assert [h.kind for h in hits] == ["message"]


@on_both_backends
def test_no_neighbour_context_leaks_across_scopes(store: Store) -> None:
    add(store, "user:2", "the secret launch code is swordfish")
    add(store, "user:1", "ok")  # inserted right after another scope's message
    assert store.search("user:1", "swordfish launch code") == []


@on_both_backends
def test_another_scopes_words_never_change_this_scopes_order(store: Store) -> None:
    # In user:1 "kayak" is the rare word, so the kayak message ranks first. Another
    # scope full of kayaks must not make "lake" look the rarer word here.
    kayak = add(store, "user:1", "we took the kayak out", ts=NOW - 5)
    for n in range(3):
        add(store, "user:1", f"the lake was calm, day {n}", ts=NOW - 4 + n)
    for n in range(6):
        add(store, "user:1", f"nothing much happened, note {n}", ts=NOW - 10 - n)
    alone = {m: ids(store.search("user:1", "kayak lake", method=m, now=NOW)) for m in ("bm25", "hybrid")}
    assert alone["bm25"][0] == kayak
    for n in range(300):
        add(store, "user:2", f"kayak kayak rental number {n}", ts=NOW - 20)
    for method, order in alone.items():
        assert ids(store.search("user:1", "kayak lake", method=method, now=NOW)) == order, method


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


# -- embeddings -----------------------------------------------------------------------------------


class LetterEmbedder:
    """A tiny deterministic embedder: letter counts (a-z)."""

    name = "letters"

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [[float(t.lower().count(chr(97 + i))) for i in range(26)] for t in texts]


def test_index_embeddings_stores_vectors_and_erase_removes_them(tmp_path: Path) -> None:
    with Store(tmp_path / "e.db") as store:
        mids = [add(store, "user:1", text) for text in ("zzz zebra", "aaa apple", "mmm melon")]
        add(store, "user:2", "other scope")
        embedder = LetterEmbedder()
        assert index_embeddings(store, "user:1", embedder) == 3
        assert index_embeddings(store, "user:1", embedder) == 0  # nothing new
        add(store, "user:1", "kiwi")
        assert index_embeddings(store, "user:1", embedder) == 1
        assert store.query("SELECT count(*) FROM search_vectors")[0][0] == 4
        with store.transaction() as conn:
            conn.execute("DELETE FROM messages WHERE id = ?", (mids[0],))
        assert store.query("SELECT count(*) FROM search_vectors")[0][0] == 3
        store.erase("user:1")
        assert store.query("SELECT count(*) FROM search_vectors")[0][0] == 0


@pytest.mark.skipif(HAS_NUMPY, reason="numpy is installed")
def test_semantic_search_without_numpy_says_so(store: Store) -> None:
    add(store, "user:1", "zebra")
    index_embeddings(store, "user:1", LetterEmbedder())
    with pytest.raises(SearchError, match="numpy"):
        store.search("user:1", "zebra", method="semantic", embedder=LetterEmbedder())


@pytest.mark.skipif(not HAS_NUMPY, reason="numpy is not installed")
def test_semantic_list_joins_the_fusion(store: Store) -> None:
    zebra = add(store, "user:1", "zzzz")
    add(store, "user:1", "aaaa")
    embedder = LetterEmbedder()
    index_embeddings(store, "user:1", embedder)
    assert ids(store.search("user:1", "zz", method="semantic", embedder=embedder))[0] == zebra
    assert zebra in ids(store.search("user:1", "zz", method="hybrid_semantic", embedder=embedder))


def test_without_an_embedder_nothing_semantic_happens(store: Store) -> None:
    mid = add(store, "user:1", "plain words")
    assert ids(store.search("user:1", "plain")) == [mid]
    assert store.query("SELECT count(*) FROM search_vectors")[0][0] == 0


def test_litellm_embedder_calls_litellm_embedding(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    seen: dict[str, Any] = {}

    def embedding(**kwargs: Any) -> Any:
        seen.update(kwargs)
        data = [
            {"index": i, "embedding": [float(len(t)), 1.0]} for i, t in enumerate(kwargs["input"])
        ]
        return types.SimpleNamespace(data=list(reversed(data)))

    monkeypatch.setitem(sys.modules, "litellm", types.SimpleNamespace(embedding=embedding))
    embedder = LiteLLMEmbedder("openai/text-embedding-3-small", api_base="http://127.0.0.1:9")
    assert isinstance(embedder, Embedder)
    assert embedder.embed(["ab", "abcd"]) == [[2.0, 1.0], [4.0, 1.0]]
    assert seen["model"] == "openai/text-embedding-3-small"
    assert seen["api_base"] == "http://127.0.0.1:9"


@on_both_backends
def test_emoji_and_symbols_are_found_by_exact_match(store: Store) -> None:
    party = add(store, "user:1", "we won the match 🎉🎉")
    euro = add(store, "user:1", "the hall costs 300 €")
    add(store, "user:1", "nothing to celebrate here")
    add(store, "user:2", "🎉 in another scope")
    vault = add_vault(store, "user:1", "Party ✨", "bring snacks")
    for method in ("hybrid", "bm25", "fuzzy"):
        assert ids(store.search("user:1", "🎉", method=method)) == [party], method
    assert ids(store.search("user:1", "€")) == [euro]
    assert [(h.kind, h.id) for h in store.search("user:1", "✨")] == [("vault", vault)]
    assert ids(store.search("user:1", "match 🎉"))[0] == party  # words and symbols together
    assert store.search("user:1", "🍕") == []
    assert ids(store.search("user:1", "🎉", before_id=party)) == []


@on_both_backends
def test_chat_commands_are_never_search_results(store: Store) -> None:
    command = add(store, "user:1", "/search milk")
    store.set_route(command, "hub", (), "command")
    message = add(store, "user:1", "buy milk on the way home")
    assert ids(store.search("user:1", "milk")) == [message]
    assert command not in ids(store.search("user:1", "search"))


# -- who said it, and when ---------------------------------------------------------------------------


def add_from(store: Store, scope: str, sender: str, text: str, ts: float) -> int:
    return store.append(NewMessage(scope=scope, role="user", text=text, ts=ts, sender=sender)).id


@on_both_backends
def test_a_question_naming_a_person_finds_what_that_person_said(store: Store) -> None:
    scope = "group:1"
    add_from(store, scope, "Caroline", "Hey Melanie, long time no see! How are you?", NOW - 9 * DAY)
    for n in range(3):
        add_from(store, scope, "Caroline", f"Busy week at work, meeting number {n}.", NOW - 8 * DAY)
    said = add_from(store, scope, "Melanie", "I painted a lake sunrise last weekend.", NOW - 7 * DAY)
    for n in range(3):
        add_from(store, scope, "Caroline", f"Groceries and errands, list {n}.", NOW - 6 * DAY)
    add_from(store, scope, "Caroline", "I painted my bedroom wall blue.", NOW - DAY)
    # "Melanie" is in no text she wrote: she is the sender. The greeting that names
    # her and the newer painting by Caroline each meet only half the question.
    assert ids(store.search(scope, "What did Melanie paint?", k=3, now=NOW))[0] == said


@pytest.mark.parametrize(
    "when",
    ["on 1 February, 2023", "on February 1st, 2023", "on 1st of Feb 2023", "in February 2023"],
)
@on_both_backends
def test_a_question_with_a_date_finds_what_was_written_that_day(store: Store, when: str) -> None:
    feb_1 = 1_675_209_600.0  # 1 February 2023, 00:00 UTC
    scope = "group:1"
    add_from(store, scope, "Gina", "Ordering fabric samples for the store.", feb_1 - 20 * DAY)
    that_day = add_from(store, scope, "Gina", "Found a lovely space for the store today!", feb_1 + 15 * 3600)
    for n in range(6):  # newer and as wordy: recency alone would put these first
        add_from(store, scope, "Gina", f"The store had {n + 3} customers this afternoon.", feb_1 + (40 + n) * DAY)
    hits = store.search(scope, f"What did Gina find for the store {when}?", k=3, now=feb_1 + 50 * DAY)
    assert ids(hits)[0] == that_day


@on_both_backends
def test_a_date_matching_no_message_changes_nothing(store: Store) -> None:
    for n in range(4):
        add(store, "user:1", f"Store note {n}.", ts=NOW + n)
    plain = ids(store.search("user:1", "store", now=NOW))
    assert ids(store.search("user:1", "store on 28 March, 1999", now=NOW)) == plain


@pytest.mark.parametrize("days", [-20, 3, 30])
@on_both_backends
def test_messages_outside_the_dates_window_get_no_lift(store: Store, days: int) -> None:
    feb_1 = 1_675_209_600.0  # 1 February 2023, 00:00 UTC
    scope = "group:1"
    rows = [(feb_1 + 15 * 3600, "Signed the lease for the store today!")]
    rows += [(feb_1 + 16 * 3600 + n, "Busy day, nothing new.") for n in range(4)]
    # Lexically the better answer, but written days away from the date asked.
    rows.append((feb_1 + days * DAY, "Did you find the store lease? Find that lease!"))
    rows += [(feb_1 + 35 * DAY + n, "Quiet evening, nothing new.") for n in range(4)]
    written = {text: add_from(store, scope, "Gina", text, ts) for ts, text in sorted(rows)}
    that_day, other = written[rows[0][1]], written[rows[5][1]]
    question = "What lease did Gina find for the store"
    now = feb_1 + 40 * DAY
    assert ids(store.search(scope, question + "?", now=now))[0] == other
    order = ids(store.search(scope, question + " on 1 February, 2023?", now=now))
    assert order[0] == that_day and other in order

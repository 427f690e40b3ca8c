"""Archive search under hostile queries, and scope isolation: nothing crosses scopes, not even the order."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scopehub.memory import (
    NewMessage,
    SearchHit,
    Store,
)
from tests.memory.search.helpers import NOW, add, add_vault, ids, on_both_backends, open_backend

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

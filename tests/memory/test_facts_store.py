"""Fact rows in the store: current vs history, supersession, scoping, deletion, erasure."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scopehub.memory import (
    FactChange,
    InvalidRecord,
    NewFact,
    NewMessage,
    Store,
    add_fact,
    apply_fact_changes,
    current_facts,
    delete_facts,
    fact_history,
    facts_by_key,
    get_fact,
    invalidate_facts,
)


@pytest.fixture
def store(tmp_path) -> Iterator[Store]:
    with Store(tmp_path / "facts.db") as opened:
        yield opened


def test_added_fact_is_current_with_its_fields(store):
    fact = add_fact(
        store,
        "user:1",
        NewFact("Ram's email is ram@example.com", kind="contact", key="ram.email", confidence="explicit", source_message=7),
        now=100.0,
    )
    assert fact.is_current and fact.id > 0
    assert current_facts(store, "user:1") == [fact]
    assert get_fact(store, "user:1", fact.id) == fact
    assert (fact.kind, fact.key, fact.confidence, fact.source_message, fact.valid_from) == ("contact", "ram.email", "explicit", 7, 100.0)
    assert "user:1" in store.scopes()


def test_update_invalidates_the_old_fact_and_keeps_its_history(store):
    old = add_fact(store, "user:1", NewFact("User's email is old@example.com", key="user.email"), now=1.0)
    [new] = apply_fact_changes(
        store, "user:1", [FactChange(add=NewFact("User's email is new@example.com", key="user.email"), invalidate=(old.id,))], now=2.0
    )
    assert [f.text for f in current_facts(store, "user:1")] == ["User's email is new@example.com"]
    history = fact_history(store, "user:1", "user.email")
    assert [f.id for f in history] == [old.id, new.id]
    assert history[0].invalid_at == 2.0 and history[0].superseded_by == new.id
    assert facts_by_key(store, "user:1", "user.email") == [new]
    assert len(facts_by_key(store, "user:1", "user.email", include_invalid=True)) == 2


def test_scopes_never_see_or_touch_each_others_facts(store):
    mine = add_fact(store, "user:1", NewFact("User is vegetarian", key="user.diet"))
    theirs = add_fact(store, "group:9", NewFact("Our office is in Cyber Hub", key="we.office"))
    assert current_facts(store, "group:9") == [theirs]
    assert get_fact(store, "group:9", mine.id) is None
    assert invalidate_facts(store, "group:9", [mine.id]) == []
    assert delete_facts(store, "group:9", [mine.id]) == []
    assert current_facts(store, "user:1") == [mine]


def test_invalidate_only_touches_current_facts(store):
    fact = add_fact(store, "user:1", NewFact("User is vegetarian", key="user.diet"), now=1.0)
    [gone] = invalidate_facts(store, "user:1", [fact.id], now=5.0)
    assert gone.invalid_at == 5.0
    assert invalidate_facts(store, "user:1", [fact.id], now=9.0) == []  # already invalid: unchanged
    assert get_fact(store, "user:1", fact.id).invalid_at == 5.0
    assert current_facts(store, "user:1") == []
    assert fact_history(store, "user:1") == [gone]


def test_delete_takes_the_older_versions_with_it(store):
    first = add_fact(store, "user:1", NewFact("email a", key="user.email"))
    [second] = apply_fact_changes(store, "user:1", [FactChange(add=NewFact("email b", key="user.email"), invalidate=(first.id,))])
    [third] = apply_fact_changes(store, "user:1", [FactChange(add=NewFact("email c", key="user.email"), invalidate=(second.id,))])
    other = add_fact(store, "user:1", NewFact("User is vegetarian", key="user.diet"))
    deleted = delete_facts(store, "user:1", [third.id])
    assert [f.id for f in deleted] == [first.id, second.id, third.id]
    assert fact_history(store, "user:1") == [other]


def test_nothing_is_written_when_the_source_message_was_erased(store):
    message = store.append(NewMessage(scope="user:1", role="user", text="my email is x@example.com"))
    store.erase("user:1")
    added = apply_fact_changes(
        store, "user:1", [FactChange(add=NewFact("User's email is x@example.com"))], require_message=message.id
    )
    assert added == []
    assert fact_history(store, "user:1") == []


def test_a_failed_batch_leaves_nothing_half_done(store):
    old = add_fact(store, "user:1", NewFact("User is vegetarian", key="user.diet"))
    with pytest.raises(InvalidRecord):
        apply_fact_changes(
            store,
            "user:1",
            [FactChange(invalidate=(old.id,)), FactChange(add=NewFact("bad kind", kind="nonsense"))],
        )
    assert current_facts(store, "user:1") == [old]


@pytest.mark.parametrize(
    "fact",
    [NewFact(""), NewFact("   "), NewFact("x", kind="secret"), NewFact("x", confidence="certain")],
)
def test_invalid_facts_are_refused(store, fact):
    with pytest.raises(InvalidRecord):
        add_fact(store, "user:1", fact)
    assert fact_history(store, "user:1") == []


def test_erase_removes_current_facts_and_history(store):
    old = add_fact(store, "user:1", NewFact("email a", key="user.email"))
    apply_fact_changes(store, "user:1", [FactChange(add=NewFact("email b", key="user.email"), invalidate=(old.id,))])
    kept = add_fact(store, "user:2", NewFact("email z", key="user.email"))
    removed = store.erase("user:1")
    assert removed["facts"] == 2
    assert fact_history(store, "user:1") == []
    assert fact_history(store, "user:2") == [kept]

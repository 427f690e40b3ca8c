"""Archive search ranking on hand-made corpora: BM25, fusion, coverage, recency, typos, neighbours, who said it and when."""

from __future__ import annotations

import pytest

from scopehub.memory import (
    NewMessage,
    SearchError,
    Store,
    search_archive,
)
from tests.memory.search.helpers import DAY, NOW, add, add_vault, ids, on_both_backends

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

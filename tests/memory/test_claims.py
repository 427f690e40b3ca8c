"""Claims: one holder at a time, across processes; they expire only by their TTL."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from pathlib import Path

import pytest

from scopehub.memory import (
    InvalidRecord,
    Store,
    acquire_claim,
    active_claims,
    get_claim,
    release_claim,
    renew_claim,
)

U1, U2 = "user:1", "user:2"
NOTE = "setting a reminder: call mom"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "hub.db") as opened:
        yield opened


def test_a_free_claim_is_taken_and_a_live_one_is_refused_to_others(store):
    claim = acquire_claim(store, U1, "reminder:7", "worker-a", note=NOTE, ttl=30, now=100.0)
    assert claim is not None
    assert (claim.holder, claim.note, claim.acquired, claim.expires) == ("worker-a", NOTE, 100.0, 130.0)
    assert acquire_claim(store, U1, "reminder:7", "worker-b", note="me too", ttl=30, now=129.9) is None
    assert get_claim(store, U1, "reminder:7", now=129.9) == claim
    assert active_claims(store, U1, now=110.0) == [claim]


def test_a_claim_held_past_its_ttl_is_taken_by_another(store):
    acquire_claim(store, U1, "digest", "worker-a", note="compacting the digest", ttl=30, now=100.0)
    taken = acquire_claim(store, U1, "digest", "worker-b", note="compacting the digest", ttl=30, now=130.0)
    assert taken is not None and taken.holder == "worker-b" and taken.acquired == 130.0
    # The old holder lost it: it can neither renew nor release it.
    assert not renew_claim(store, U1, "digest", "worker-a", ttl=30, now=131.0)
    assert not release_claim(store, U1, "digest", "worker-a")
    assert get_claim(store, U1, "digest", now=131.0).holder == "worker-b"


def test_renewal_keeps_the_claim_past_its_first_expiry(store):
    acquire_claim(store, U1, "digest", "worker-a", note="compacting", ttl=30, now=100.0)
    assert renew_claim(store, U1, "digest", "worker-a", ttl=30, now=125.0, note="compacting, half done")
    assert acquire_claim(store, U1, "digest", "worker-b", note="x", ttl=30, now=140.0) is None
    claim = get_claim(store, U1, "digest", now=140.0)
    assert (claim.holder, claim.note, claim.acquired, claim.expires) == ("worker-a", "compacting, half done", 100.0, 155.0)
    assert acquire_claim(store, U1, "digest", "worker-b", note="x", ttl=30, now=155.0) is not None


def test_an_expired_claim_cannot_be_renewed_only_acquired_again(store):
    acquire_claim(store, U1, "digest", "worker-a", note="compacting", ttl=30, now=100.0)
    assert not renew_claim(store, U1, "digest", "worker-a", ttl=30, now=130.0)
    again = acquire_claim(store, U1, "digest", "worker-a", note="compacting", ttl=30, now=131.0)
    assert again is not None and again.acquired == 131.0


def test_acquiring_ones_own_live_claim_renews_it(store):
    acquire_claim(store, U1, "digest", "worker-a", note="first", ttl=30, now=100.0)
    again = acquire_claim(store, U1, "digest", "worker-a", note="second", ttl=30, now=120.0)
    assert (again.note, again.acquired, again.expires) == ("second", 100.0, 150.0)


def test_only_the_ttl_expires_a_claim_no_idle_expiry(store):
    claim = acquire_claim(store, U1, "digest", "worker-a", note="compacting", ttl=3600, now=0.0)
    for now in (1.0, 600.0, 3000.0, 3599.9):  # nothing renewed, nothing touched: still held
        assert active_claims(store, U1, now=now) == [claim]
        assert acquire_claim(store, U1, "digest", "worker-b", note="x", ttl=10, now=now) is None
    assert active_claims(store, U1, now=3600.0) == []


def test_a_non_holder_cannot_release_and_the_holder_can(store):
    acquire_claim(store, U1, "digest", "worker-a", note="compacting", ttl=30, now=100.0)
    assert not release_claim(store, U1, "digest", "worker-b")
    assert get_claim(store, U1, "digest", now=101.0).holder == "worker-a"
    assert release_claim(store, U1, "digest", "worker-a")
    assert get_claim(store, U1, "digest", now=101.0) is None
    assert acquire_claim(store, U1, "digest", "worker-b", note="x", ttl=30, now=101.0) is not None


def test_claims_are_per_scope(store):
    assert acquire_claim(store, U1, "digest", "worker-a", note="x", ttl=30, now=100.0)
    assert acquire_claim(store, U2, "digest", "worker-b", note="y", ttl=30, now=100.0)
    assert [c.holder for c in active_claims(store, U1, now=101.0)] == ["worker-a"]
    assert not release_claim(store, U2, "digest", "worker-a")


@pytest.mark.parametrize("ttl", [0, -5, float("nan"), float("inf")])
def test_a_ttl_must_be_a_positive_number(store, ttl):
    with pytest.raises(InvalidRecord, match="ttl"):
        acquire_claim(store, U1, "digest", "worker-a", note="x", ttl=ttl, now=100.0)


def test_a_claim_needs_a_key_and_a_holder(store):
    with pytest.raises(InvalidRecord):
        acquire_claim(store, U1, " ", "worker-a", note="x", ttl=30)
    with pytest.raises(InvalidRecord):
        acquire_claim(store, U1, "digest", "", note="x", ttl=30)


def test_erasure_removes_the_scopes_claims_down_to_the_file(tmp_path):
    db = tmp_path / "hub.db"
    with Store(db) as store:
        acquire_claim(store, U1, "digest", "worker-a", note="compacting ZEBRAFISH7731", ttl=60)
        acquire_claim(store, U2, "digest", "worker-a", note="compacting PANGOLIN5150", ttl=60)
        assert store.erase(U1)["claims"] == 1
        assert active_claims(store, U1) == [] and len(active_claims(store, U2)) == 1
    raw = b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists())
    assert b"ZEBRAFISH7731" not in raw and b"PANGOLIN5150" in raw


# -- two processes ------------------------------------------------------------------------------

ROUNDS = 200


def _race(db: str, holder: str, barrier, results) -> None:
    """One racer: each round, wait for the other, then try to take the claim of that round.

    Round i happens at time 10 i with a TTL of 5: the previous round's claim has expired,
    so every round both racers find the key takeable and only the upsert decides.
    """
    store = Store(db)
    wins = []
    for i in range(ROUNDS):
        barrier.wait(timeout=60)
        claim = acquire_claim(store, U1, "digest", holder, note=f"round {i}", ttl=5, now=i * 10.0)
        wins.append(claim is not None)
    store.close()
    results.put((holder, wins))


def test_two_processes_racing_for_a_claim_get_exactly_one_holder_each_round(tmp_path):
    db = str(tmp_path / "hub.db")
    Store(db).close()  # schema in place before the race
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    racers = [context.Process(target=_race, args=(db, name, barrier, results)) for name in ("proc-a", "proc-b")]
    for racer in racers:
        racer.start()
    outcome = dict(results.get(timeout=120) for _ in racers)
    for racer in racers:
        racer.join(timeout=30)
        assert racer.exitcode == 0
    winners = [[name for name, wins in outcome.items() if wins[i]] for i in range(ROUNDS)]
    assert all(len(names) == 1 for names in winners), [i for i, names in enumerate(winners) if len(names) != 1][:10]
    # The stored holder is the last round's winner.
    with Store(db) as store:
        assert get_claim(store, U1, "digest", now=(ROUNDS - 1) * 10.0).holder == winners[-1][0]

"""Claims name their process: a dead worker's claim on this machine is free at once, a live one never.

Run on every backend (tests/memory/backends.py): the takeover is a compare-and-set in
SQL, the liveness check is the operating system's.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time

import pytest

from scopehub.memory import (
    ClaimLease,
    acquire_claim,
    active_claims,
    drop_expired_claim,
    expired_claims,
    get_claim,
    holder_gone,
    live_claims,
    parse_holder,
    process_holder,
    renew_claim,
)
from scopehub.memory._holders import this_machine
from tests.memory.backends import BACKENDS

pytestmark = pytest.mark.skipif(this_machine() is None, reason="no /proc here: holders cannot be checked, the TTL alone decides")

U1 = "user:1"
HOUR = 3600.0


@pytest.fixture(params=sorted(BACKENDS))
def store(request, tmp_path):
    opened = BACKENDS[request.param](request, tmp_path)
    yield opened
    opened.close()


def child_holder(*, stay: bool) -> tuple[subprocess.Popen, str]:
    """A real other process that makes its holder name, prints it, then waits (``stay``) or exits."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from scopehub.memory import process_holder
        print(process_holder(), flush=True)
        if {stay!r}:
            sys.stdin.read()  # alive until the test closes our stdin
        """
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    holder = child.stdout.readline().strip()
    assert parse_holder(holder) is not None and parse_holder(holder).pid == child.pid
    return child, holder


def test_a_holder_names_this_process_and_is_not_gone_while_it_runs():
    holder = process_holder()
    identity = parse_holder(holder)
    assert identity.pid == os.getpid() and (identity.boot, identity.pidns) == this_machine()
    assert process_holder() != holder  # one process, several workers: distinct holders
    assert not holder_gone(holder)


def test_a_dead_processs_claim_is_taken_at_once_long_before_its_ttl(store):
    child, dead = child_holder(stay=False)
    assert child.wait(timeout=30) == 0
    assert holder_gone(dead)
    now = time.time()
    assert acquire_claim(store, U1, "turn", dead, note="hub: answering", ttl=HOUR, now=now) is not None
    # Not live any more: nobody is shown it as work in flight, and recovery lists it.
    assert get_claim(store, U1, "turn", now=now + 1) is None and active_claims(store, U1, now=now + 1) == []
    assert [c.holder for c in expired_claims(store, prefix="turn", now=now + 1)] == [dead]
    mine = process_holder()
    taken = acquire_claim(store, U1, "turn", mine, note="hub: answering", ttl=60, now=now + 1)
    assert taken is not None and (taken.holder, taken.acquired, taken.expires) == (mine, now + 1, now + 61)
    assert get_claim(store, U1, "turn", now=now + 2).holder == mine
    assert expired_claims(store, prefix="turn", now=now + 2) == []


def test_a_live_processs_claim_is_never_taken(store):
    child, alive = child_holder(stay=True)
    try:
        now = time.time()
        claim = acquire_claim(store, U1, "turn", alive, note="hub: answering", ttl=HOUR, now=now)
        assert not holder_gone(alive)
        assert acquire_claim(store, U1, "turn", process_holder(), note="me too", ttl=60, now=now + 5) is None
        assert get_claim(store, U1, "turn", now=now + 5) == claim
        assert expired_claims(store, now=now + 5) == [] and not drop_expired_claim(store, U1, "turn", now=now + 5)
    finally:
        child.communicate("")
    assert holder_gone(alive)  # and once it has stopped, it is gone


def test_a_reused_pid_is_a_different_process(store):
    identity = parse_holder(process_holder())
    # This very pid, but a process that started at another moment: the pid was reused.
    earlier = f"{identity.host}:{identity.pid}:old@{identity.boot}/{identity.pidns}/{identity.start - 1}"
    assert holder_gone(earlier)
    now = time.time()
    acquire_claim(store, U1, "digest", earlier, note="compacting", ttl=HOUR, now=now)
    assert drop_expired_claim(store, U1, "digest", now=now)  # left by its holder: may be dropped
    assert get_claim(store, U1, "digest", now=now) is None


def test_holders_of_another_machine_or_without_an_identity_expire_by_their_ttl_only(store):
    child, dead = child_holder(stay=False)
    child.wait(timeout=30)
    identity = parse_holder(dead)
    elsewhere = [
        dead.replace(identity.boot, "0" * 8 + identity.boot[8:]),  # another boot: another machine (or a reboot)
        dead.replace(f"/{identity.pidns}/", "/1/"),  # another pid namespace: another container
        "worker-a",  # a plain name (tests, an older release, the queue's marks)
        f"{identity.host}:{identity.pid}:x",  # an older release's host:pid:instance
    ]
    now = time.time()
    for number, holder in enumerate(elsewhere):
        assert not holder_gone(holder), holder
        acquire_claim(store, U1, f"key:{number}", holder, note="work", ttl=60, now=now)
        assert acquire_claim(store, U1, f"key:{number}", process_holder(), note="x", ttl=60, now=now + 59) is None
        assert acquire_claim(store, U1, f"key:{number}", process_holder(), note="x", ttl=60, now=now + 60) is not None


def test_of_two_workers_taking_a_dead_claim_over_at_once_one_gets_it(store):
    child, dead = child_holder(stay=False)
    child.wait(timeout=30)
    now = time.time()
    acquire_claim(store, U1, "turn", dead, note="hub: answering", ttl=HOUR, now=now)
    first, second = process_holder(), process_holder()
    winners = [acquire_claim(store, U1, "turn", who, note="x", ttl=60, now=now + 1) for who in (first, second)]
    assert [w.holder if w else None for w in winners] == [first, None]


def test_live_claims_list_every_scope_or_one(store):
    now = time.time()
    acquire_claim(store, "user:1", "message:4", "worker-a", note="tasks: answering 'buy milk'", ttl=60, now=now)
    acquire_claim(store, "group:-5", "digest", "worker-b", note="hub: compacting the digest", ttl=60, now=now + 1)
    acquire_claim(store, "user:1", "old", "worker-c", note="ran out", ttl=1, now=now - 10)
    assert [(c.scope, c.key) for c in live_claims(store, now=now + 2)] == [("user:1", "message:4"), ("group:-5", "digest")]
    assert [c.key for c in live_claims(store, scope="group:-5", now=now + 2)] == ["digest"]


def test_renewal_never_shortens_a_claim(store):
    acquire_claim(store, U1, "reflect", "worker-a", note="reflecting", ttl=900, now=1000.0)
    assert renew_claim(store, U1, "reflect", "worker-a", ttl=30, now=1010.0)
    assert get_claim(store, U1, "reflect", now=1010.0).expires == 1900.0


def test_a_lease_renews_its_claim_while_the_work_runs_and_releases_it(store):
    clock = [1000.0]

    async def work() -> tuple[int, bool]:
        async with ClaimLease(store, U1, "reflect", "worker-a", note="reflecting", ttl=3.0, clock=lambda: clock[0], every=0.02) as lease:
            assert lease.held
            for _ in range(20):  # the work outlasts its TTL several times over (by the claim's clock)
                clock[0] += 1.0
                await asyncio.sleep(0.03)
                # Another worker finds it held all along.
                assert acquire_claim(store, U1, "reflect", "worker-b", note="x", ttl=3.0, now=clock[0]) is None
            return lease.renewals, lease.held

    renewals, held = asyncio.run(work())
    assert renewals >= 10 and held
    assert get_claim(store, U1, "reflect", now=clock[0]) is None  # released at the end


def test_a_lease_whose_claim_was_taken_says_so(store):
    clock = [1000.0]

    async def work() -> ClaimLease:
        async with ClaimLease(store, U1, "reflect", "worker-a", note="reflecting", ttl=3.0, clock=lambda: clock[0], every=0.05) as lease:
            clock[0] += 10.0  # the loop was blocked past the TTL: another worker takes the claim
            assert acquire_claim(store, U1, "reflect", "worker-b", note="mine now", ttl=60.0, now=clock[0]) is not None
            for _ in range(40):
                if lease.lost:
                    break
                await asyncio.sleep(0.02)
            return lease

    lease = asyncio.run(work())
    assert lease.lost and not lease.held
    with pytest.raises(Exception, match="taken by another worker"):
        lease.still_held()
    assert get_claim(store, U1, "reflect", now=clock[0]).holder == "worker-b"  # never released by the loser


def test_a_restarted_worker_works_its_dead_predecessors_chat_at_once(tmp_path):
    """The 128 s silence: a worker SIGKILLed mid-answer left its turn and live marks; the one
    started after it on this machine works them at its first sweep, not a TTL later."""
    from scopehub.hub.turns import TURN_KEY, Owed, ScopeTurns
    from scopehub.memory import NewMessage, Store

    child, dead = child_holder(stay=False)
    child.wait(timeout=30)
    now = time.time()
    with Store(tmp_path / "hub.db") as store:
        ids = [store.append(NewMessage(scope=U1, role="user", text=f"m{i}", ts=now, ext_id=f"m{i}")).id for i in range(2)]
        before = ScopeTurns(store, dead, lambda scope, item: asyncio.sleep(0), ttl=HOUR, clock=lambda: now)
        for message_id in ids:
            before.owe(U1, message_id, "m")  # marks renewed until the kill: live for an hour
        acquire_claim(store, U1, TURN_KEY, dead, note="hub: answering this chat's messages in order", ttl=HOUR, now=now)
        worked: list[int] = []

        async def work(scope: str, item: Owed) -> None:
            worked.append(item.message_id)

        restarted = ScopeTurns(store, process_holder(), work, ttl=HOUR, clock=lambda: now + 1)
        assert asyncio.run(restarted.sweep()) == 2
        assert worked == ids and restarted.owed(U1) == [] and get_claim(store, U1, TURN_KEY, now=now + 1) is None

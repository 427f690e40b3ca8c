"""Scope turns in one process, with a clock we move: order, one holder, the recheck, the sweep."""

from __future__ import annotations

import asyncio
import threading
import time

from scopehub.hub.turns import LOOP_STALL_TTLS, TURN_KEY, Owed, ScopeTurns, is_bookkeeping
from scopehub.memory import NewMessage, Store, acquire_claim, get_claim

SCOPE = "user:7"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def stored(store: Store, n: int) -> list[int]:
    return [store.append(NewMessage(scope=SCOPE, role="user", text=f"m{i}", ts=1.0, ext_id=f"7:{i}")).id for i in range(n)]


def test_the_turn_holder_works_every_owed_message_in_order_including_those_marked_meanwhile(tmp_path):
    clock = Clock()
    with Store(tmp_path / "hub.db") as store:
        ids = stored(store, 4)
        worked: list[int] = []
        other = ScopeTurns(store, "worker-b", lambda scope, item: asyncio.sleep(0), ttl=10, clock=clock)

        async def work(scope: str, item: Owed) -> None:
            worked.append(item.message_id)
            if item.message_id == ids[1]:
                # Another worker marks a message while we hold the turn: it cannot take the turn...
                other.owe(SCOPE, ids[3], "m3")
                assert await other.run(SCOPE) == 0
            await asyncio.sleep(0)

        turns = ScopeTurns(store, "worker-a", work, ttl=10, clock=clock)
        for message_id in ids[2::-1]:  # marked newest first: worked in message order
            turns.owe(SCOPE, message_id, "m")
            clock.now += 0.5
        assert asyncio.run(turns.run(SCOPE)) == 4
        assert worked == ids  # ...and we answer it before we stop
        assert turns.owed(SCOPE) == [] and get_claim(store, SCOPE, TURN_KEY, now=clock.now) is None


def test_a_message_marked_after_the_holders_last_look_is_answered_by_the_holder(tmp_path):
    clock = Clock()
    with Store(tmp_path / "hub.db") as store:
        first, late = stored(store, 2)
        worked: list[int] = []
        marked: list[int] = []
        other = ScopeTurns(store, "worker-b", lambda scope, item: asyncio.sleep(0), ttl=10, clock=clock)

        class Holder(ScopeTurns):
            async def _drain(self, scope: str) -> tuple[int, bool]:
                result = await super()._drain(scope)
                if late not in marked:
                    # The window: our last look found nothing, the turn is not released yet.
                    marked.append(late)
                    other.owe(SCOPE, late, "late")
                    assert await other.run(SCOPE) == 0  # the turn is ours: the other worker returns
                return result

        async def work(scope: str, item: Owed) -> None:
            worked.append(item.message_id)

        holder = Holder(store, "worker-a", work, ttl=10, clock=clock)
        holder.owe(SCOPE, first, "first")
        asyncio.run(holder.run(SCOPE))
        assert worked == [first, late]  # looked again after releasing the turn


def test_a_message_this_process_marks_just_after_the_holders_last_look_is_answered(tmp_path, monkeypatch):
    """Another chat task of this process marks a message and asks for the turn right after
    the holder's last look found the queue empty. The holder has stopped working the scope
    by then, so that task is not turned away: it takes the turn and answers it."""
    from scopehub.hub import dbwork

    monkeypatch.setattr(dbwork, "offloads", lambda store: True)  # the store steps in threads, as on PostgreSQL
    clock = Clock()
    with Store(tmp_path / "hub.db") as store:
        first, late = stored(store, 2)
        worked: list[int] = []
        tasks: list[asyncio.Task[int] | None] = []

        async def work(scope: str, item: Owed) -> None:
            worked.append(item.message_id)

        holder = ScopeTurns(store, "worker-a", work, ttl=10, clock=clock)
        look = holder.owed

        def last_look(scope: str) -> list[Owed]:
            seen = look(scope)
            if not tasks:
                holder.owe(SCOPE, late, "late")  # stored and marked by another chat task, which asks for the turn
                tasks.append(None)
                loop.call_soon_threadsafe(lambda: tasks.__setitem__(0, loop.create_task(holder.run(SCOPE))))
            return seen

        holder.owed = last_look  # type: ignore[method-assign]

        async def main() -> int:
            holder.owe(SCOPE, first, "first")
            done = await holder.run(SCOPE)
            await asyncio.sleep(0)  # the other task is made by now
            return done + sum(await asyncio.gather(*tasks))

        loop = asyncio.new_event_loop()
        try:
            assert loop.run_until_complete(main()) == 2
        finally:
            loop.close()
        assert worked == [first, late] and look(SCOPE) == []


def test_a_dead_holders_marks_run_out_and_the_sweep_works_them(tmp_path):
    clock = Clock()
    with Store(tmp_path / "hub.db") as store:
        ids = stored(store, 2)
        dead = ScopeTurns(store, "worker-dead", lambda scope, item: asyncio.sleep(0), ttl=10, clock=clock)
        for message_id in ids:
            dead.owe(SCOPE, message_id, "m")
        from scopehub.memory import acquire_claim

        acquire_claim(store, SCOPE, TURN_KEY, "worker-dead", note="answering", ttl=10, now=clock.now)  # then killed
        worked: list[int] = []

        async def work(scope: str, item: Owed) -> None:
            worked.append(item.message_id)

        alive = ScopeTurns(store, "worker-alive", work, ttl=10, clock=clock)
        assert asyncio.run(alive.run(SCOPE)) == 0 and asyncio.run(alive.sweep()) == 0  # still held, still live
        clock.now += 10.5
        assert asyncio.run(alive.sweep()) == 2
        assert worked == ids and alive.owed(SCOPE) == []


def test_a_tag_only_mark_and_bookkeeping_keys():
    assert Owed.parse(Owed(5, answer=False).key) == Owed(5, answer=False)
    assert Owed.parse("owed:12") == Owed(12) and Owed.parse("owed:x") is None and Owed.parse("message:3") is None
    assert is_bookkeeping("turn") and is_bookkeeping("owed:3") and is_bookkeeping("forget-all:confirm")
    assert not is_bookkeeping("message:3") and not is_bookkeeping("turnip")


def test_marks_that_ran_out_while_waiting_are_still_worked_first(tmp_path):
    clock = Clock()
    with Store(tmp_path / "hub.db") as store:
        ids = stored(store, 3)
        worked: list[int] = []

        async def work(scope: str, item: Owed) -> None:
            worked.append(item.message_id)

        turns = ScopeTurns(store, "worker-a", work, ttl=10, clock=clock)
        turns.owe(SCOPE, ids[0], "m0")
        turns.owe(SCOPE, ids[1], "m1")
        clock.now += 30  # they waited longer than a TTL for a free slot
        turns.owe(SCOPE, ids[2], "m2")
        asyncio.run(turns.run(SCOPE))
        assert worked == ids


def test_the_sweep_works_a_dead_workers_chats_side_by_side(tmp_path):
    # A dead worker leaves several chats owed; one slow answer must not hold up the others'
    # recovery. Each chat's answer here needs the other's to have begun.
    clock = Clock()
    scopes = ("user:1", "user:2")
    with Store(tmp_path / "hub.db") as store:
        dead = ScopeTurns(store, "worker-dead", lambda scope, item: asyncio.sleep(0), ttl=10, clock=clock)
        for scope in scopes:
            message = store.append(NewMessage(scope=scope, role="user", text="where is my order", ts=1.0, ext_id=f"{scope}:1"))
            dead.owe(scope, message.id, message.text)
        clock.now += 11  # the dead worker's marks ran out
        answered: list[str] = []

        async def sweep() -> int:
            begun = {scope: asyncio.Event() for scope in scopes}

            async def work(scope: str, item: Owed) -> None:
                begun[scope].set()
                other = next(s for s in scopes if s != scope)
                await asyncio.wait_for(begun[other].wait(), 3)
                answered.append(scope)

            return await ScopeTurns(store, "worker-alive", work, ttl=10, clock=clock).sweep()

        assert asyncio.run(sweep()) == 2
        assert sorted(answered) == list(scopes)


def another_worker_tries_the_turn(tmp_path, *, ttl: float, after: float, loop_blocked: float) -> bool:
    """Worker A answers one message with its event loop blocked for ``loop_blocked`` seconds
    (and then until worker B has tried); B tries to take the turn ``after`` seconds in.
    Whether B got it."""
    with Store(tmp_path / "hub.db") as store:
        (message,) = stored(store, 1)
        taken: list[bool] = []

        def other_worker() -> None:
            time.sleep(after)
            taken.append(acquire_claim(store, SCOPE, TURN_KEY, "worker-b", note="the other worker", ttl=ttl) is not None)

        async def work(scope: str, item: Owed) -> None:
            other = threading.Thread(target=other_worker)
            other.start()
            time.sleep(loop_blocked)  # blocking on purpose: nothing else on this loop runs meanwhile
            other.join()

        turns = ScopeTurns(store, "worker-a", work, ttl=ttl)
        turns.owe(SCOPE, message, "m0")
        assert asyncio.run(turns.run(SCOPE)) == 1
        (got,) = taken
        return got


def test_a_worker_whose_event_loop_is_busy_keeps_its_turn(tmp_path):
    # One answer keeps the worker's event loop busy for longer than the TTL (other chats'
    # work, blocking database calls): its turn is renewed from a thread, so no other worker
    # takes the chat over and sends the reply it is still sending.
    assert not another_worker_tries_the_turn(tmp_path, ttl=1.5, after=2.5, loop_blocked=4.0)  # well past the TTL


def test_a_worker_whose_event_loop_is_stuck_lets_its_turn_run_out(tmp_path):
    # Busy is not stuck: a loop that runs nothing for LOOP_STALL_TTLS TTLs (a call hung for
    # good) stops renewing, and another worker takes the chat over as from a dead one.
    ttl = 0.5
    assert another_worker_tries_the_turn(tmp_path, ttl=ttl, after=LOOP_STALL_TTLS * ttl + 1.5, loop_blocked=0.0)


def test_what_the_work_reads_for_a_message_is_read_in_the_step_that_found_it(tmp_path, monkeypatch):
    """A transport's read for an owed message (the message, its stored reply) comes with the
    look that found it, in the database threads: each message's work gets its own item's
    read, fresh; a failed read is the work's to raise."""
    from tests.helpers import StoreThreads

    clock = Clock()
    with Store(tmp_path / "hub.db") as store:
        ids = stored(store, 3)
        got: list[tuple[int, str]] = []
        read_on: set[int] = set()

        def read(scope: str, item: Owed) -> str:
            read_on.add(threading.get_ident())
            if item.message_id == ids[2]:
                raise RuntimeError("the read failed")
            return store.get(scope, item.message_id).text

        async def work(scope: str, item: Owed) -> None:
            state = turns.read_ahead(scope, item)
            assert turns.read_ahead(scope, item) is None  # taken once
            if isinstance(state, Exception):
                raise state
            got.append((item.message_id, state))
            if item.message_id == ids[0]:
                store.edit_text(SCOPE, ids[1], "m1 edited")  # read after this: fresh

        turns = ScopeTurns(store, "worker-a", work, ttl=10, clock=clock, read=read)
        for message_id in ids:
            turns.owe(SCOPE, message_id, "m")
        threads = StoreThreads(store, monkeypatch)
        asyncio.run(threads.watch(turns.run(SCOPE)))
        assert got == [(ids[0], "m0"), (ids[1], "m1 edited")]
        assert read_on and threads.loop_thread not in read_on
        assert turns.owed(SCOPE) == []  # the failed one raised in its work: dropped, as a failing work is
        assert threads.steps[:1] == ["_take_turn_and_look"] and threads.steps.count("_clear_and_look") == 3, threads.steps

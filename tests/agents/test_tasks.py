"""The tasks agent's tools against a real store on a fixed clock."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from scopehub import memory
from scopehub.agents.tasks import add_task, complete_task, edit_task, list_tasks
from scopehub.hub.runtime import run_tool
from tests.agents.helpers import NOW, call, make_ctx


def test_add_list_complete_edit(store: memory.Store) -> None:
    ctx = make_ctx(store)
    assert call(add_task, ctx, title="Buy milk", due="friday") == "Added #1 Buy milk (due Fri 2024-05-03)"
    assert call(add_task, ctx, title="Call the plumber").startswith("Added #2 Call the plumber")
    assert call(add_task, ctx, title="Renew passport", due="2024-04-20").endswith("(due Sat 2024-04-20, overdue)")

    listed = call(list_tasks, ctx)
    assert listed.splitlines() == [
        "Today is Wed 2024-05-01.",
        "#3 Renew passport (due Sat 2024-04-20, overdue)",
        "#1 Buy milk (due Fri 2024-05-03)",
        "#2 Call the plumber",
    ]

    assert call(complete_task, ctx, id=1).startswith("Done: #1 Buy milk")
    assert "Buy milk" not in call(list_tasks, ctx)
    assert "#1 Buy milk (due Fri 2024-05-03) [done]" in call(list_tasks, ctx, done=True)
    done = memory.get_task(store, "user:1", 1)
    assert done is not None and done.done and done.completed == NOW

    assert call(edit_task, ctx, id=2, title="Call the electrician", due="in 3 days") == (
        "Updated #2 Call the electrician (due Sat 2024-05-04)"
    )
    assert call(edit_task, ctx, id=2, due="none") == "Updated #2 Call the electrician"
    assert memory.get_task(store, "user:1", 2).due is None


def test_due_words_use_the_persons_time_zone(store: memory.Store) -> None:
    # 23:30 UTC on Wednesday is already 01:30 on Thursday in Berlin.
    late = datetime(2024, 5, 1, 23, 30, tzinfo=UTC).timestamp()
    berlin = make_ctx(store, now=late, tz="Europe/Berlin")
    utc = make_ctx(store, now=late, tz="UTC")
    assert call(add_task, berlin, title="a", due="tomorrow").endswith("(due Fri 2024-05-03)")
    assert call(add_task, utc, title="b", due="tomorrow").endswith("(due Thu 2024-05-02)")


def test_unreadable_due_date_becomes_a_hint_for_the_model(store: memory.Store) -> None:
    ctx = make_ctx(store)
    text, ok = asyncio.run(run_tool({"add_task": add_task}, "add_task", '{"title": "x", "due": "whenever"}', ctx))
    assert not ok
    assert "cannot read due date 'whenever'" in text and "YYYY-MM-DD" in text
    assert memory.list_tasks(store, "user:1") == []  # nothing half-stored


def test_unknown_task_ids_say_so(store: memory.Store) -> None:
    ctx = make_ctx(store)
    assert call(complete_task, ctx, id=42) == "No task #42; call list_tasks to see the ids."
    assert call(edit_task, ctx, id=42, title="x") == "No task #42; call list_tasks to see the ids."
    assert call(list_tasks, ctx) == "Today is Wed 2024-05-01. No tasks."


def test_numbers_count_per_scope_and_are_never_reused(store: memory.Store) -> None:
    alice, bob = make_ctx(store, scope="user:1"), make_ctx(store, scope="group:-5")
    assert call(add_task, alice, title="buy milk") == "Added #1 buy milk"
    assert call(add_task, alice, title="call mum") == "Added #2 call mum"
    assert call(add_task, bob, title="book the hall") == "Added #1 book the hall"  # a new chat starts at #1
    with store.transaction() as conn:  # a deleted task's number is not given again
        conn.execute("DELETE FROM tasks WHERE scope = 'user:1' AND num = 2")
    assert call(add_task, alice, title="pay rent") == "Added #3 pay rent"
    assert call(complete_task, alice, id=3).startswith("Done: #3 pay rent")
    assert call(complete_task, bob, id=3) == "No task #3; call list_tasks to see the ids."

    store.erase("user:1")  # /forget all: the rows go, the numbering goes on
    assert call(list_tasks, alice).endswith("No tasks.")
    assert call(add_task, alice, title="start over") == "Added #4 start over"
    assert call(complete_task, alice, id=4).startswith("Done: #4 start over")
    assert call(add_task, bob, title="buy cake") == "Added #2 buy cake"

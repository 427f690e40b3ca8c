"""Reminders: set by the agent, delivered by the transport through the store functions."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from scopehub import memory
from scopehub.agents.reminders import cancel_reminder, list_reminders, set_reminder
from scopehub.hub.runtime import run_tool
from tests.agents.helpers import NOW, call, make_ctx

BERLIN = ZoneInfo("Europe/Berlin")


def test_one_off_in_ten_minutes_is_delivered_once(store: memory.Store) -> None:
    ctx = make_ctx(store, chat="42")
    assert call(set_reminder, ctx, text="call mom", when="in 10 minutes") == (
        "Set #1 Wed 2024-05-01 14:40 call mom (once), UTC time."
    )
    assert memory.due_reminders(store, NOW + 599) == []
    due = memory.due_reminders(store, NOW + 600)
    assert [(r.id, r.scope, r.chat, r.text) for r in due] == [(1, "user:1", "42", "call mom")]

    sent = memory.mark_reminder_sent(store, "user:1", 1, NOW + 601)
    assert sent is not None and not sent.active and sent.last_sent == NOW + 601
    assert memory.due_reminders(store, NOW + 10_000) == []
    assert memory.pending_reminders(store) == []


def test_tomorrow_9am_in_the_persons_zone(store: memory.Store) -> None:
    ctx = make_ctx(store, tz="Europe/Berlin")
    result = call(set_reminder, ctx, text="take the bins out", when="tomorrow 9am")
    assert result == "Set #1 Thu 2024-05-02 09:00 take the bins out (once), Europe/Berlin time."
    (reminder,) = memory.pending_reminders(store)
    assert reminder.due == datetime(2024, 5, 2, 9, 0, tzinfo=BERLIN).timestamp()


def test_recurring_advances_without_a_backlog_burst(store: memory.Store) -> None:
    ctx = make_ctx(store)
    assert call(set_reminder, ctx, text="stretch", when="in 1 hour", repeat="hourly").endswith(
        "15:30 stretch (every hour), UTC time."
    )
    first_due = NOW + 3600
    # The bot was down for five and a half hours: one reminder now, not six.
    back_up = first_due + 5.5 * 3600
    assert [r.text for r in memory.due_reminders(store, back_up)] == ["stretch"]
    advanced = memory.mark_reminder_sent(store, "user:1", 1, back_up)
    assert advanced is not None and advanced.active
    assert advanced.due == first_due + 6 * 3600  # next slot on its own grid, after now
    assert memory.due_reminders(store, back_up) == []
    assert memory.due_reminders(store, first_due + 6 * 3600) != []


def test_daily_at_a_time_that_passed_today_starts_tomorrow(store: memory.Store) -> None:
    ctx = make_ctx(store, tz="Europe/Berlin")  # 16:30 in Berlin
    assert call(set_reminder, ctx, text="pills", when="at 8", repeat="daily") == (
        "Set #1 Thu 2024-05-02 08:00 pills (every day), Europe/Berlin time."
    )
    assert call(set_reminder, ctx, text="team meeting", when="9am", repeat="every monday").startswith(
        "Set #2 Mon 2024-05-06 09:00 team meeting (every week)"
    )
    assert call(set_reminder, ctx, text="water", when="in 30 minutes", repeat="every 3 days").endswith(
        "water (every 3 days), Europe/Berlin time."
    )


def test_past_times_and_nonsense_become_hints(store: memory.Store) -> None:
    ctx = make_ctx(store)
    tools = {"set_reminder": set_reminder}
    text, ok = asyncio.run(run_tool(tools, "set_reminder", '{"text": "x", "when": "2024-04-01T09:00"}', ctx))
    assert not ok and "already past" in text
    text, ok = asyncio.run(run_tool(tools, "set_reminder", '{"text": "x", "when": "soonish"}', ctx))
    assert not ok and "in 10 minutes" in text
    text, ok = asyncio.run(run_tool(tools, "set_reminder", '{"text": "x", "when": "at 18:00", "repeat": "often"}', ctx))
    assert not ok and "every N minutes" in text
    assert memory.pending_reminders(store) == []


def test_list_and_cancel(store: memory.Store) -> None:
    ctx = make_ctx(store)
    call(set_reminder, ctx, text="later", when="at 18:00")
    call(set_reminder, ctx, text="sooner", when="in 5 minutes")
    assert call(list_reminders, ctx).splitlines() == [
        "Now Wed 2024-05-01 14:30.",
        "#2 Wed 2024-05-01 14:35 sooner (once)",
        "#1 Wed 2024-05-01 18:00 later (once)",
    ]
    assert call(cancel_reminder, ctx, id=1) == "Cancelled #1 Wed 2024-05-01 18:00 later (once)"
    assert call(cancel_reminder, ctx, id=1) == "No active reminder #1; call list_reminders."
    assert [r.text for r in memory.pending_reminders(store)] == ["sooner"]
    assert memory.due_reminders(store, NOW + 86400)[0].text == "sooner"


def test_pending_reminders_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    with memory.Store(path) as first:
        call(set_reminder, make_ctx(first, scope="group:-100"), text="standup", when="tomorrow 9:15", repeat="daily")
        call(set_reminder, make_ctx(first), text="dentist", when="friday 8am")
    with memory.Store(path) as again:
        pending = memory.pending_reminders(again)
    assert [(r.scope, r.text, r.every_seconds) for r in pending] == [
        ("group:-100", "standup", 86400),
        ("user:1", "dentist", None),
    ]


def test_reminder_numbers_count_per_scope_and_survive_erasure(store: memory.Store) -> None:
    alice, bob = make_ctx(store, scope="user:1"), make_ctx(store, scope="group:-5")
    assert call(set_reminder, alice, text="call mom", when="in 10 minutes").startswith("Set #1 ")
    assert call(set_reminder, bob, text="stand-up", when="in 10 minutes").startswith("Set #1 ")
    assert call(set_reminder, alice, text="water plants", when="in 20 minutes").startswith("Set #2 ")
    assert call(cancel_reminder, bob, id=2) == "No active reminder #2; call list_reminders."
    store.erase("user:1")
    assert call(set_reminder, alice, text="stretch", when="in 5 minutes").startswith("Set #3 ")
    assert call(cancel_reminder, alice, id=3).startswith("Cancelled #3 ")

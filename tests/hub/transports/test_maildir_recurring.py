"""Recurring dispatches go out once per period, and a crash never sends one twice."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from scopehub.hub.transports.maildir import (
    MaildirIntake,
    RecurringDispatch,
    due_recurring,
    load_recurring_state,
    send_due,
)
from tests.hub.transports.helpers import AGENTS, StoreHub


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


DAILY = RecurringDispatch(
    name="daily-report", to_scope="user:1", to_agent="notes", every="daily", subject="Daily report", body="Summarise today."
)
HOURLY = RecurringDispatch(name="tick", to_scope="group:-7", every="hourly", subject="Tick", body="t")
WEEKLY = RecurringDispatch(name="weekly", to_scope="user:1", every="weekly", subject="Week", body="w")
EVERY_90S = RecurringDispatch(name="often", to_scope="user:1", every=90, subject="Often", body="o")


def inbox_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob("*/*/new/*")) + sorted(p.name for p in root.glob("*/*/cur/*"))


def test_due_is_once_per_calendar_period() -> None:
    items = [DAILY, HOURLY, WEEKLY, EVERY_90S]
    now = ts("2026-01-31T23:59:00")  # a Saturday
    assert due_recurring(items, {}, now) == items  # never sent: all due
    sent = dict.fromkeys(["daily-report", "tick", "weekly", "often"], now)
    assert due_recurring([DAILY, HOURLY, WEEKLY], sent, now + 59) == []  # same day, hour and week
    assert due_recurring([DAILY, HOURLY, WEEKLY], sent, ts("2026-02-01T00:00:01")) == [DAILY, HOURLY]
    start = EVERY_90S.period_start(now)
    assert start % 90 == 0 and start <= now < start + 90
    assert due_recurring([EVERY_90S], {"often": start}, start + 89) == []
    assert due_recurring([EVERY_90S], {"often": start + 89}, start + 90) == [EVERY_90S]
    assert due_recurring([WEEKLY], sent, ts("2026-02-01T23:59:59")) == []  # still the same ISO week
    assert due_recurring([WEEKLY], sent, ts("2026-02-02T00:00:00")) == [WEEKLY]  # Monday


def test_send_due_sends_each_once_per_period(root: Path) -> None:
    first = send_due(root, [DAILY, HOURLY], now=ts("2026-01-31T09:15:00"))
    assert sorted(p.name for p in first) == [
        "2026-01-31T00-00-00Z_normal_recurring_daily-report.md",
        "2026-01-31T09-00-00Z_normal_recurring_tick.md",
    ]
    assert first[0].parent.parent.parent.name in ("user-1", "group--7")
    assert send_due(root, [DAILY, HOURLY], now=ts("2026-01-31T09:50:00")) == []
    later = send_due(root, [DAILY, HOURLY], now=ts("2026-01-31T10:05:00"))
    assert [p.name for p in later] == ["2026-01-31T10-00-00Z_normal_recurring_tick.md"]
    next_day = send_due(root, [DAILY, HOURLY], now=ts("2026-02-01T08:00:00"))
    assert len(next_day) == 2 and len(inbox_files(root)) == 5
    state = json.loads((root / "recurring.json").read_text())
    assert state == {"last_sent": {"daily-report": ts("2026-02-01T08:00:00"), "tick": ts("2026-02-01T08:00:00")}}
    assert load_recurring_state(root) == state["last_sent"]
    assert [p.name for p in root.iterdir() if p.name.startswith(".")] == []  # no temp files left


def test_a_crash_before_the_state_is_saved_does_not_send_twice(root: Path) -> None:
    now = ts("2026-01-31T09:15:00")
    send_due(root, [DAILY], now=now)
    (root / "recurring.json").write_text('{"last_sent": {}}')  # as if the process died before saving

    assert send_due(root, [DAILY], now=now + 60) == []
    assert len(inbox_files(root)) == 1
    assert load_recurring_state(root) == {"daily-report": now + 60}


def test_it_is_not_resent_after_the_intake_moved_it_to_cur(root: Path, hub: StoreHub) -> None:
    now = ts("2026-01-31T09:15:00")
    send_due(root, [DAILY], now=now)
    asyncio.run(MaildirIntake(root, agents=AGENTS, deliver=hub.deliver).drain_once())
    (root / "recurring.json").unlink()  # the bookkeeping is lost entirely

    assert send_due(root, [DAILY], now=now + 60) == []
    [dispatch] = hub.seen
    assert (dispatch.scope, dispatch.agent, dispatch.kind, dispatch.sender) == ("user:1", "notes", "recurring", "recurring")
    assert dispatch.body == "Summarise today." and dispatch.subject == "Daily report"


def test_an_unreadable_state_file_starts_afresh(root: Path, caplog) -> None:
    root.mkdir()
    (root / "recurring.json").write_text("{not json")
    assert load_recurring_state(root) == {}
    assert len(send_due(root, [DAILY], now=ts("2026-01-31T09:15:00"))) == 1


@pytest.mark.parametrize(
    "fields",
    [
        {"every": "monthly"},
        {"every": 0},
        {"to_scope": "chat:1"},
        {"to_agent": "../x"},
        {"name": "a/b"},
        {"priority": "asap"},
        {"surprise": 1},
    ],
)
def test_a_bad_recurring_dispatch_is_refused(fields: dict) -> None:
    data = {"name": "x", "to_scope": "user:1", "every": "daily", "subject": "s", "body": "b"} | fields
    with pytest.raises(ValidationError):
        RecurringDispatch(**data)


def test_names_must_be_unique(root: Path) -> None:
    twin = DAILY.model_copy(update={"name": "Daily_Report"})
    with pytest.raises(ValueError, match="unique"):
        send_due(root, [DAILY, twin], now=ts("2026-01-31T09:15:00"))

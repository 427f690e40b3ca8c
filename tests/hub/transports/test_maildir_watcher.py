"""The watcher: backlog at start, inotify wake-ups, polling when inotify is unavailable."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

import pytest

from scopehub.hub.transports.maildir import MaildirIntake, MaildirWatcher, send_dispatch
from tests.hub.transports.helpers import AGENTS, StoreHub


async def wait_for(condition, timeout: float = 10.0) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError("timed out")
        await asyncio.sleep(0.02)
    return time.monotonic() - started


def make_intake(root: Path, hub: StoreHub, **kwargs) -> MaildirIntake:
    kwargs.setdefault("rate_per_scope", None)
    return MaildirIntake(root, agents=AGENTS, deliver=hub.deliver, **kwargs)


def test_inotify_wakes_the_intake_and_the_backlog_is_drained_at_start(root: Path, hub: StoreHub, caplog) -> None:
    early = send_dispatch(root, "user:1", "notes", sender="cron", subject="before start", body="x")
    # a long tick: only an inotify wake-up can deliver the second file in time
    watcher = MaildirWatcher(make_intake(root, hub), poll_interval=60, tick=60)

    async def scenario() -> None:
        with caplog.at_level(logging.INFO, logger="scopehub.hub.transports.maildir"):
            watcher.start()
            await wait_for(lambda: len(hub.seen) == 1)
            assert hub.seen[0].name == early.name
            await asyncio.sleep(0.3)  # let the inotify watch settle
            later = send_dispatch(root, "group:-5", "hub", sender="ci", subject="after start", body="y")
            await wait_for(lambda: len(hub.seen) == 2, timeout=8)
            assert hub.seen[1].name == later.name
            await watcher.stop()

    asyncio.run(scenario())
    assert watcher.mode == "inotify"
    assert any("with inotify" in r.getMessage() for r in caplog.records)
    assert not any("maildir: polling" in r.getMessage() for r in caplog.records)


def test_only_arrivals_in_new_wake_it(root: Path, hub: StoreHub) -> None:
    for i in range(5):
        send_dispatch(root, "user:1", "notes", sender="cron", subject=f"n{i}", body="x")
    watcher = MaildirWatcher(make_intake(root, hub), poll_interval=60, tick=60)

    async def scenario() -> tuple[int, int, int]:
        watcher.start()
        await wait_for(lambda: len(hub.seen) == 5)
        await asyncio.sleep(0.8)  # our own moves to cur/, receipts and replies must not wake it
        after_start = watcher.passes
        for k in range(3):  # a writer streaming into tmp/, and files outside any new/
            (root / "user-1" / "notes" / "tmp" / f"part{k}").write_text("x" * 100)
            (root / "receipts" / f"noise{k}.json").write_text("{}")
            (root / "outbox" / "cron" / "new").mkdir(parents=True, exist_ok=True)
            (root / "outbox" / "cron" / "new" / f"out{k}.md").write_text("x")
        await asyncio.sleep(0.8)
        after_noise = watcher.passes
        send_dispatch(root, "user:1", "notes", sender="cron", subject="real", body="x")
        await wait_for(lambda: len(hub.seen) == 6)
        after_arrival = watcher.passes
        await watcher.stop()
        return after_start, after_noise, after_arrival

    assert asyncio.run(scenario()) == (1, 1, 2)


def test_it_falls_back_to_polling_when_inotify_fails(root: Path, hub: StoreHub, caplog, monkeypatch) -> None:
    import watchfiles

    def broken_awatch(*_args, **_kwargs):
        raise OSError(24, "inotify_init: too many open files")

    monkeypatch.setattr(watchfiles, "awatch", broken_awatch)
    watcher = MaildirWatcher(make_intake(root, hub), poll_interval=0.1, tick=60)

    async def scenario() -> None:
        with caplog.at_level(logging.INFO, logger="scopehub.hub.transports.maildir"):
            watcher.start()
            await wait_for(lambda: watcher.mode == "polling")
            send_dispatch(root, "user:1", "notes", sender="cron", body="x")
            await wait_for(lambda: len(hub.seen) == 1, timeout=5)
            await watcher.stop()

    asyncio.run(scenario())
    [line] = [r.getMessage() for r in caplog.records if "maildir: polling" in r.getMessage()]
    assert "every 0.1 s" in line and "inotify unavailable" in line and "too many open files" in line


def test_force_polling_never_starts_inotify(root: Path, hub: StoreHub, caplog, monkeypatch) -> None:
    import watchfiles

    def no_awatch(*_args, **_kwargs):
        raise AssertionError("inotify must not be used")

    monkeypatch.setattr(watchfiles, "awatch", no_awatch)
    watcher = MaildirWatcher(make_intake(root, hub), poll_interval=0.1, force_polling=True)

    async def scenario() -> None:
        with caplog.at_level(logging.INFO, logger="scopehub.hub.transports.maildir"):
            watcher.start()
            await asyncio.sleep(0.2)
            send_dispatch(root, "user:1", "notes", sender="cron", body="x")
            await wait_for(lambda: len(hub.seen) == 1, timeout=5)
            await watcher.stop()

    asyncio.run(scenario())
    assert watcher.mode == "polling"
    assert any("force_polling" in r.getMessage() for r in caplog.records)


def test_a_rate_limited_backlog_goes_out_as_tokens_come_back(root: Path, hub: StoreHub) -> None:
    for i in range(4):
        send_dispatch(root, "user:1", "notes", sender="cron", subject=f"n{i}", body="x", created=1_700_000_000 + i)
    # 2 per 0.6 s on the intake's clock, which only the test moves: two at once, then
    # nothing however often the watcher wakes, then the rest once the clock says the bucket
    # refilled, with no file event to wake it (an hour's poll and tick).
    clock = [1_800_000_000.0]
    intake = make_intake(root, hub, rate_per_scope=2, rate_period=0.6, clock=lambda: clock[0])
    watcher = MaildirWatcher(intake, poll_interval=3600, tick=3600)

    async def scenario() -> None:
        watcher.start()
        await wait_for(lambda: len(hub.seen) >= 2)
        passes = watcher.passes
        await wait_for(lambda: watcher.passes >= passes + 3)  # it wakes for the refill by itself
        assert len(hub.seen) == 2  # held back: the bucket is empty on the intake's clock
        clock[0] += 1.0  # a full period and then some: two tokens back
        await wait_for(lambda: len(hub.seen) == 4, timeout=10)
        await watcher.stop()

    asyncio.run(scenario())
    assert [d.subject for d in hub.seen] == ["n0", "n1", "n2", "n3"]


def test_the_watcher_warns_about_a_stale_inbox_once(root: Path, hub: StoreHub, caplog) -> None:
    path = send_dispatch(root, "user:1", "notes", sender="cron", body="x")
    old = time.time() - 3600
    os.utime(path, (old, old))

    async def refuse(_dispatch):
        raise RuntimeError("the hub is down")

    intake = MaildirIntake(root, agents=AGENTS, deliver=refuse, rate_per_scope=None, stale_after=600, retry_after=0)
    watcher = MaildirWatcher(intake, poll_interval=0.05, force_polling=True)

    async def scenario() -> None:
        watcher.start()
        await wait_for(lambda: watcher.passes >= 6)
        await watcher.stop()

    with caplog.at_level(logging.WARNING, logger="scopehub.hub.transports.maildir"):
        asyncio.run(scenario())
    stale = [r for r in caplog.records if "stale after" in r.getMessage()]
    assert len(stale) == 1 and "user-1/notes/new" in stale[0].getMessage()
    assert path.exists()  # never dropped, however often the delivery failed


@pytest.mark.parametrize("force_polling", [True, False])
def test_stop_is_prompt(root: Path, hub: StoreHub, force_polling: bool) -> None:
    # An hour's poll and tick: a stop that waited for the next wake would never return here.
    watcher = MaildirWatcher(make_intake(root, hub), poll_interval=3600, tick=3600, force_polling=force_polling)

    async def scenario() -> None:
        watcher.start()
        await wait_for(lambda: watcher.passes >= 1)
        try:
            await asyncio.wait_for(watcher.stop(), 30)
        except TimeoutError:
            raise AssertionError("stop() waited for the watcher's next wake instead of waking it") from None

    asyncio.run(scenario())
    assert watcher.passes == 1  # stopped from its wait, without another pass

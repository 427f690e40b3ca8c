"""Two workers watching one Maildir (a shared volume) on one database: each file taken by one."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

from scopehub.eval.faults import make_hub
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.transports.maildir import list_outbox, send_dispatch
from scopehub.hub.transports.maildir.bridge import build_intake
from scopehub.memory import Store


async def slow_answer(messages, tools):
    await asyncio.sleep(0.05)  # both workers are mid-delivery at once
    return "re: " + str(messages[-1]["content"])[-40:]


def test_two_workers_on_one_maildir_take_each_file_once(tmp_path: Path, caplog) -> None:
    root = tmp_path / "maildir"
    sent = [
        send_dispatch(root, f"user:{40 + i % 3}", "hub", sender="cron", subject=f"report {i}", body=f"body {i}", reply=True)
        for i in range(9)
    ]
    with Store(tmp_path / "hub.db") as store:
        workers = [make_hub(store, FunctionModel(slow_answer)) for _ in range(2)]
        intakes = [build_intake(hub, root) for hub in workers]

        async def both() -> None:
            await asyncio.gather(*(intake.drain_once() for intake in intakes))

        with caplog.at_level(logging.WARNING, logger="scopehub.hub.transports.maildir"):
            asyncio.run(both())
        replies = store.query("SELECT reply_to, count(*) FROM messages WHERE role = 'agent' GROUP BY reply_to")
    assert len(replies) == len(sent) and all(n == 1 for _, n in replies)
    assert len(list_outbox(root, "cron")) == len(sent)  # one reply file each
    for path in sent:
        folder = path.parent.parent.parent.name
        assert (root / folder / "hub" / "cur" / path.name).exists() and not path.exists()
        receipt = json.loads((root / "receipts" / folder / "hub" / f"{path.name}.json").read_text())
        assert receipt["outcome"] == "drained" and receipt["reply"], receipt  # written by the worker that answered it
    assert "vanished" not in caplog.text


def test_a_file_the_other_intake_settled_after_our_scan_leaves_no_dlq_entry(tmp_path: Path) -> None:
    from scopehub.hub.transports.maildir.intake import DrainReport
    from scopehub.hub.transports.maildir.status import dlq_count

    root = tmp_path / "maildir"
    sent = [send_dispatch(root, "user:41", "hub", sender="cron", subject=f"report {i}", body=f"body {i}", reply=True) for i in range(4)]
    with Store(tmp_path / "hub.db") as store:
        first, second = (build_intake(make_hub(store, FunctionModel(slow_answer)), root) for _ in range(2))
        stale = second.pending()  # the second intake's scan, before the first one takes the files

        async def run() -> DrainReport:
            await first.drain_once()
            report, held = DrainReport(), set()
            for entry in stale:  # what it scanned is already in cur/
                await second._process(entry, report, held)
            return report

        report = asyncio.run(run())
    assert len(stale) == len(sent) and (report.delivered, report.rejected) == (0, 0)
    assert dlq_count(root) == 0 and not (root / "dlq").exists()
    assert all((path.parent.parent / "cur" / path.name).exists() for path in sent)  # settled once, by the first

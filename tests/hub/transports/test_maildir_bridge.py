"""The intake wired to the real hub: a file whose answer is in flight elsewhere is never settled unanswered."""

from __future__ import annotations

import asyncio
from pathlib import Path

from scopehub.eval.faults import echo_model, make_hub
from scopehub.hub.transports.maildir import (
    Dispatch,
    MaildirIntake,
    MaildirWatcher,
    list_outbox,
    send_dispatch,
)
from scopehub.hub.transports.maildir.bridge import build_intake
from scopehub.memory import NewMessage, Store, acquire_claim, release_claim
from tests.hub.transports.helpers import AGENTS, StoreHub


def _answers(store: Store, message_id: int) -> list[str]:
    return [m.text for m in store.messages("user:5") if m.role == "agent" and m.reply_to == message_id]


def test_a_file_whose_answer_a_killed_hub_had_claimed_waits_then_is_answered_once(root: Path, store: Store) -> None:
    """The hub stored the file's message and claimed its answer, then was SIGKILLed (its claim lives on).

    The restarted hub must not move the file to cur/ unanswered: it stays in new/ until the
    claim runs out, then it is answered once and the reply reaches the sender's outbox.
    """
    path = send_dispatch(root, "user:5", "notes", sender="cron", body="what is on my list", subject="list", reply=True)
    assert path is not None
    message = store.append(NewMessage(scope="user:5", role="user", text="list\n\nwhat is on my list", ext_id=f"maildir:{path.name}"))
    acquire_claim(store, "user:5", f"message:{message.id}", "host:4242:dead", note="notes: answering", ttl=120)
    hub = make_hub(store, echo_model(), maildir_rate=1000)
    intake = build_intake(hub, root)
    intake.retry_after = 0.0

    report = asyncio.run(intake.drain_once())

    assert report.delivered == 0 and report.waiting == 1
    assert path.exists() and not (path.parent.parent / "cur" / path.name).exists()
    assert _answers(store, message.id) == [] and list_outbox(root, "cron") == []
    assert not (root / "receipts").exists()

    release_claim(store, "user:5", f"message:{message.id}", "host:4242:dead")  # as if its TTL ran out
    assert asyncio.run(intake.drain_once()).delivered == 1
    assert asyncio.run(intake.drain_once()).delivered == 0

    assert not path.exists() and (path.parent.parent / "cur" / path.name).exists()
    assert len(_answers(store, message.id)) == 1
    assert len(list_outbox(root, "cron")) == 1


def test_the_watcher_retries_a_failed_file_after_retry_after_not_at_its_next_tick(root: Path, store: Store) -> None:
    hub = StoreHub(store)
    calls: list[str] = []

    async def flaky(dispatch: Dispatch):
        calls.append(dispatch.name)
        if len(calls) == 1:
            raise RuntimeError("database is locked")
        return await hub.deliver(dispatch)

    path = send_dispatch(root, "user:5", "notes", sender="cron", body="x")
    assert path is not None
    intake = MaildirIntake(root, agents=AGENTS, deliver=flaky, rate_per_scope=None, retry_after=0.05)
    watcher = MaildirWatcher(intake, force_polling=True, poll_interval=3600, tick=3600)

    async def run() -> None:
        watcher.start()
        try:
            for _ in range(400):  # the bound only stops a broken build; the retry is due after 0.05 s
                if len(hub.answered) == 1:
                    return
                await asyncio.sleep(0.025)
        finally:
            await watcher.stop()

    asyncio.run(run())
    assert len(calls) == 2 and len(hub.answered) == 1
    assert (path.parent.parent / "cur" / path.name).exists()

"""Two real webhook worker processes (``agents-hub telegram --webhook-url``) on one database.

Offline: updates are posted as Telegram posts them, the workers answer through
python-telegram-bot's own client to the loopback fake Bot API, and the model is the
loopback OpenAI fake (through litellm). The database is one SQLite file in WAL mode,
shared by both processes (the PostgreSQL runs are ``agents-hub bench workers`` and
``eval faults``). The claim TTL is short (3 s), so a killed worker's work is taken over
within seconds.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest

from scopehub.eval.workers import WEBHOOK_PATH, WEBHOOK_SECRET, Fakes, WorkerPool, worker_env
from scopehub.hub.transports.telegram import REMINDER_PREFIX
from scopehub.memory import Store, add_reminder

BLOCK = "please think forever"
TTL = 3.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("workers")
    db = workdir / "hub.db"
    Store(db).close()  # migrated once, before two processes open it
    with Fakes(0.05, block_marker=BLOCK, slow_reminders=1.5) as fakes:
        pool = WorkerPool(workdir / "pool", worker_env(str(db), fakes, claim_ttl=TTL, maildir=workdir / "maildir"), 2)
        try:
            pool.start_all(timeout=240)
            yield pool, fakes, db
        finally:
            pool.stop_all()


def post(pool: WorkerPool, worker: int, update: dict) -> int:
    response = httpx.post(
        f"http://127.0.0.1:{pool.ports[worker]}/{WEBHOOK_PATH}",
        content=json.dumps(update),
        headers={"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET},
        timeout=30,
    )
    return response.status_code


def replies(fakes: Fakes, chat: int) -> list[str]:
    return [text for chat_id, text, _ in list(fakes.arrivals) if chat_id == chat]


def wait_for(fakes: Fakes, chat: int, count: int, timeout: float = 60.0, settle: float = 2.0) -> list[str]:
    """The chat's replies once ``count`` arrived (and ``settle`` more seconds passed, to catch a duplicate)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(replies(fakes, chat)) < count:
        time.sleep(0.1)
    time.sleep(settle)
    return replies(fakes, chat)


def test_the_same_update_posted_to_both_workers_is_answered_once(cluster):
    pool, fakes, _ = cluster
    update = fakes.update(501, "message 0 of chat 501: what is on my list")
    codes: list[int] = []
    threads = [threading.Thread(target=lambda w=w: codes.append(post(pool, w, update))) for w in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert codes == [200, 200]
    first = wait_for(fakes, 501, 1)
    # Telegram retries a delivery whose answer timed out: the retry is not answered again.
    assert post(pool, 1, update) == 200 and post(pool, 0, update) == 200
    time.sleep(2.0)
    assert replies(fakes, 501) == first
    assert len(first) == 1 and "message 0 of chat 501" in first[0]


def test_a_burst_of_one_chat_spread_over_both_workers_is_answered_once_in_order(cluster):
    pool, fakes, _ = cluster
    for n in range(6):
        assert post(pool, n % 2, fakes.update(502, f"message {n} of chat 502: tell me something")) == 200
    got = wait_for(fakes, 502, 6)
    numbers = [int(text.split("message ", 1)[1].split(" ", 1)[0]) for text in got]
    assert numbers == [0, 1, 2, 3, 4, 5]


def test_a_reminder_fires_once_with_two_workers(cluster):
    pool, fakes, db = cluster
    chats = [601, 602, 603, 604]
    with Store(db) as store:
        for chat in chats:
            add_reminder(store, f"user:{chat}", f"stretch {chat}", due=time.time() - 1, chat=str(chat))
    # Both workers answer a message at the same moment, and each then sweeps the due reminders.
    threads = [
        threading.Thread(target=lambda w=w: post(pool, w, fakes.update(610 + w, f"message 0 of chat {610 + w}: hello")))
        for w in (0, 1)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for chat in chats:
        wait_for(fakes, chat, 1, settle=0.0)
    time.sleep(3.0)
    for chat in chats:
        assert replies(fakes, chat) == [f"{REMINDER_PREFIX}stretch {chat}"]


def test_a_worker_killed_mid_reply_loses_nothing_the_other_answers_after_the_ttl(cluster):
    pool, fakes, db = cluster
    assert post(pool, 0, fakes.update(503, f"message 0 of chat 503: {BLOCK}")) == 200
    deadline = time.monotonic() + 60
    while not any(BLOCK in text for text in fakes.blocked) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fakes.blocked, "the model never got the message"
    pool.kill(0)  # mid-reply: its turn and the message's mark are left to run out
    # A later message of the chat reaches the live worker while the dead one still holds the turn.
    assert post(pool, 1, fakes.update(503, "message 1 of chat 503: and then?")) == 200
    got = wait_for(fakes, 503, 2, timeout=60)
    assert [text.split("\n", 1)[1] for text in got] == [
        f"re: message 0 of chat 503: {BLOCK}",
        "re: message 1 of chat 503: and then?",
    ]
    with Store(Path(db)) as store:
        assert [m.role for m in store.messages("user:503")] == ["user", "user", "agent", "agent"]
    # The rig tells the workers apart (worker_kills traces a reply sent twice to its sender):
    # both replies came from the live worker, and the kill is on record.
    senders = [worker for (chat, _, _), (_, worker) in zip(list(fakes.arrivals), list(fakes.sends), strict=False) if chat == 503]
    assert senders == [1, 1]
    assert [index for index, _ in pool.kills] == [0]

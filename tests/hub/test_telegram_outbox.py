"""A sent reply's Telegram id is recorded once the database is back: that record is what
tells every worker the reply is out, so giving up on it sends the reply a second time."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from scopehub.hub.transports.telegram.outbox import Outbox
from scopehub.memory import StoreUnavailable


class AwayStore:
    """A store whose database is away for ``away`` seconds, then answers."""

    def __init__(self, away: float) -> None:
        self.back_at = time.monotonic() + away
        self.recorded: list[tuple[int, str]] = []
        self.refused = 0

    def set_ext_id(self, message_id: int, ext_id: str) -> None:
        if time.monotonic() < self.back_at:
            self.refused += 1
            raise StoreUnavailable("the database is away")
        self.recorded.append((message_id, ext_id))


def test_a_sent_replys_id_is_recorded_after_an_outage_longer_than_half_a_claim_ttl() -> None:
    # Half a claim TTL is 0.25 s here and the outage lasts 1.5 s (the scenario's 120 s
    # outage against the default 120 s TTL): the id must still be written once it is back.
    store = AwayStore(away=1.5)
    outbox = SimpleNamespace(hub=SimpleNamespace(store=store, settings=SimpleNamespace(claim_ttl=0.5)))
    asyncio.run(Outbox.record_sent(outbox, 41, "tg:42:7"))  # type: ignore[arg-type]
    assert store.recorded == [(41, "tg:42:7")] and store.refused > 1


def test_a_record_the_database_rejects_for_good_is_not_retried() -> None:
    class Rejecting:
        calls = 0

        def set_ext_id(self, message_id: int, ext_id: str) -> None:
            Rejecting.calls += 1
            raise ValueError("not a transient failure")

    outbox = SimpleNamespace(hub=SimpleNamespace(store=Rejecting(), settings=SimpleNamespace(claim_ttl=120.0)))
    asyncio.run(Outbox.record_sent(outbox, 41, "tg:42:7"))  # type: ignore[arg-type]
    assert Rejecting.calls == 1  # logged once, and the reply is not held up

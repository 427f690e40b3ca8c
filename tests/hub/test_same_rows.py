"""The hub's fast paths change nothing a person or the store sees: the bench's scripted
conversation, answered through litellm or straight to the OpenAI-compatible server,
streamed or not, with the store work in the database threads or on the loop, on SQLite
or on PostgreSQL, gets the same replies, sends the model the same requests and leaves
the same rows."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from scopehub.eval.hub_bench import BENCH_MESSAGES, respond
from scopehub.hub.app import build_hub
from scopehub.hub.orchestrator import Inbound
from scopehub.hub.settings import load_settings
from tests.fakes import openai_server
from tests.fakes.openai_server import FakeOpenAI

SCOPE = "user:4242"
START = 1_780_000_000.0  # a fixed clock: reminders "tomorrow at 9" fall on the same day every run
# What differs between runs by nature: when (the wall clock, where the hub does not use its
# clock) and how long things took.
VOLATILE = {"valid_from", "invalid_at", "latency_ms", "created_at", "updated_at", "expires_at", "claimed_at", "renewed_at", "holder", "until"}


class Clock:
    """A second per call from START: the same times in every run."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def rows(store: Any) -> dict[str, list[tuple]]:
    """Every table's rows with the scope's data, in id order, without the volatile columns."""
    dumped = {}
    for table in ("messages", "calls", "facts", "tasks", "reminders", "vault", "events", "digests"):
        result = store.query(f"SELECT * FROM {table} WHERE scope = ? ORDER BY 1", (SCOPE,))
        names = columns(store, table)
        dumped[table] = [
            tuple(_plain(value) for name, value in zip(names, row, strict=True) if name not in VOLATILE and not name.endswith("_ts") and name != "ts")
            for row in result
        ]
    return dumped


def columns(store: Any, table: str) -> list[str]:
    if store.dialect.is_sqlite:
        return [row[1] for row in store.query(f'PRAGMA table_info("{table}")')]
    return [row[0] for row in store.query("SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position", (table,))]


def _plain(value: Any) -> Any:
    """A value as both backends give it back (PostgreSQL's JSON as text, numbers as floats)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return round(float(value), 6)
    if isinstance(value, dict | list):
        import json

        return json.dumps(value, sort_keys=True)
    return value


def converse(db: str, tmp: Path, *, direct: bool, stream: bool, db_threads: bool | None) -> tuple[list, dict, list]:
    """(replies, stored rows, what the model was sent) of the bench's conversation."""
    with FakeOpenAI(default=respond(openai_server)) as llm:
        settings = load_settings(
            db=db, model="openai/fake", api_base=llm.base_url, api_key="sk-fake", maildir=str(tmp / "maildir"), log_level="WARNING"
        )
        hub = build_hub(settings)
        hub.deps.model.direct = direct
        hub.deps.clock = Clock()
        hub.db_threads = db_threads

        async def talk() -> list[tuple]:
            replies = []
            for text in BENCH_MESSAGES:
                inbound = Inbound(scope=SCOPE, text=text, chat="4242", sender="4242")
                shown: list[str] = []

                async def on_text(so_far: str, shown: list[str] = shown) -> None:
                    shown.append(so_far)

                if stream:
                    message = hub.store_inbound(inbound)
                    reply = await hub.answer_queued(message, on_text=on_text)
                else:
                    reply = await hub.handle(inbound)
                assert reply is not None
                if stream and reply.kind == "agent":
                    assert shown and shown[-1] == reply.text  # the text shown while it was written is the reply
                await hub.after_send(reply)
                await hub.drain()
                replies.append((reply.kind, reply.agent, reply.text))
            return replies

        try:
            replies = asyncio.run(talk())
            stored = rows(hub.store)
        finally:
            hub.store.close()
        sent = [{k: v for k, v in request.items() if k not in ("stream", "stream_options")} for request in llm.requests]
    return replies, stored, sent


def test_litellm_or_direct_streamed_or_not_threads_or_not_the_same_on_sqlite(tmp_path: Path) -> None:
    runs = {}
    for direct, stream, threads in [(False, False, False), (True, False, False), (False, True, False), (True, True, False), (True, True, True)]:
        where = tmp_path / f"run-{direct}-{stream}-{threads}"
        where.mkdir()
        runs[(direct, stream, threads)] = converse(str(where / "hub.db"), where, direct=direct, stream=stream, db_threads=threads)
    (replies, stored, sent), *others = runs.values()
    assert len(replies) == len(BENCH_MESSAGES) and all(kind == "agent" for kind, _, _ in replies)
    assert stored["messages"] and stored["calls"]
    for key, (other_replies, other_stored, other_sent) in zip(list(runs)[1:], others, strict=True):
        assert other_replies == replies, key
        assert other_sent == sent, key
        assert other_stored == stored, key


def test_sqlite_and_postgresql_keep_the_same_replies_and_rows(tmp_path: Path, postgres_url: str) -> None:
    on_sqlite = converse(str(tmp_path / "hub.db"), tmp_path, direct=True, stream=True, db_threads=None)
    on_postgres = converse(postgres_url, tmp_path, direct=True, stream=True, db_threads=None)
    assert on_postgres[0] == on_sqlite[0]
    assert on_postgres[2] == on_sqlite[2]
    assert on_postgres[1] == on_sqlite[1]


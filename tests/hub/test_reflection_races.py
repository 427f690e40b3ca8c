"""Reflection under contention, on every backend: a run that outlasts its TTL keeps its
claim (renewed while it runs), and a second run that got the claim anyway (its clock
ahead) never keeps an episode twice (a compare-and-set on the watermark)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from typing import Any

import pytest

from scopehub.hub import load_settings
from scopehub.hub.digest import Reflector
from scopehub.hub.models.testing import FunctionModel
from scopehub.memory import NewMessage, get_reflection, list_knowledge
from tests.memory.backends import BACKENDS

SCOPE = "user:1"
DAY = 86400.0
NOW = 1_700_000_000.0
EPISODES = 8  # 4 hours apart: each its own episode, one model call each


@pytest.fixture(params=sorted(BACKENDS))
def store(request, tmp_path):
    opened = BACKENDS[request.param](request, tmp_path)
    yield opened
    opened.close()


def fill(store) -> None:
    start = NOW - 20 * DAY
    for episode in range(EPISODES):
        for n in range(3):
            text = f"Priya booked table {episode * 10 + n} at the Alfama restaurant for the offsite dinner."
            store.append(NewMessage(scope=SCOPE, role="user", text=text, ts=start + episode * 4 * 3600 + 60 * n, agent="general"))


def slow_model(seconds: float) -> FunctionModel:
    """Answers each episode with one fragment citing its first message, after ``seconds``."""

    async def answer(messages: list[dict[str, Any]], tools: Any) -> str:
        await asyncio.sleep(seconds)
        lines = [line for line in messages[-1]["content"].splitlines() if line.startswith("m")]
        first = lines[0].split(" ", 1)[0]
        text = lines[0].split(": ", 1)[1]
        return json.dumps({"fragments": [{"text": text, "importance": 0.6, "sources": [first]}]})

    return FunctionModel(answer)


def reflector(store, model, clock, **overrides: Any) -> Reflector:
    settings = load_settings(db=str(store.path), **overrides)
    return Reflector(store, settings, model=model, mode="model", clock=clock)


def test_a_run_outlasting_its_ttl_keeps_its_claim_and_the_other_worker_waits(store):
    fill(store)
    started = time.monotonic()

    def clock() -> float:  # real seconds go by: the claim's TTL runs out unless renewed
        return NOW + (time.monotonic() - started)

    one = reflector(store, slow_model(0.12), clock, claim_ttl=0.3)
    two = reflector(store, slow_model(0.0), clock, claim_ttl=0.3)

    async def main() -> tuple[str, list[str]]:
        running = asyncio.create_task(one.reflect(SCOPE, "worker-one"))
        others = []
        while not running.done():  # about a second: several TTLs
            await asyncio.sleep(0.05)
            others.append((await two.reflect(SCOPE, "worker-two")).outcome)
        return (await running).outcome, others

    first, others = asyncio.run(main())
    assert first == "reflected"
    # Held all along, never run beside it ("nothing": it looked once the first had finished).
    busy = others[: others.index("nothing")] if "nothing" in others else others
    assert len(busy) >= 10 and set(busy) == {"busy"} and set(others[len(busy) :]) <= {"nothing"}
    fragments = list_knowledge(store, SCOPE)
    assert len(fragments) == EPISODES and max(Counter(f.text for f in fragments).values()) == 1


def test_a_second_run_that_got_the_claim_anyway_never_keeps_an_episode_twice(store):
    fill(store)
    # The second worker's clock is 901 s ahead: the first one's claim has run out for it.
    one = reflector(store, slow_model(0.05), lambda: NOW)
    two = reflector(store, slow_model(0.05), lambda: NOW + 901)

    async def main() -> list[str]:
        reports = await asyncio.gather(one.reflect(SCOPE, "worker-one"), two.reflect(SCOPE, "worker-two", now=NOW + 901))
        return sorted(r.outcome for r in reports)

    outcomes = asyncio.run(main())
    assert "busy" in outcomes  # one of them found its episode already kept and stopped
    asyncio.run(one.reflect(SCOPE, "worker-one"))  # the next run resumes where the watermark is
    fragments = list_knowledge(store, SCOPE)
    counts = Counter(f.text for f in fragments)
    assert len(counts) == EPISODES and max(counts.values()) == 1, counts.most_common(3)
    assert get_reflection(store, SCOPE).message_upto == EPISODES * 3


def test_a_run_whose_episodes_another_worker_kept_after_it_read_them_keeps_none_twice(store, monkeypatch):
    """The episodes and the compare-and-set's expected watermark come from one read.

    Another worker keeps the first episode just after this run listed its episodes (here:
    while it reads the scope's window for salience). Read again, the watermark had moved
    past that episode, the compare-and-set expected the moved one and the episode was kept
    twice (1 episode of 80 in the full `eval faults -k reflection_ttl`, on SQLite).
    """
    from scopehub.memory import add_knowledge, save_reflection

    fill(store)
    first_episode = [m for m in store.messages(SCOPE, after=0, limit=3)]
    window = store.window

    def window_after_another_worker_kept_it(*args, **kwargs):
        if not list_knowledge(store, SCOPE):  # the other worker, once: its episode and watermark in one transaction
            with store.transaction():
                save_reflection(store, SCOPE, message_upto=first_episode[-1].id, event_upto=0, now=NOW, expect=(0, 0))
                add_knowledge(store, SCOPE, first_episode[0].text, importance=0.6, messages=[first_episode[0].id], ts=NOW)
        return window(*args, **kwargs)

    monkeypatch.setattr(store, "window", window_after_another_worker_kept_it)
    report = asyncio.run(reflector(store, slow_model(0), lambda: NOW).reflect(SCOPE, "worker-one"))
    assert report.outcome == "busy" and report.fragments == 0, report  # it found the episode kept and stopped
    monkeypatch.setattr(store, "window", window)
    asyncio.run(reflector(store, slow_model(0), lambda: NOW).reflect(SCOPE, "worker-one"))  # resumes after it
    per_first = Counter(m for f in list_knowledge(store, SCOPE) for m in f.messages)
    assert per_first[first_episode[0].id] == 1 and len(list_knowledge(store, SCOPE)) == EPISODES

"""Prompt caching end to end: what goes on the wire, what the provider reports, what /usage shows.

Through the real litellm client against the loopback fake, which simulates a provider
prompt cache (OpenAI: automatic prefixes; Anthropic: at cache_control breakpoints).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from scopehub.agents import discover_agents
from scopehub.hub.cli import cli
from scopehub.hub.facts import FactKeeper
from scopehub.hub.models import LiteLLMModel, price_call, takes_cache_marks
from scopehub.hub.orchestrator import Deps, Hub, Inbound
from scopehub.hub.settings import load_settings
from scopehub.memory import Store
from tests.agents.helpers import NOW
from tests.fakes.openai_server import FakeOpenAI

SCOPE = "user:1"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    db = Store(tmp_path / "hub.db")
    yield db
    db.close()


def make_hub(store: Store, model: LiteLLMModel) -> Hub:
    deps = Deps(store=store, settings=load_settings(), model=model, clock=lambda: NOW, facts=FactKeeper(store, None, clock=lambda: NOW))
    return Hub(deps, discover_agents())


def ask(hub: Hub, text: str) -> Any:
    return asyncio.run(hub.handle(Inbound(scope=SCOPE, text=text, chat="1")))


def stable_part(request: dict[str, Any]) -> str:
    """The serialised request up to the breakpoint: tools and the first system block."""
    system = request["system"][0] if "system" in request else request["messages"][0]
    return json.dumps({"tools": request.get("tools"), "system": system}, sort_keys=True)


def test_openai_style_provider_reports_the_repeated_prefix_cached_and_usage_shows_it(store: Store, tmp_path: Path) -> None:
    with FakeOpenAI(prompt_cache=True) as llm:
        llm.script("Added milk.", "Your office is noted.", "Added eggs.")
        hub = make_hub(store, LiteLLMModel("openai/gpt-4o-mini", api_base=llm.base_url, retries=0))
        ask(hub, "/tasks add milk")
        ask(hub, "/remember my office is in Cyber Hub")  # a new fact between two calls of tasks
        ask(hub, "/tasks add eggs")
        first, second = llm.requests[0], llm.requests[-1]

    # Facts changed, history grew: the stable part went out byte-identical, and first.
    assert stable_part(first) == stable_part(second)
    assert "Cyber Hub" in json.dumps(second) and "Cyber Hub" not in stable_part(second)
    assert "cache_control" not in json.dumps(second)  # OpenAI caches by itself: no marks sent
    calls = store.calls(SCOPE)
    assert calls[0]["cached_tokens"] == 0 and calls[-1]["cached_tokens"] > 0
    assert calls[-1]["cost"] > 0 and calls[-1]["billed_tokens"] < calls[-1]["prompt_tokens"]

    usage = json.loads(CliRunner().invoke(cli, ["--db", str(tmp_path / "hub.db"), "usage", "--scope", SCOPE, "--json"]).output)
    assert usage["cached_tokens"] == sum(c["cached_tokens"] for c in calls) > 0
    assert usage["calls_without_cache_report"] == 0
    assert usage["billed_tokens"] < usage["provider_prompt_tokens"]
    assert isinstance(usage["cost"], float) and usage["cost"] > 0
    text = asyncio.run(hub.handle(Inbound(scope=SCOPE, text="/usage", chat="1"))).text
    assert f"{usage['cached_tokens']:,} cached" in text and "Billed like" in text and "$" in text


def test_claude_gets_a_breakpoint_after_the_stable_part_and_cache_reads_are_billed_low(store: Store) -> None:
    with FakeOpenAI(prompt_cache=True) as llm:
        llm.script("Added milk.", "Added eggs.")
        hub = make_hub(store, LiteLLMModel("anthropic/claude-sonnet-4-5", api_base=llm.root_url, api_key="k", retries=0))
        ask(hub, "/tasks add milk")
        ask(hub, "/tasks add eggs")
        first, second = llm.requests

    assert first["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert stable_part(first) == stable_part(second)
    one, two = store.calls(SCOPE)
    assert (one["cached_tokens"], two["cache_write_tokens"]) == (0, 0)
    assert one["cache_write_tokens"] > 0 and two["cached_tokens"] == one["cache_write_tokens"]
    # Claude bills cache writes at 1.25x and reads at 0.1x the input price.
    assert one["billed_tokens"] > one["prompt_tokens"] and two["billed_tokens"] < two["prompt_tokens"]


def test_a_provider_that_reports_no_caching_and_a_model_without_a_price(store: Store, tmp_path: Path) -> None:
    with FakeOpenAI() as llm:  # usage without prompt_tokens_details
        hub = make_hub(store, LiteLLMModel("openai/fake-model", api_base=llm.base_url, retries=0))
        ask(hub, "/tasks add milk")
    call = store.calls(SCOPE)[0]
    assert call["prompt_tokens"] > 0 and call["cached_tokens"] is None and call["cost"] is None
    assert call["billed_tokens"] == call["prompt_tokens"]  # nothing cached: every token at full price
    usage = json.loads(CliRunner().invoke(cli, ["--db", str(tmp_path / "hub.db"), "usage", "--scope", SCOPE, "--json"]).output)
    assert usage["cost"] == "unknown" and usage["calls_without_cache_report"] == 1
    text = CliRunner().invoke(cli, ["--db", str(tmp_path / "hub.db"), "usage", "--scope", SCOPE]).output
    assert "caching not reported by the provider" in text and "cost unknown" in text


def test_cache_marks_go_only_to_providers_that_take_them() -> None:
    assert takes_cache_marks("anthropic/claude-sonnet-4-5") and takes_cache_marks("bedrock/anthropic.claude-3-haiku")
    assert not takes_cache_marks("openai/gpt-4o-mini") and not takes_cache_marks("ollama_chat/llama3.2")
    assert not takes_cache_marks("gemini/gemini-2.5-flash")


def test_price_of_cached_input_from_the_offline_cost_map() -> None:
    full = price_call("gpt-4o-mini", 2000, 0)
    cached = price_call("gpt-4o-mini", 2000, 0, cached_tokens=1024)
    assert full.billed_tokens == pytest.approx(2000)
    assert cached.billed_tokens == pytest.approx(2000 - 1024 + 1024 * 0.5)  # OpenAI: half price
    assert cached.cost < full.cost
    unknown = price_call("openai/no-such-model", 2000, 10, cached_tokens=500)
    assert unknown.cost is None and unknown.billed_tokens is None


def test_lessons_awareness_and_digest_reach_the_call_and_its_record(store: Store) -> None:
    from scopehub.hub.models.testing import ScriptedModel
    from scopehub.memory import CallRecord

    hub = Hub(Deps(store=store, settings=load_settings(), model=ScriptedModel(default="ok")), discover_agents())
    built = hub.build_call("tasks", SCOPE, [], "add milk", lessons="Lessons: confirm dates.", digest="Digest: groceries.")
    assert built.messages[1] == {"role": "system", "content": "Lessons: confirm dates.\n\nDigest: groceries."}
    assert built.tokens["lessons"] > 0 and built.tokens["digest"] > 0 and built.tokens["awareness"] == 0
    store.record_call(CallRecord(scope=SCOPE, agent="tasks", message_id=None, via="local", also_sees=(), tokens=built.tokens, full_history_tokens=built.full_history_tokens))
    row = store.calls(SCOPE)[0]
    assert (row["lessons"], row["awareness"], row["digest"], row["total"]) == (
        built.tokens["lessons"], 0, built.tokens["digest"], built.total_tokens
    )
    assert row["cached_tokens"] is None and row["cost"] is None  # no provider said anything
    assert store.usage(SCOPE).tokens_sent == built.total_tokens


def test_a_database_from_before_the_cache_columns_is_migrated(tmp_path: Path) -> None:
    import sqlite3

    import sqlite_utils

    from scopehub.memory._schema import MIGRATIONS, migrate

    path = tmp_path / "old.db"
    db = sqlite_utils.Database(path)
    for step in MIGRATIONS[:2]:
        step(db)
    db.execute("PRAGMA user_version = 2")
    db.execute("INSERT INTO calls(scope, agent, total, ts) VALUES ('user:1', 'tasks', 300, 1)")
    db.conn.commit()
    db.close()
    store = Store(path)
    row = store.calls("user:1")[0]
    assert (row["total"], row["lessons"], row["cached_tokens"], row["cost"]) == (300, 0, None, None)
    assert store.usage("user:1").calls_reporting_cache == 0
    store.close()
    assert migrate(sqlite_utils.Database(sqlite3.connect(path))) == len(MIGRATIONS)

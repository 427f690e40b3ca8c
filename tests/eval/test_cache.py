"""The prompt-cache model behind billed-equivalent tokens: what a provider would bill."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from scopehub.eval.cache import PrefixCache, Segment, preset
from scopehub.hub.cli import cli
from tests.eval.test_replay import MULTIWOZ


def request(stable: str, *messages: str, tokens: int = 100) -> list[Segment]:
    """A stable part of 500 tokens, then messages of ``tokens`` each (shared by their text)."""
    return [Segment(stable, 500, stable=True), *(Segment(m, tokens, shared=m) for m in messages)]


def test_a_request_that_extends_the_last_one_is_billed_its_prefix_at_the_cached_price() -> None:
    cache = PrefixCache(preset("openai", min_prefix=600, block=1))
    assert cache.bill("tasks", request("T", "a", "b"), now=0) == 700  # nothing cached yet
    billed = cache.bill("tasks", request("T", "a", "b", "c", "d"), now=30)
    assert billed == (900 - 700) + 700 * 0.5
    assert cache.totals.cached_tokens == 700 and cache.totals.stable_tokens == 1000


def test_short_prefixes_expired_entries_and_changed_middles_are_not_cached() -> None:
    cache = PrefixCache(preset("openai", min_prefix=1024))  # OpenAI's minimum, in steps of 128
    cache.bill("tasks", request("T", "a", "b"), now=0)
    assert cache.bill("tasks", request("T", "a", "b", "c"), now=10) == 800  # 700 < 1,024: never cached
    cache.bill("tasks", request("T", *"abcdefg"), now=20)
    assert cache.bill("tasks", request("T", *"abcdefgh"), now=20 + 301) == 1300  # older than the TTL
    cache.bill("tasks", request("T", *"abcdefgh"), now=700)
    # The window slid: the first message left, so only the stable part matches (too short).
    assert cache.bill("tasks", request("T", *"bcdefghi"), now=710) == 1300
    hit = cache.bill("tasks", request("T", *"bcdefghij"), now=720)
    assert hit == 1400 - 1280 + 1280 * 0.5  # 1,300 cached, counted in steps of 128


def test_breakpoints_cache_only_marked_prefixes_and_writes_cost_extra() -> None:
    cache = PrefixCache(preset("anthropic", min_prefix=0))  # reads 0.1x, writes 1.25x
    # Only the stable part (500) is marked: it is written, then read.
    assert cache.bill("tasks", request("T", "a"), now=0) == 100 + 500 * 1.25
    assert cache.bill("tasks", request("T", "a", "b"), now=1) == 200 + 500 * 0.1
    ended = PrefixCache(preset("anthropic", min_prefix=0, mark_end=True))
    ended.bill("tasks", request("T", "a"), now=0)
    assert ended.bill("tasks", request("T", "a", "b"), now=1) == 600 * 0.1 + 100 * 1.25


def test_per_agent_caches_never_share_and_per_scope_is_one_transcript() -> None:
    per_agent = PrefixCache(preset("openai", min_prefix=0, block=1))
    per_agent.bill("tasks", request("T", "a"), now=0)
    assert per_agent.bill("inbox", request("I", "a", "b"), now=1) == 700
    per_scope = PrefixCache(preset("openai", min_prefix=0, block=1, key="scope"))
    per_scope.bill("tasks", request("T", "a"), now=0)
    assert per_scope.bill("inbox", request("I", "a", "b"), now=1) == 100 + 600 * 0.5


def test_eval_tokens_reports_request_stable_prefix_and_billed_tokens_side_by_side(tmp_path: Path) -> None:
    data = tmp_path / "val.json.gz"
    with gzip.open(data, "wt", encoding="utf-8") as handle:
        json.dump(MULTIWOZ, handle)
    out = tmp_path / "out.json"
    args = ["eval", "tokens", "--format", "multiwoz", str(data), "--chain", "2", "--routes", "gold", "--json", str(out), "--quiet"]
    result = CliRunner().invoke(cli, [*args, "--min-prefix", "0", "--cached-price", "0.25", "--gap", "10"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    cache = report["cache"]
    assert cache["model"]["min_prefix"] == 0 and cache["model"]["read_price"] == 0.25
    assert set(cache["modes"]) == {*report["modes"], "full/scope"}
    full, scoped = cache["modes"]["full"], cache["modes"]["scoped"]
    assert full["request_tokens_per_call"] == report["modes"]["full"]["request_tokens_per_call"]
    assert full["stable_prefix_tokens_per_call"] == scoped["stable_prefix_tokens_per_call"] > 0
    # Something repeats, so something is cached, and billed stays below what was sent.
    assert full["cached_share"] > 0 and full["billed_tokens_per_call"] < full["request_tokens_per_call"]
    assert scoped["billed_saving_vs_full"] == pytest.approx(1 - scoped["billed_tokens_per_call"] / full["billed_tokens_per_call"], abs=0.01)
    assert "Billed-equivalent input under the cache model" in result.output and "full, per-scope cache" in result.output
    # With the providers' real minimum these short chats are never cached: billed = sent.
    CliRunner().invoke(cli, args)
    strict = json.loads(out.read_text())["cache"]["modes"]["full"]
    assert strict["cached_share"] == 0 and strict["billed_tokens_per_call"] == strict["request_tokens_per_call"]

"""``agents-hub bench console`` fills a store and prints p50/p95 for every page and the clicks to find a message (a small run here)."""

from __future__ import annotations

import json

from scopehub.eval.console_bench import _pages
from scopehub.hub.cli import main


def test_bench_console_prints_figures_for_every_page_and_the_clicks_to_find(tmp_path, capsys):
    db = tmp_path / "bench.db"
    main(["bench", "console", "--messages", "400", "--runs", "2", "--db", str(db), "--json"])
    rows = json.loads(capsys.readouterr().out)
    head = rows[0]
    assert head["messages"] == 400 and len(head["load"]) == 3
    assert head["clicks"] == {"by_word": 2, "by_date": 2}  # from the scopes list: the scope, then the search or the jump
    pages = {row["page"]: row for row in rows[1:]}
    assert pages.pop("scopes list (first request after start)")["runs"] == 1
    assert set(pages) == set(_pages({"middle": 1, "needle_id": 1, "needle_day": "", "last_call": 1, "tool_call": 1,
                                     "failed_call": 1, "router_call": 1, "extractor_call": 1}))  # fmt: skip
    assert {"search (a word)", "timeline (failed calls)", "call (LLM router)", "replay a message", "memory"} <= set(pages)
    assert all(row["runs"] == 2 and 0 < row["p50_ms"] <= row["p95_ms"] for row in pages.values())

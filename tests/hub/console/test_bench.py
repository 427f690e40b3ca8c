"""``agents-hub bench console`` fills a store and prints p50/p95 per page (a small run here)."""

from __future__ import annotations

import json

from scopehub.hub.cli import main


def test_bench_console_prints_figures_for_every_page(tmp_path, capsys):
    db = tmp_path / "bench.db"
    main(["bench", "console", "--messages", "300", "--runs", "2", "--db", str(db), "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["messages"] == 300
    pages = {row["page"]: row for row in rows[1:]}
    assert set(pages) == {"timeline (newest 50)", "timeline (deep page, keyset)", "scopes list", "call context (recorded)", "scope charts"}
    assert all(row["runs"] == 2 and 0 < row["p50_ms"] <= row["p95_ms"] for row in pages.values())

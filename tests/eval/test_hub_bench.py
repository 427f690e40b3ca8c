"""``agents-hub bench hub`` and ``bench import`` print their figures for every stage and step
(small sizes here; the figures themselves are the commands' output, never asserted)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from scopehub.hub.cli import cli

STAGE_ROWS = ("intake", "route", "context", "run", "record", "after_reply", "local router (embedder)", "local router (lexical)", "message")


def test_bench_hub_times_every_stage_in_the_terminal_chat_and_the_webhook_path(tmp_path):
    out = tmp_path / "hub.json"
    result = CliRunner().invoke(
        cli, ["bench", "hub", "--messages", "4", "--fill", "20", "--scopes", "2", "--json", str(out)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert [run["transport"] for run in report["runs"]] == ["terminal", "webhook"]
    for run in report["runs"]:
        assert run["backend"] == "sqlite" and run["fill"] == 20 and run["scopes"] == 2
        stages = run["stages"]
        for name in ("intake", "route", "context", "run", "record", "message"):
            assert stages[name]["cpu_p50"] >= 0 and stages[name]["wall_p95"] >= stages[name]["wall_p50"]
    for row in STAGE_ROWS[:-3]:
        assert any(line.startswith(row) for line in result.output.splitlines()), row
    assert "terminal on sqlite: 4 messages over 2 scope(s) of 20 earlier messages" in result.output


def test_bench_hub_profile_shows_the_hubs_own_functions(tmp_path):
    result = CliRunner().invoke(cli, ["bench", "hub", "--messages", "3", "--transport", "terminal", "--profile", "30"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "Ordered by: cumulative time" in result.output and "_hub.py" in result.output


def test_bench_import_compares_sqlite_and_postgresql_side_by_side(postgres_server, tmp_path):
    out = tmp_path / "import.json"
    result = CliRunner().invoke(
        cli, ["bench", "import", "--messages", "300", "--runs", "1", "--db", postgres_server.url, "--json", str(out)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert set(report["median_s"]) == {"import sqlite", "import postgresql", "migrate sqlite -> postgresql"}
    assert report["ratio_to_sqlite_import"]["import sqlite"] == 1.0


def test_bench_hub_on_postgresql_counts_the_database_round_trips_of_a_message(postgres_server, tmp_path):
    out = tmp_path / "hub.json"
    result = CliRunner().invoke(
        cli, ["bench", "hub", "--db", postgres_server.url, "--messages", "4", "--transport", "webhook", "--json", str(out)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    message = json.loads(out.read_text())["runs"][0]["stages"]["message"]
    # Every message is stored, routed, answered and recorded: several round trips, each
    # carrying at least one statement.
    assert 5 <= message["round_trips_mean"] <= message["statements_mean"]
    assert f"{message['round_trips_mean']} database round trips carrying {message['statements_mean']} statements" in result.output
    sqlite = tmp_path / "sqlite.json"
    CliRunner().invoke(cli, ["bench", "hub", "--messages", "2", "--transport", "terminal", "--json", str(sqlite)], catch_exceptions=False)
    assert "round_trips_mean" not in json.loads(sqlite.read_text())["runs"][0]["stages"]["message"]

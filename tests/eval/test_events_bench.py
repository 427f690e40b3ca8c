"""The event-log benchmark, on a small log: it runs, reports every figure, keeps the database if asked."""

from __future__ import annotations

import json

from click.testing import CliRunner

from scopehub.eval.events_bench import events_bench_command
from scopehub.memory import Store, events_after


def test_the_benchmark_prints_emit_and_read_latencies():
    result = CliRunner().invoke(events_bench_command, ["--events", "500", "--ops", "20"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("520 events in the scope (+3 other scopes)")
    assert lines[2].split() == ["operation", "p50", "ms", "p95", "ms", "CPU", "p95", "ms"]
    for label in ("emit", "unconsumed, cursor 200 behind", "unconsumed, no cursor yet", "latest by interests"):
        (row,) = [line for line in lines if line.startswith(label)]
        p50, p95, cpu_p95 = (float(cell) for cell in row[len(label):].split()[-3:])
        assert 0 < p50 <= p95 and cpu_p95 > 0, row


def test_the_benchmark_figures_as_json_and_its_database(tmp_path):
    db = tmp_path / "events.db"
    result = CliRunner().invoke(
        events_bench_command, ["--events", "300", "--ops", "10", "--behind", "50", "--db", str(db), "--json"]
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert (figures["events"], figures["events_in_scope"], figures["ops"]) == (300, 310, 10)
    for key in ("emit", "unconsumed_warm", "unconsumed_cold", "latest"):
        assert 0 < figures[key]["p50_ms"] <= figures[key]["p95_ms"] <= figures[key]["max_ms"]
    assert figures["warm_read_returned"] > 0
    with Store(db) as store:  # the kept database holds valid events of every scope filled
        assert len(events_after(store, "user:1", 0, limit=1000)) == 310
        assert events_after(store, "group:9", 0)
    again = CliRunner().invoke(events_bench_command, ["--events", "10", "--db", str(db)])
    assert again.exit_code != 0 and "exists" in again.output

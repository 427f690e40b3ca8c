"""``--report FILE`` and the Benchmarks page: a report holds what the command printed, with
where and when; the page shows exactly that, and says when it is stale."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from scopehub.eval import _report
from scopehub.eval.bench_page import PageError, page_command, render_page
from scopehub.hub.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def test_a_report_holds_the_printed_table_the_output_and_where_it_ran(tmp_path):
    report = tmp_path / "events.json"
    args = ["bench", "events", "--events", "300", "--ops", "10", "--report", str(report)]
    result = CliRunner().invoke(cli, args, prog_name="agents-hub")
    assert result.exit_code == 0, result.output

    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["command"] == f"agents-hub bench events --events 300 --ops 10 --report {report}"
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert data["commit"] == head.stdout.strip()  # the checkout the code runs from, wherever the command runs
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", data["date"])
    assert len(data["load_average"]["start"]) == 3 and data["machine"]["cpus"] >= 1
    assert data["output"] == result.stdout  # every line the command printed, nothing else
    (table,) = data["tables"]
    assert table["headers"] == ["operation", "p50 ms", "p95 ms", "CPU p95 ms"]
    printed = result.stdout.splitlines()
    for row in table["rows"]:  # each row is the printed row, cell for cell
        assert any(line.split() == " ".join(row).split() for line in printed), row
    assert data["figures"]["events"] == 300 and data["exit_code"] == 0


def test_without_report_the_command_writes_nothing_and_prints_the_same(tmp_path, monkeypatch):
    work = tmp_path / "work"  # not tmp_path itself: the tests' HUB_CACHE_DIR is in there
    work.mkdir()
    monkeypatch.chdir(work)
    result = CliRunner().invoke(cli, ["eval", "lessons", "--days", "2", "--mode", "command"])
    assert result.exit_code == 0 and "lessons replay" in result.stdout
    assert list(work.iterdir()) == []


@click.command("probe")
@click.argument("name")
@click.option("--size", type=int, default=1)
@click.option("--tag", "tags", multiple=True)
@click.option("--fast/--slow", default=False)
@click.option("--status", type=int, default=0)
@click.option("--fail", is_flag=True)
@click.option("--db", default=None)
@_report.report_option
def probe(name: str, size: int, tags: tuple[str, ...], fast: bool, status: int, fail: bool, db: str | None) -> dict:
    click.echo(_report.format_table(["name", "size"], [[name, size]], title="probe"))
    if fail:
        raise click.ClickException("broken input")
    if status:
        raise SystemExit(status)
    return {"name": name}


def test_the_command_line_is_what_was_given_and_a_chosen_exit_status_is_kept(tmp_path):
    report = tmp_path / "r.json"
    args = ["x", "--tag", "a", "--tag", "b", "--slow", "--status", "1", "--db", "postgresql://hub:s3cret@db/hub"]
    result = CliRunner().invoke(probe, [*args, "--report", str(report)])
    assert result.exit_code == 1
    data = json.loads(report.read_text(encoding="utf-8"))
    # defaults left out, a password masked
    assert data["command"] == f"probe --tag a --tag b --slow --status 1 --db postgresql://hub:***@db/hub --report {report} x"
    assert "s3cret" not in report.read_text(encoding="utf-8")
    assert data["exit_code"] == 1 and data["tables"][0]["rows"] == [["x", "1"]]


def test_a_command_that_fails_writes_no_report(tmp_path):
    report = tmp_path / "r.json"
    result = CliRunner().invoke(probe, ["x", "--fail", "--report", str(report)])
    assert result.exit_code == 1 and "broken input" in result.output
    assert not report.exists()


def _page(tmp_path: Path, marker: str = "<!-- report: probe.json -->") -> Path:
    docs = tmp_path / "docs"
    (docs / "benchmarks").mkdir(parents=True)
    CliRunner().invoke(probe, ["alpha", "--size", "7", "--report", str(docs / "benchmarks" / "probe.json")])
    page = docs / "benchmarks.md"
    page.write_text(f"# Benchmarks\n\nProse stays.\n\n{marker}\nold figures\n<!-- /report -->\n", encoding="utf-8")
    return page


def test_the_page_is_rendered_from_the_reports_and_check_says_when_it_is_stale(tmp_path):
    page = _page(tmp_path)
    stale = CliRunner().invoke(page_command, ["--docs", str(page.parent), "--check"])
    assert stale.exit_code == 1 and "agents-hub bench page" in stale.output
    assert "old figures" in page.read_text(encoding="utf-8")  # --check changes nothing

    regenerated = CliRunner().invoke(page_command, ["--docs", str(page.parent)])
    assert regenerated.exit_code == 0, regenerated.output
    text = page.read_text(encoding="utf-8")
    assert "Prose stays." in text and "old figures" not in text
    assert "| name | size |\n|---|---|\n| alpha | 7 |" in text
    data = json.loads((page.parent / "benchmarks" / "probe.json").read_text(encoding="utf-8"))
    assert f"commit `{data['commit'][:10]}`" in text and data["date"].replace("T", " ").replace("Z", " UTC") in text
    assert f"load average {data['load_average']['start'][0]:.2f} at start" in text
    assert CliRunner().invoke(page_command, ["--docs", str(page.parent), "--check"]).exit_code == 0


def test_a_marker_can_show_the_output_and_a_missing_report_is_named(tmp_path):
    page = _page(tmp_path, "<!-- report: probe.json output -->")
    text = render_page(page.read_text(encoding="utf-8"), page.parent / "benchmarks")
    assert "```text\nprobe\nname   size\n" in text
    with pytest.raises(PageError, match=r"gone\.json is missing: run the command"):
        render_page("<!-- report: gone.json -->\n<!-- /report -->", page.parent / "benchmarks")
    with pytest.raises(PageError, match="has 1 table"):
        render_page("<!-- report: probe.json table=3 -->\n<!-- /report -->", page.parent / "benchmarks")


def test_the_committed_benchmarks_page_matches_its_reports():
    result = CliRunner().invoke(page_command, ["--docs", str(ROOT / "docs"), "--check"])
    assert result.exit_code == 0, result.output


def test_the_settings_table_lists_every_field_with_its_variable_and_default():
    from scopehub.hub.settings import Settings

    spec = importlib.util.spec_from_file_location("docs_hook", ROOT / "docs" / "hooks" / "reference.py")
    hook = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(hook)
    table = hook.settings_table()
    rows = table.splitlines()[2:]
    assert len(rows) == len(Settings.model_fields)
    assert "| `HUB_WINDOW` | integer (≥ 1, ≤ 10,000) | `40` | recent messages considered before the per-agent filter |" in rows
    assert any(row.startswith("| `TELEGRAM_BOT_TOKEN` | text | empty |") for row in rows)  # an alias, not HUB_
    assert any(row.startswith("| `HUB_CACHE_MARKS` | `auto` \\| `on` \\| `off` | `auto` |") for row in rows)

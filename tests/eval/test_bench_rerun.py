"""``agents-hub bench page --rerun``: each report's recorded command run again, then the page rebuilt."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from scopehub.eval.bench_page import page_command
from scopehub.eval.bench_rerun import plan_reruns

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = ROOT / "eval" / "data" / "multilingual_routing.jsonl"


def _report(path: Path, command: str, *, seconds: float = 3.0) -> None:
    path.write_text(
        json.dumps({"command": command, "date": "2020-01-01T00:00:00Z", "seconds": seconds, "tables": [], "output": "old"}),
        encoding="utf-8",
    )


def _checkout(tmp_path: Path) -> Path:
    """A checkout-like folder: docs/benchmarks.md with one block, and its reports folder."""
    docs = tmp_path / "checkout" / "docs"
    (docs / "benchmarks").mkdir(parents=True)
    (docs / "benchmarks.md").write_text(
        "# Benchmarks\n\nProse.\n\n<!-- report: langs.json -->\nold figures\n<!-- /report -->\n", encoding="utf-8"
    )
    return docs


def test_the_plan_points_data_reports_and_databases_at_this_machine(tmp_path):
    docs = _checkout(tmp_path)
    reports = docs / "benchmarks"
    _report(reports / "langs.json", "agents-hub eval routing --format jsonl --report /elsewhere/docs/benchmarks/langs.json ../shared/data/x/langs.jsonl")
    _report(
        reports / "search.json",
        "agents-hub eval search --db /gone/tmp-1/locomo.db --db 'postgresql://hub:***@/db?host=/gone/pg' --report docs/benchmarks/search.json /srv/shared/data/locomo/l.json",
    )
    _report(reports / "other.json", "python -m something")
    data = tmp_path / "datasets"
    scratch = tmp_path / "scratch"
    checkout = docs.parent

    planned = {item.report.name: item for item in plan_reruns(reports, checkout=checkout, data=data, scratch=scratch)}

    langs = planned["langs.json"]
    assert langs.skip is None and langs.last_seconds == 3.0
    assert langs.words == (
        "agents-hub", "eval", "routing", "--format", "jsonl",
        "--report", "docs/benchmarks/langs.json",  # the report's own file, relative to the checkout
        "../datasets/x/langs.jsonl",  # under the data folder, the path below shared/data kept
    )  # fmt: skip
    search = planned["search.json"]
    assert search.skip == "needs a PostgreSQL server: pass --postgres URL"
    assert str(scratch / "locomo.db") in search.words and "../datasets/locomo/l.json" in search.words
    assert planned["other.json"].skip == "the command is not an agents-hub command"

    with_server = plan_reruns(reports, checkout=checkout, data=data, scratch=scratch, only=["search*"], postgres="postgresql://me:pw@/hub")
    assert [item.report.name for item in with_server] == ["search.json"]
    assert with_server[0].skip is None and "postgresql://me:pw@/hub" in with_server[0].words
    assert "pw" not in with_server[0].command  # printed with the password hidden


def test_rerun_writes_the_report_again_and_rebuilds_the_page(tmp_path, monkeypatch):
    docs = _checkout(tmp_path)
    data = tmp_path / "datasets"
    (data / "langs").mkdir(parents=True)
    shutil.copy(LANGUAGES, data / "langs" / "routing.jsonl")
    monkeypatch.setenv("HUB_DATA_DIR", str(data))
    report = docs / "benchmarks" / "langs.json"
    _report(report, "agents-hub eval routing --format jsonl --embedder none --quiet --report docs/benchmarks/langs.json ../shared/data/langs/routing.jsonl")
    _report(docs / "benchmarks" / "pg.json", "agents-hub bench search --db postgresql://x@/y --report docs/benchmarks/pg.json")

    dry = CliRunner().invoke(page_command, ["--docs", str(docs), "--rerun", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "langs.json · 3 s last time" in dry.output and "pg.json · skip (needs a PostgreSQL server" in dry.output
    assert json.loads(report.read_text(encoding="utf-8"))["date"] == "2020-01-01T00:00:00Z"  # a dry run runs nothing
    assert "old figures" in (docs / "benchmarks.md").read_text(encoding="utf-8")

    result = CliRunner().invoke(page_command, ["--docs", str(docs), "--rerun"])

    assert "ran langs.json" in result.output and "skipped pg.json" in result.output
    assert result.exit_code == 1 and "1 report(s) not rerun: pg.json" in result.output  # a skip is not a success
    written = json.loads(report.read_text(encoding="utf-8"))
    assert written["date"] != "2020-01-01T00:00:00Z" and written["tables"], written
    assert written["command"].endswith("--report docs/benchmarks/langs.json ../datasets/langs/routing.jsonl")
    page = (docs / "benchmarks.md").read_text(encoding="utf-8")
    assert "old figures" not in page and written["tables"][0]["headers"][0] in page  # rebuilt from the new report
    assert "Prose." in page


def test_rerun_options_need_rerun(tmp_path):
    docs = _checkout(tmp_path)
    result = CliRunner().invoke(page_command, ["--docs", str(docs), "--only", "x*"])
    assert result.exit_code == 2 and "go with --rerun" in result.output

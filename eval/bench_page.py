"""The Benchmarks page, rendered from the JSON reports that ``--report FILE`` wrote.

docs/benchmarks.md is prose with marked blocks::

    <!-- report: search-bench.json -->
    (generated: the command, commit, date and load, then the report's tables)
    <!-- /report -->

``agents-hub bench page`` re-renders every block from ``docs/benchmarks/<name>.json``, and
``--check`` fails when a block differs from its report (CI runs it through the docs build),
so a figure on the page is always one a command printed, with where and when it printed
it. A marker may choose what to show: ``table=1`` (the report's second table; ``table=0,2``
several), ``output`` (the command's whole printed output as a text block, for commands
whose result is sentences rather than a table).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

__all__ = ["PageError", "page_command", "render_page", "render_report"]

BLOCK = re.compile(
    r"(?P<open><!-- report: (?P<name>[\w.-]+\.json)(?P<options>[^>]*?) -->\n)(?P<body>.*?)(?P<close><!-- /report -->)",
    re.DOTALL,
)


class PageError(ValueError):
    """A marker names a report that is missing or unreadable, or a table it does not have."""


@dataclass(frozen=True)
class Choice:
    """What a marker asks to show of its report."""

    tables: tuple[int, ...] | None  # None: every table
    output: bool

    @classmethod
    def parse(cls, options: str) -> Choice:
        tables: tuple[int, ...] | None = None
        output = False
        for word in options.split():
            if word == "output":
                output = True
            elif word.startswith("table="):
                try:
                    tables = tuple(int(part) for part in word[len("table="):].split(","))
                except ValueError:
                    raise PageError(f"bad marker option {word!r}: table=N or table=N,M") from None
            else:
                raise PageError(f"unknown marker option {word!r} (table=N, output)")
        return cls(tables=tables, output=output)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _markdown_table(table: dict[str, Any]) -> str:
    headers = [_cell(h) for h in table["headers"]]
    lines = []
    if table.get("title"):
        lines += [f"*{_cell(table['title'])}*", ""]
    lines.append("| " + " | ".join(headers) + " |")
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in table["rows"]]
    return "\n".join(lines)


def _load_text(load: list[float] | None) -> str:
    return f"{load[0]:.2f}" if load else "unknown"


def provenance(report: dict[str, Any]) -> str:
    """One line: the command, the commit, the date, the load average (1 minute) at start and end, the machine."""
    commit = f"`{(report.get('commit') or 'unknown')[:10]}`"
    if report.get("dirty"):
        commit += " (with uncommitted changes to the code)"
    date = str(report.get("date", "unknown")).replace("T", " ").replace("Z", " UTC")
    load = report.get("load_average") or {}
    machine = report.get("machine") or {}
    cpus = machine.get("cpus")
    exit_code = report.get("exit_code") or 0
    status = f" · exit status {exit_code}" if exit_code else ""
    return (
        f"`{report.get('command', '?')}` · commit {commit} · {date} · {report.get('seconds', '?')} s · "
        f"load average {_load_text(load.get('start'))} at start, {_load_text(load.get('end'))} at end"
        + (f" on {cpus} CPUs" if cpus else "")
        + status
    )


def render_report(report: dict[str, Any], choice: Choice, *, name: str = "report") -> str:
    """The Markdown a block holds: the provenance line, then the chosen tables (or the output)."""
    parts = [provenance(report)]
    tables = report.get("tables") or []
    if choice.output or (not tables and choice.tables is None):
        parts.append("```text\n" + str(report.get("output", "")).rstrip("\n") + "\n```")
    if not choice.output or choice.tables is not None:
        indexes = choice.tables if choice.tables is not None else tuple(range(len(tables)))
        for index in indexes:
            if not 0 <= index < len(tables):
                raise PageError(f"{name} has {len(tables)} table(s); the marker asks for table {index}")
            parts.append(_markdown_table(tables[index]))
    return "\n\n".join(parts) + "\n"


def read_report(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PageError(f"{path} is missing: run the command the page names with --report {path}") from None
    except (OSError, ValueError) as exc:
        raise PageError(f"{path} cannot be read: {exc}") from None
    if not isinstance(data, dict) or "tables" not in data or "command" not in data:
        raise PageError(f"{path} is not a report written by --report")
    return data


def render_page(text: str, reports_dir: Path) -> str:
    """``text`` with every report block re-rendered from ``reports_dir``."""

    def block(match: re.Match[str]) -> str:
        name = match["name"]
        body = render_report(read_report(reports_dir / name), Choice.parse(match["options"]), name=name)
        return f"{match['open']}{body}{match['close']}"

    return BLOCK.sub(block, text)


@click.command("page")
@click.option(
    "--docs",
    "docs_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("docs"),
    show_default=True,
    help="the documentation folder: benchmarks.md and its reports in benchmarks/",
)
@click.option("--check", is_flag=True, help="change nothing; exit 1 when the page differs from its reports")
@click.option(
    "--rerun",
    is_flag=True,
    help="first run again the command each report records (datasets under $HUB_DATA_DIR), one at a time, then rebuild the page",
)
@click.option("--only", multiple=True, metavar="GLOB", help="with --rerun: only the reports whose file name matches (repeatable), e.g. 'routing-*'")
@click.option("--dry-run", is_flag=True, help="with --rerun: print the commands that would run, with their last duration; run nothing")
@click.option("--postgres", metavar="URL", help="with --rerun: the PostgreSQL server for commands that compared against one (skipped without it)")
def page_command(docs_dir: Path, check: bool, rerun: bool, only: tuple[str, ...], dry_run: bool, postgres: str | None) -> None:
    """Regenerate the tables of the Benchmarks page from the JSON reports in docs/benchmarks/.

    With --rerun, the reports themselves are first written again by the commands they
    record, so one command regenerates every figure on the page.
    """
    if (only or dry_run or postgres) and not rerun:
        raise click.UsageError("--only, --dry-run and --postgres go with --rerun")
    if rerun and check:
        raise click.UsageError("--check changes nothing; --rerun rewrites the reports: choose one")
    page = docs_dir / "benchmarks.md"
    missed: list[Any] = []
    if rerun:
        from .bench_rerun import data_dir, plan_reruns, run_reruns, scratch_folder

        checkout = docs_dir.resolve().parent
        # A dry run creates nothing: the folder it names is where a real run's databases would go.
        scratch = Path(tempfile.gettempdir()) / "bench-rerun-XXXXXX" if dry_run else scratch_folder()
        planned = plan_reruns(
            docs_dir / "benchmarks", checkout=checkout, data=data_dir(checkout), scratch=scratch, only=only, postgres=postgres
        )
        if not planned:
            raise click.ClickException(f"no report in {docs_dir / 'benchmarks'} matches {' '.join(only) or '*.json'}")
        if dry_run:
            for item in planned:
                last = f"{item.last_seconds:.0f} s last time" if item.last_seconds is not None else "duration unknown"
                status = f"skip ({item.skip})" if item.skip else last
                click.echo(f"{item.report.name} · {status}\n  {item.command or item.recorded}")
            runs = [item for item in planned if not item.skip]
            last = sum(item.last_seconds or 0.0 for item in runs)
            click.echo(f"{len(planned)} reports, {len(runs)} to run from {checkout} (about {last / 60:.0f} min last time)")
            return
        try:
            missed = run_reruns(planned, cwd=checkout, echo=click.echo)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    try:
        text = page.read_text(encoding="utf-8")
        rendered = render_page(text, docs_dir / "benchmarks")
    except (OSError, PageError) as exc:
        raise click.ClickException(str(exc)) from None
    blocks = len(BLOCK.findall(text))
    if rendered == text:
        click.echo(f"{page}: {blocks} report blocks, up to date")
    elif check:
        click.echo(f"{page} differs from its reports: run agents-hub bench page", err=True)
        raise SystemExit(1)
    else:
        page.write_text(rendered, encoding="utf-8")
        click.echo(f"{page}: {blocks} report blocks regenerated")
    if missed:
        raise click.ClickException(f"{len(missed)} report(s) not rerun: {', '.join(item.report.name for item in missed)}")

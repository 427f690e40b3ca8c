"""Terminal output for the evaluations: aligned tables, percentages, progress on stderr.

Kept dependency-free (no tqdm): progress is a single self-rewriting line on a terminal
and a few milestone lines otherwise, so logs of long runs stay short.
"""

from __future__ import annotations

import functools
import io
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar

import click
from click.core import ParameterSource

__all__ = ["Progress", "build_report", "format_table", "pct", "progress", "report_option", "write_json"]

T = TypeVar("T")


def pct(value: float | None, digits: int = 1) -> str:
    """``0.5731`` -> ``"57.3%"``; ``None`` -> ``"-"``."""
    if value is None:
        return "-"
    return f"{value * 100:.{digits}f}%"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}" if value else "0"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None) -> str:
    """A plain aligned table: text columns left, numbers right."""
    raw = [list(row) for row in rows]
    body = [[_cell(value) for value in row] for row in raw]
    widths = [len(h) for h in headers]
    for row in body:
        for index, text in enumerate(row):
            widths[index] = max(widths[index], len(text))
    numeric = [
        all(isinstance(row[i], int | float) or row[i] is None for row in raw) if raw else False
        for i in range(len(headers))
    ]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if numeric[i] else cell.ljust(widths[i]) for i, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    _collect(headers, body, title)
    out = []
    if title:
        out.append(title)
    out.append(line(list(headers)))
    out.append("  ".join("-" * width for width in widths))
    out.extend(line(row) for row in body)
    return "\n".join(out)


class Progress:
    """Progress of a long loop on stderr: a rewritten line on a terminal, milestones otherwise."""

    def __init__(self, total: int, label: str, *, stream: IO[str] | None = None, enabled: bool = True) -> None:
        self.total = max(total, 0)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and self.total > 0
        self.done = 0
        self.started = time.perf_counter()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_draw = 0.0
        self._last_milestone = -1

    def advance(self, steps: int = 1) -> None:
        self.done = min(self.total, self.done + steps)
        if not self.enabled:
            return
        now = time.perf_counter()
        if self._tty:
            # Redrawing every step would cost more than the work on fast loops.
            if now - self._last_draw >= 0.1 or self.done == self.total:
                self._last_draw = now
                self.stream.write("\r" + self._text(now))
                self.stream.flush()
        else:
            milestone = (self.done * 4) // self.total  # 25% steps keep CI logs short
            if milestone != self._last_milestone and milestone > 0:
                self._last_milestone = milestone
                self.stream.write(self._text(now) + "\n")
                self.stream.flush()

    def _text(self, now: float) -> str:
        share = self.done / self.total if self.total else 1.0
        width = 24
        bar = "#" * int(share * width)
        return f"{self.label} [{bar:<{width}}] {self.done}/{self.total} {share:4.0%} {now - self.started:5.1f}s"

    def close(self) -> None:
        if self.enabled and self._tty:
            self.stream.write("\n")
            self.stream.flush()
        self.enabled = False


def progress(items: Sequence[T], label: str, *, enabled: bool = True) -> Iterator[T]:
    """Iterate ``items`` while drawing progress on stderr."""
    bar = Progress(len(items), label, enabled=enabled)
    try:
        for item in items:
            yield item
            bar.advance()
    finally:
        bar.close()


def write_json(path: str, data: Any) -> None:
    """Write ``data`` as indented JSON (UTF-8), creating parent directories."""
    import json
    from pathlib import Path

    target = Path(path)
    if target.parent and not target.parent.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# -- reports for the documentation ---------------------------------------------------------------
#
# ``--report FILE`` on an eval or bench command writes what the command printed, with where
# and when it ran, as one JSON file. docs/benchmarks/*.json are such files, and
# ``agents-hub bench page`` renders the Benchmarks page from them, so no figure on that page
# can differ from what a command printed. A command takes part with one decorator,
# :func:`report_option`: the tables it prints through :func:`format_table` and its whole
# standard output are collected while it runs; a dict or list it returns is kept as its
# figures.

REPORT_VERSION = 1

_tables: ContextVar[list[dict[str, Any]] | None] = ContextVar("report_tables", default=None)


def _collect(headers: Sequence[str], body: list[list[str]], title: str | None) -> None:
    tables = _tables.get()
    if tables is not None:
        tables.append({"title": title, "headers": list(headers), "rows": body})


class _Tee(io.TextIOBase):
    """Standard output that also keeps a copy (what the report's ``output`` holds)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.copy = io.StringIO()

    def write(self, text: str) -> int:  # a bytes write raises, so click sees a text stream
        if not isinstance(text, str):
            raise TypeError("text only")
        self.copy.write(text)
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._stream, "errors", None)

    def writable(self) -> bool:
        return True


def _command_line(ctx: click.Context) -> str:
    """The command as a person would type it again: the options they gave, in order of declaration."""
    words = ctx.command_path.split()
    arguments: list[str] = []
    for param in ctx.command.params:
        if param.name is None or ctx.get_parameter_source(param.name) in (
            ParameterSource.DEFAULT,
            ParameterSource.DEFAULT_MAP,
            None,
        ):
            continue
        value = ctx.params.get(param.name)
        values = list(value) if isinstance(value, tuple | list) else [value]
        if isinstance(param, click.Argument):
            arguments.extend(str(v) for v in values)
            continue
        flag = max(param.opts, key=len)
        if getattr(param, "is_flag", False):
            if value:
                words.append(flag)
            elif param.secondary_opts:  # type: ignore[attr-defined]
                words.append(max(param.secondary_opts, key=len))  # type: ignore[attr-defined]
            continue
        for item in values:
            words.extend([flag, str(item)])
    # A database URL's password never goes into a report (the docs quote the command line).
    return _PASSWORD.sub(r"\1***@", shlex.join([*words, *arguments]))


_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")


def _git(*args: str) -> str | None:
    """Ask git about the checkout this code runs from (not the working directory); None outside one."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _load() -> list[float] | None:
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return None


def build_report(
    *,
    command: str,
    started: float,
    load_at_start: list[float] | None,
    tables: list[dict[str, Any]],
    output: str,
    figures: Any = None,
    exit_code: int = 0,
) -> dict[str, Any]:
    """The report's envelope: what ran, at which commit, when, on what machine and under what load."""
    # Uncommitted documentation does not change a figure; uncommitted code may.
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs", ":!*.md", ":!mkdocs.yml")
    return {
        "report": REPORT_VERSION,
        "command": command,
        "commit": _git("rev-parse", "HEAD"),
        "dirty": bool(status) if status is not None else None,
        "date": datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seconds": round(time.time() - started, 1),
        "load_average": {"start": load_at_start, "end": _load()},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(terse=True), "python": platform.python_version()},
        "exit_code": exit_code,
        "tables": tables,
        "output": output,
        "figures": figures,
    }


F = TypeVar("F", bound=Callable[..., Any])


def report_option(command: F) -> F:
    """Add ``--report FILE`` to an eval or bench command: its printed tables and output, as JSON.

    Put it under ``@click.command(...)``. The report is written when the command ends, also
    when it exits with a non-zero status on purpose (a fault scenario that lost data), but
    not when it fails with an error.
    """

    @functools.wraps(command)
    def run(*args: Any, report: str | None = None, **kwargs: Any) -> Any:
        if report is None:
            result = command(*args, **kwargs)
            return result if isinstance(result, int) else None
        ctx = click.get_current_context()
        started, load_at_start = time.time(), _load()
        tables: list[dict[str, Any]] = []
        token = _tables.set(tables)
        tee = _Tee(sys.stdout)
        previous, sys.stdout = sys.stdout, tee
        result: Any = None
        exit_code, finished = 0, False
        try:
            result = command(*args, **kwargs)
            finished = True
        except (click.exceptions.Exit, SystemExit) as exc:
            code = exc.exit_code if isinstance(exc, click.exceptions.Exit) else exc.code
            exit_code, finished = (code if isinstance(code, int) else 1), True
            raise
        finally:
            # An error (not an exit status the command chose) writes no report.
            sys.stdout = previous
            _tables.reset(token)
            if finished:
                write_json(
                    report,
                    build_report(
                        command=_command_line(ctx),
                        started=started,
                        load_at_start=load_at_start,
                        tables=tables,
                        output=tee.copy.getvalue(),
                        figures=result if isinstance(result, dict | list) else None,
                        exit_code=exit_code,
                    ),
                )
                click.echo(f"wrote report {report}", err=True)
        return result if isinstance(result, int) else None

    return click.option(
        "--report",
        type=click.Path(dir_okay=False),
        default=None,
        help="also write a JSON report here: the printed tables and output, commit, date, load average (docs/benchmarks/)",
    )(run)  # type: ignore[return-value]

"""Terminal output for the evaluations: aligned tables, percentages, progress on stderr.

Kept dependency-free (no tqdm): progress is a single self-rewriting line on a terminal
and a few milestone lines otherwise, so logs of long runs stay short.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any, TypeVar

__all__ = ["Progress", "format_table", "pct", "progress", "write_json"]

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

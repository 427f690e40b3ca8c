"""The canonical chat log: JSONL, one message a line.

Fields: ``id``, ``role``, ``text``, ``ts`` and optionally ``scope``, ``agent``,
``also_sees``, ``reply_to``, ``needs`` (plus ``sender`` and ``chat``). The eval loaders
turn public datasets into the same records, so one replay serves every source.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, field_validator

from .errors import InvalidRecord

__all__ = ["ImportReport", "LogRecord", "parse_ts", "read_chatlog", "write_chatlog"]

_ROLE_ALIASES = {"user": "user", "human": "user", "agent": "agent", "assistant": "agent", "bot": "agent", "system": "agent"}


def parse_ts(value: Any) -> float:
    """Unix seconds from a number or an ISO 8601 string (naive means UTC)."""
    if value is None or value == "":
        return time.time()
    if isinstance(value, bool):
        raise ValueError("ts must be a number or an ISO 8601 string")
    if isinstance(value, int | float):
        # Milliseconds are common in exported logs; seconds stay below 1e11 until year 5138.
        return float(value) / 1000.0 if value > 1e11 else float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text)
        except ValueError:
            pass
        parsed = datetime.fromisoformat(text)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.timestamp()
    raise ValueError(f"ts must be a number or an ISO 8601 string, not {type(value).__name__}")


class LogRecord(BaseModel):
    """One line of the canonical chat log."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    role: Literal["user", "agent"]
    text: str
    ts: float
    scope: str | None = None
    agent: str | None = None
    also_sees: tuple[str, ...] = ()
    reply_to: str | None = None
    needs: tuple[str, ...] = ()
    sender: str | None = None
    chat: str | None = None
    _line: int | None = PrivateAttr(default=None)  # where it was read, for error reports

    @property
    def line(self) -> int | None:
        """The line of the file this record came from (None when built in code)."""
        return self._line

    @field_validator("id", "reply_to", mode="before")
    @classmethod
    def _stringify_id(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("role", mode="before")
    @classmethod
    def _normalise_role(cls, value: Any) -> Any:
        if isinstance(value, str):
            return _ROLE_ALIASES.get(value.strip().lower(), value)
        return value

    @field_validator("ts", mode="before")
    @classmethod
    def _parse_ts(cls, value: Any) -> float:
        return parse_ts(value)

    @field_validator("also_sees", "needs", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        if value is None:
            return ()
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        if isinstance(value, list | tuple):
            return tuple(str(item) for item in value)
        return value

    def to_json(self) -> str:
        """One JSONL line, without empty optional fields."""
        data = self.model_dump(exclude_none=True)
        for key in ("also_sees", "needs"):
            if not data.get(key):
                data.pop(key, None)
            else:
                data[key] = list(data[key])
        return json.dumps(data, ensure_ascii=False)


@dataclass
class ImportReport:
    """What an import did: lines read, messages added, lines already present, bad lines."""

    read: int = 0
    added: int = 0
    skipped: int = 0
    invalid: list[tuple[int, str]] = field(default_factory=list)
    scopes: set[str] = field(default_factory=set)


def read_chatlog(source: str | Path | IO[str], report: ImportReport | None = None) -> Iterator[LogRecord]:
    """Yield records from a JSONL file or stream; bad lines go to ``report.invalid``.

    Without a report, a bad line raises :class:`InvalidRecord` naming its line number.
    """
    if isinstance(source, str | Path):
        with open(source, encoding="utf-8") as handle:
            yield from read_chatlog(handle, report)
        return
    for number, line in enumerate(source, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError("expected a JSON object")
            record = LogRecord.model_validate(data)
            record._line = number
        except (ValueError, ValidationError) as exc:
            reason = _short_reason(exc)
            if report is None:
                raise InvalidRecord(f"line {number}: {reason}") from exc
            report.invalid.append((number, reason))
            continue
        yield record


def write_chatlog(records: Iterable[LogRecord], target: IO[str]) -> int:
    """Write records as JSONL; return how many."""
    count = 0
    for record in records:
        target.write(record.to_json() + "\n")
        count += 1
    return count


def _short_reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for error in exc.errors()[:3]:
            where = ".".join(str(p) for p in error.get("loc", ())) or "line"
            parts.append(f"{where}: {error.get('msg')}")
        return "; ".join(parts)
    return str(exc)

"""The canonical chat log (JSONL): one dialogue per scope, and dialogues chained into one."""

from __future__ import annotations

import gzip
from collections.abc import Iterable

from scopehub.memory import LogRecord, read_chatlog

from ._base import DatasetFormatError, Dialogue, PathLike, Turn, open_text, resolve_path

TURN_SPACING_S = 30.0  # to_records: seconds between chained turns


def load_jsonl(path: PathLike) -> list[Dialogue]:
    """Load a canonical chat log (JSONL, plain or gzip) as one dialogue per scope."""
    file = resolve_path(path)
    unscoped = file.name.removesuffix(".gz").removesuffix(".jsonl").removesuffix(".json")
    grouped: dict[str, list[Turn]] = {}
    try:
        with open_text(file) as handle:
            for record in read_chatlog(handle):
                turn = Turn(
                    record.id,
                    record.role,
                    record.text,
                    (record.agent,) if record.agent else (),
                    needs=record.needs,
                    also_sees=record.also_sees,
                    ts=record.ts,
                )
                grouped.setdefault(record.scope or unscoped, []).append(turn)
    except (ValueError, UnicodeDecodeError, gzip.BadGzipFile, EOFError) as exc:
        raise DatasetFormatError(f"{file}: expected a JSONL chat log: {exc}") from exc
    return [Dialogue(scope, tuple(turns)) for scope, turns in grouped.items()]


def to_records(
    dialogues: Iterable[Dialogue], scope: str, *, start_ts: float = 1_700_000_000.0
) -> list[LogRecord]:
    """Chain dialogues into one scope's chat log, 30 s apart, tagged with each turn's first agent."""
    records = []
    turns = (turn for dialogue in dialogues for turn in dialogue.turns)
    for number, turn in enumerate(turns):
        records.append(
            LogRecord(
                id=turn.id,
                role="user" if turn.role == "user" else "agent",
                text=turn.text,
                ts=start_ts + number * TURN_SPACING_S,
                scope=scope,
                agent=turn.agents[0] if turn.agents else None,
                also_sees=turn.also_sees,
                needs=turn.needs,
            )
        )
    return records

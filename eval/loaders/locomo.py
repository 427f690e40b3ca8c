"""LoCoMo: very long two-person conversations as chat-log records, with their questions."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scopehub.memory import LogRecord

from ._base import (
    DatasetFormatError,
    LocomoConversation,
    LocomoQuestion,
    PathLike,
    as_str,
    read_json,
    resolve_path,
    unique,
)

LOCOMO_TURN_SPACING_S = 60.0  # load_locomo: seconds between the turns of a session
# A LoCoMo session without a usable date starts this long after the previous one ends.
_LOCOMO_MISSING_DATE_GAP_S = 86_400.0
_LOCOMO_DEFAULT_START = datetime(2023, 1, 1, tzinfo=UTC).timestamp()

_DIA_ID = re.compile(r"D\d+:\d+")
_DIA_ID_LOOSE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)
_SESSION = re.compile(r"session_(\d+)")
_DATE_FORMATS = (
    "%I:%M %p on %d %B, %Y",
    "%I:%M %p on %d %b, %Y",
    "%I:%M %p on %d %B %Y",
    "%I:%M %p on %d %b %Y",
    "%H:%M on %d %B, %Y",
    "%H:%M on %d %b, %Y",
    "%I:%M%p on %d %B, %Y",
)


def load_locomo(path: PathLike) -> list[LocomoConversation]:
    """Load LoCoMo conversations: every session's turns as records, and the QA."""
    file = resolve_path(path)
    data = read_json(file)
    if isinstance(data, dict) and "conversation" in data:
        data = [data]
    if not isinstance(data, list):
        raise DatasetFormatError(f"{file}: expected LoCoMo, a JSON list of conversations")
    conversations = []
    for number, sample in enumerate(data):
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            raise DatasetFormatError(
                f"{file}: conversation #{number}: expected an object with 'conversation'"
            )
        sample_id = as_str(sample.get("sample_id", f"conv-{number}"))
        turns = _locomo_turns(file, sample_id, sample["conversation"])
        questions, malformed = _locomo_questions(file, sample_id, sample.get("qa") or [])
        conversations.append(LocomoConversation(sample_id, turns, questions, malformed))
    return conversations


def _parse_locomo_date(value: Any) -> float | None:
    """Unix seconds (UTC) of a LoCoMo date such as "1:56 pm on 8 May, 2023"; None if unusable."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = " ".join(value.split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def _locomo_turns(
    file: Path, sample_id: str, conversation: dict[str, Any]
) -> tuple[LogRecord, ...]:
    numbers = sorted(
        int(match.group(1))
        for key, value in conversation.items()
        if (match := _SESSION.fullmatch(key)) and isinstance(value, list)
    )
    records: list[LogRecord] = []
    previous_end: float | None = None
    for number in numbers:
        start = _parse_locomo_date(conversation.get(f"session_{number}_date_time"))
        if start is None:
            start = (
                _LOCOMO_DEFAULT_START
                if previous_end is None
                else previous_end + _LOCOMO_MISSING_DATE_GAP_S
            )
        ts = start
        for index, raw in enumerate(conversation[f"session_{number}"]):
            if not isinstance(raw, dict):
                raise DatasetFormatError(
                    f"{file}: {sample_id} session_{number} turn {index}: expected an object with speaker, dia_id, text"
                )
            ts = start + index * LOCOMO_TURN_SPACING_S
            text = as_str(raw.get("text") or "")
            caption = raw.get("blip_caption")
            if isinstance(caption, str) and caption.strip():
                text = (
                    f"{text} [image: {caption.strip()}]" if text else f"[image: {caption.strip()}]"
                )
            speaker = raw.get("speaker")
            records.append(
                LogRecord(
                    id=as_str(raw.get("dia_id") or f"D{number}:{index + 1}"),
                    role="user",
                    text=text,
                    ts=ts,
                    sender=as_str(speaker) if speaker is not None else None,
                )
            )
        previous_end = ts
    return tuple(records)


def _locomo_questions(
    file: Path, sample_id: str, qa: Any
) -> tuple[tuple[LocomoQuestion, ...], int]:
    if not isinstance(qa, list):
        raise DatasetFormatError(f"{file}: {sample_id}: expected 'qa' to be a list of questions")
    questions = []
    malformed = 0
    for number, item in enumerate(qa):
        if not isinstance(item, dict) or "question" not in item:
            raise DatasetFormatError(
                f"{file}: {sample_id} qa #{number}: expected an object with 'question'"
            )
        evidence: list[str] = []
        raw_evidence = item.get("evidence") or []
        for raw in raw_evidence if isinstance(raw_evidence, list) else [raw_evidence]:
            text = as_str(raw).strip()
            if _DIA_ID.fullmatch(text):
                evidence.append(text)
                continue
            # "D8:6; D9:17" -> two ids, "D:11:26" / "D1: 3" -> one, "D" -> none.
            malformed += 1
            evidence.extend(f"D{m.group(1)}:{m.group(2)}" for m in _DIA_ID_LOOSE.finditer(text))
        answer = item.get("answer")
        if answer is None:
            answer = ""
        elif isinstance(answer, list):
            answer = ", ".join(as_str(part) for part in answer)
        try:
            category = int(item.get("category") or 0)
        except (TypeError, ValueError):
            category = 0
        questions.append(
            LocomoQuestion(as_str(item["question"]), as_str(answer), unique(evidence), category)
        )
    return tuple(questions), malformed

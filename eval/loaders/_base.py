"""What every loader shares: the records (turns, dialogues, LoCoMo conversations), the
error a malformed file raises, and reading plain or gzip JSON files."""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from scopehub.memory import LogRecord

PathLike = str | os.PathLike[str]

GENERAL = "general"


class DatasetFormatError(ValueError):
    """A dataset file is missing a part or has the wrong shape; the message names the file."""


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class Slot:
    """An annotated slot value mentioned in a turn."""

    domain: str  # agent name of the domain, e.g. "taxi"
    name: str  # slot name as the dataset spells it, e.g. "Dest" or "destination"
    value: str


@dataclass(frozen=True, slots=True)
class Act:
    """One annotated dialogue act of a system turn: "Hotel-Inform" name=..., area=..."""

    domain: str  # agent name of the domain ("general" for MultiWOZ general-* acts)
    act: str  # lower case, as annotated: "inform", "recommend", "book", "offer", "confirm"...
    slots: tuple[tuple[str, str], ...] = ()  # (slot name, value) pairs with real values, in order


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of a dialogue with its gold agents and annotated slot values."""

    id: str  # unique within the dataset: "<dialogue id>:<index>" (or the log's own id)
    role: str  # "user" | "agent"
    text: str
    agents: tuple[str, ...]  # gold agents, the one the turn is mainly about first; () when none
    slots: tuple[Slot, ...] = ()
    needs: tuple[str, ...] = ()  # ids of the messages an answer to this turn needs (chat logs)
    also_sees: tuple[str, ...] = ()  # other agents whose messages this one may read (chat logs)
    ts: float | None = None  # unix seconds when the dataset has them (chat logs)
    acts: tuple[Act, ...] = ()  # a system turn's annotated dialogue acts (MultiWOZ, SGD)


@dataclass(frozen=True, slots=True)
class Dialogue:
    """One conversation: its id and its turns in order."""

    id: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class LocomoQuestion:
    """A LoCoMo question with its answer, its evidence turn ids and its category."""

    question: str
    answer: str  # stringified; "" when absent (category 5, adversarial)
    evidence: tuple[str, ...]  # dia_ids like "D1:3"
    category: int


@dataclass(frozen=True, slots=True)
class LocomoConversation:
    """A LoCoMo conversation: its turns as chat-log records and its questions."""

    sample_id: str
    turns: tuple[LogRecord, ...]
    questions: tuple[LocomoQuestion, ...]
    # Evidence ids that were not plain "D<n>:<m>": split, repaired or skipped.
    malformed_evidence: int


# --------------------------------------------------------------------------- helpers

def agent_name(domain: str) -> str:
    """Agent name of a dataset domain or service: lowercase, without a trailing ``_<n>``."""
    name = re.sub(r"_\d+$", "", (domain or "").strip()).strip().lower()
    return name or GENERAL


def resolve_path(path: PathLike) -> Path:
    """The file or directory at ``path``, or its ``.gz`` / plain twin when only that exists."""
    candidate = Path(path)
    if candidate.exists():
        return candidate
    twin = (
        candidate.with_name(candidate.name[:-3])
        if candidate.name.endswith(".gz")
        else candidate.with_name(candidate.name + ".gz")
    )
    if twin.exists():
        return twin
    raise FileNotFoundError(f"{candidate}: no such file (nor {twin.name})")


def open_text(path: Path) -> IO[str]:
    """Open a plain or gzip-compressed text file; gzip is detected by its magic bytes."""
    with open(path, "rb") as probe:
        compressed = probe.read(2) == b"\x1f\x8b"
    if compressed:
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def read_json(path: PathLike) -> Any:
    """Parse a plain or gzip JSON file; unreadable content raises DatasetFormatError."""
    file = resolve_path(path)
    if file.is_dir():
        raise DatasetFormatError(f"{file}: expected a .json or .json.gz file, got a directory")
    try:
        with open_text(file) as handle:
            return json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError, gzip.BadGzipFile, EOFError) as exc:
        raise DatasetFormatError(f"{file}: expected JSON (plain or gzip): {exc}") from exc


def find_beside(directory: Path, name: str) -> Path | None:
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def unique(items: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(items))


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else str(value)

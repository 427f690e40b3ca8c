"""Dataset loaders: public dialogue datasets as plain, immutable turns.

Pure functions over files. Every loader reads plain ``.json`` and gzip ``.json.gz``
(detected by content, so a misnamed file still loads; a path whose ``.gz`` twin exists
is found either way). A file of the wrong shape raises :class:`DatasetFormatError`
naming the file and what was expected.

Agent names: a dataset's domain becomes an agent name with :func:`agent_name`
(``"Restaurant"`` -> ``"restaurant"``, ``"Restaurants_1"`` -> ``"restaurants"``).
MultiWOZ ``general`` and ``Booking`` acts name no agent of their own. A system turn
without a domain act inherits the previous user turn's agents; a booking step after a
user turn annotated with no domain ("There are 3 of us") takes the dialogue's most recent
agents, since a booking always belongs to the domain being booked.

Slots are filled for both roles (what the system offers is what later turns refer to);
filter on ``Turn.role`` for user-only values. System turns also keep their dialogue acts
(``Turn.acts``: MultiWOZ ``dialog_act`` entries, SGD frame actions) with their values, in
the annotation's order; a MultiWOZ ``Booking`` act takes the turn's domain. In an SGD turn with several frames the
service the user turns to (the frame with ``INFORM_INTENT``) comes first; MultiWOZ keeps
the annotation's order.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from scopehub.memory import LogRecord, read_chatlog

__all__ = [
    "Act",
    "DatasetFormatError",
    "Dialogue",
    "LocomoConversation",
    "LocomoQuestion",
    "Slot",
    "Turn",
    "agent_name",
    "clinc_domains",
    "load_clinc",
    "load_jsonl",
    "load_locomo",
    "load_multiwoz",
    "load_sgd",
    "load_sgd_schema",
    "to_records",
]

PathLike = str | os.PathLike[str]

GENERAL = "general"
# MultiWOZ acts of these pseudo-domains name no agent: "general" is chit-chat,
# "Booking" is the booking step of whatever domain the conversation is in.
_NO_AGENT = frozenset({GENERAL, "booking"})
# MultiWOZ placeholders that are not values: "?" marks a request, "none" an empty slot.
_NOT_A_VALUE = frozenset({"", "?", "none"})

TURN_SPACING_S = 30.0  # to_records: seconds between chained turns
LOCOMO_TURN_SPACING_S = 60.0  # load_locomo: seconds between the turns of a session
# A LoCoMo session without a usable date starts this long after the previous one ends.
_LOCOMO_MISSING_DATE_GAP_S = 86_400.0
_LOCOMO_DEFAULT_START = datetime(2023, 1, 1, tzinfo=UTC).timestamp()


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


def _resolve(path: PathLike) -> Path:
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


def _open_text(path: Path) -> IO[str]:
    """Open a plain or gzip-compressed text file; gzip is detected by its magic bytes."""
    with open(path, "rb") as probe:
        compressed = probe.read(2) == b"\x1f\x8b"
    if compressed:
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _read_json(path: PathLike) -> Any:
    """Parse a plain or gzip JSON file; unreadable content raises DatasetFormatError."""
    file = _resolve(path)
    if file.is_dir():
        raise DatasetFormatError(f"{file}: expected a .json or .json.gz file, got a directory")
    try:
        with _open_text(file) as handle:
            return json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError, gzip.BadGzipFile, EOFError) as exc:
        raise DatasetFormatError(f"{file}: expected JSON (plain or gzip): {exc}") from exc


def _find_beside(directory: Path, name: str) -> Path | None:
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def _unique(items: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(items))


def _str(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


# --------------------------------------------------------------------------- MultiWOZ


def load_multiwoz(path: PathLike) -> list[Dialogue]:
    """Load MultiWOZ 2.x (ConvLab-2 style: dialogue id -> {"log": [...]}) as dialogues."""
    file = _resolve(path)
    data = _read_json(file)
    if isinstance(data, list):
        # Accept a list of dialogues carrying their own ids as well.
        try:
            data = {_str(item["dialogue_id"]): item for item in data}
        except (TypeError, KeyError):
            raise DatasetFormatError(
                f"{file}: expected MultiWOZ, a JSON object keyed by dialogue id with a 'log' list each"
            ) from None
    if not isinstance(data, dict):
        raise DatasetFormatError(f"{file}: expected MultiWOZ, a JSON object keyed by dialogue id")
    dialogues = []
    for dialogue_id, body in data.items():
        log = body.get("log") if isinstance(body, dict) else None
        if not isinstance(log, list):
            raise DatasetFormatError(
                f"{file}: dialogue {dialogue_id!r}: expected an object with a 'log' list of turns"
            )
        dialogues.append(Dialogue(_str(dialogue_id), _multiwoz_turns(file, _str(dialogue_id), log)))
    return dialogues


def _multiwoz_turns(file: Path, dialogue_id: str, log: list[Any]) -> tuple[Turn, ...]:
    turns = []
    user_agents: tuple[str, ...] = ()
    last_agents: tuple[str, ...] = ()  # the most recent non-empty agents in the dialogue
    for index, entry in enumerate(log):
        if not isinstance(entry, dict):
            raise DatasetFormatError(
                f"{file}: dialogue {dialogue_id!r} turn {index}: expected an object"
            )
        role = "user" if index % 2 == 0 else "agent"
        acts = entry.get("dialog_act")
        if not isinstance(acts, dict):  # missing, null or "No Annotation"
            acts = {}
        domains: list[str] = []
        booking = False
        found: list[tuple[str | None, str, str]] = []
        raw_acts: list[tuple[str | None, str, str, tuple[tuple[str, str], ...]]] = []
        for act, pairs in acts.items():
            prefix, _, act_name = _str(act).partition("-")
            agent: str | None = agent_name(prefix)
            booking = booking or agent == "booking"
            kind = agent
            if agent in _NO_AGENT:
                agent = None
            elif agent not in domains:
                domains.append(agent)
            valued: list[tuple[str, str]] = []
            for pair in pairs if isinstance(pairs, list) else ():
                if not isinstance(pair, list | tuple) or len(pair) < 2:
                    continue
                name, value = _str(pair[0]).strip(), _str(pair[1]).strip()
                if name.lower() == "none" or value.lower() in _NOT_A_VALUE:
                    continue
                found.append((agent, name, value))
                valued.append((name, value))
            raw_acts.append((agent, kind or GENERAL, act_name.strip().lower(), tuple(valued)))
        if domains:
            agents = tuple(domains)
        elif role == "agent":
            # A booking step ("Booked! Reference ...") belongs to the conversation's domain
            # even after a user turn annotated with none ("There are 3 of us").
            agents = user_agents or (last_agents if booking else ())
        else:
            agents = ()
        if role == "user":
            user_agents = agents
        last_agents = agents or last_agents
        default = agents[0] if agents else GENERAL
        slots = _unique(Slot(agent or default, name, value) for agent, name, value in found)
        turn_acts = (
            tuple(
                # general-* acts stay "general"; a Booking act is the booking of the turn's domain.
                Act(agent or (default if kind == "booking" else GENERAL), act_name, valued)
                for agent, kind, act_name, valued in raw_acts
            )
            if role == "agent"
            else ()
        )
        turns.append(
            Turn(f"{dialogue_id}:{index}", role, _str(entry.get("text") or ""), agents, slots, acts=turn_acts)
        )
    return tuple(turns)


# --------------------------------------------------------------------------- SGD


def _sgd_files(path: PathLike) -> list[Path]:
    """The dialogue files of an SGD split directory (one per stem, plain preferred), or the file."""
    target = _resolve(path)
    if target.is_file():
        return [target]
    by_stem: dict[str, Path] = {}
    for file in sorted(target.glob("dialogues_*.json*")):
        stem = file.name.removesuffix(".gz")
        if not stem.endswith(".json"):
            continue
        if stem not in by_stem or not file.name.endswith(".gz"):
            by_stem[stem] = file
    if not by_stem:
        subdirs = ", ".join(sorted(p.name for p in target.iterdir() if p.is_dir())) or "none"
        raise DatasetFormatError(
            f"{target}: expected SGD dialogue files dialogues_*.json[.gz] (subdirectories: {subdirs})"
        )
    return [by_stem[stem] for stem in sorted(by_stem)]


def load_sgd(path: PathLike) -> list[Dialogue]:
    """Load an SGD split (a directory of dialogues_*.json[.gz], or one such file) as dialogues."""
    dialogues = []
    for file in _sgd_files(path):
        data = _read_json(file)
        if not isinstance(data, list):
            raise DatasetFormatError(f"{file}: expected SGD, a JSON list of dialogues")
        for number, body in enumerate(data):
            if not isinstance(body, dict) or not isinstance(body.get("turns"), list):
                raise DatasetFormatError(
                    f"{file}: dialogue #{number}: expected an object with 'dialogue_id' and a 'turns' list"
                )
            dialogue_id = _str(body.get("dialogue_id", f"{file.name}#{number}"))
            dialogues.append(Dialogue(dialogue_id, _sgd_turns(file, dialogue_id, body["turns"])))
    return dialogues


def _sgd_turns(file: Path, dialogue_id: str, raw_turns: list[Any]) -> tuple[Turn, ...]:
    turns = []
    user_agents: tuple[str, ...] = ()
    state: dict[str, dict[str, tuple[str, ...]]] = {}  # service -> slot -> values so far
    for index, raw in enumerate(raw_turns):
        if not isinstance(raw, dict):
            raise DatasetFormatError(
                f"{file}: dialogue {dialogue_id!r} turn {index}: expected an object"
            )
        role = "user" if _str(raw.get("speaker", "")).upper() == "USER" else "agent"
        text = _str(raw.get("utterance") or "")
        frames = [frame for frame in raw.get("frames") or () if isinstance(frame, dict)]
        # In a turn with several frames, the service the user turns to (the one with an
        # INFORM_INTENT) comes first: it is the turn's main agent. The file order varies.
        frames.sort(key=lambda frame: not _has_intent(frame))
        agents = _unique(agent_name(_str(frame.get("service", ""))) for frame in frames)
        if not agents and role == "agent":
            agents = user_agents
        if role == "user":
            user_agents = agents
        slots: list[Slot] = []
        turn_acts: list[Act] = []
        for frame in frames:
            service = _str(frame.get("service", ""))
            domain = agent_name(service)
            slots.extend(_sgd_frame_slots(frame, domain, text))
            if role == "agent":
                turn_acts.extend(_sgd_frame_acts(frame, domain))
            values = (frame.get("state") or {}).get("slot_values") if role == "user" else None
            if isinstance(values, dict):
                before = state.setdefault(service, {})
                for name, listed in values.items():
                    now = tuple(_str(v) for v in (listed if isinstance(listed, list) else [listed]))
                    slots.extend(
                        Slot(domain, name, v) for v in now if v not in before.get(name, ())
                    )
                    before[name] = now
        turns.append(Turn(f"{dialogue_id}:{index}", role, text, agents, _unique(slots), acts=tuple(turn_acts)))
    return tuple(turns)


def _has_intent(frame: dict[str, Any]) -> bool:
    return any(
        isinstance(a, dict) and a.get("act") == "INFORM_INTENT" for a in frame.get("actions") or ()
    )


def _sgd_frame_slots(frame: dict[str, Any], domain: str, text: str) -> Iterator[Slot]:
    """Slot values of a frame: its utterance spans, then its actions' values (not intents)."""
    for span in frame.get("slots") or ():
        try:
            value = text[int(span["start"]) : int(span["exclusive_end"])]
        except (KeyError, TypeError, ValueError):
            continue  # spans copied from elsewhere or without offsets
        if value.strip():
            yield Slot(domain, _str(span.get("slot", "")), value)
    for action in frame.get("actions") or ():
        if not isinstance(action, dict) or action.get("slot") in (None, "", "intent"):
            continue
        for value in action.get("values") or ():
            if _str(value).strip():
                yield Slot(domain, _str(action["slot"]), _str(value))


def _sgd_frame_acts(frame: dict[str, Any], domain: str) -> list[Act]:
    """A system frame's actions as acts, one per act name in order of first use, values kept."""
    grouped: dict[str, list[tuple[str, str]]] = {}
    for action in frame.get("actions") or ():
        if not isinstance(action, dict) or not action.get("act"):
            continue
        pairs = grouped.setdefault(_str(action["act"]).lower(), [])
        slot = _str(action.get("slot") or "")
        if slot:
            pairs.extend((slot, _str(v)) for v in action.get("values") or () if _str(v).strip())
    return [Act(domain, act, tuple(pairs)) for act, pairs in grouped.items()]


def load_sgd_schema(path: PathLike) -> dict[str, str]:
    """Agent name -> description, merged over the services of one domain (at most 100 words)."""
    target = _resolve(path)
    file = _find_beside(target, "schema.json") if target.is_dir() else target
    if file is None:
        raise DatasetFormatError(
            f"{target}: expected schema.json or schema.json.gz in this directory"
        )
    data = _read_json(file)
    if not isinstance(data, list) or not all(
        isinstance(s, dict) and "service_name" in s for s in data
    ):
        raise DatasetFormatError(
            f"{file}: expected an SGD schema, a JSON list of services with 'service_name'"
        )
    services: dict[str, list[dict[str, Any]]] = {}
    for service in data:
        services.setdefault(agent_name(_str(service["service_name"])), []).append(service)
    return {agent: _describe(group) for agent, group in services.items()}


_DESCRIPTION_WORDS = 100


def _describe(services: list[dict[str, Any]]) -> str:
    """Service descriptions, then intent, then slot descriptions, each once, within the word budget
    (a sentence that does not fit is skipped, shorter ones after it may still fit)."""
    sentences = [_str(s.get("description") or "") for s in services]
    sentences += [
        _str(intent.get("description") or "")
        for service in services
        for intent in service.get("intents") or ()
        if isinstance(intent, dict)
    ]
    # What an agent asks for says what it is for ("Starting city for train journey"): an
    # agent without examples is found by these words (leave-agents-out on SGD dev: 0.72 → 0.83).
    sentences += [
        _str(slot.get("description") or "")
        for service in services
        for slot in service.get("slots") or ()
        if isinstance(slot, dict)
    ]
    kept: list[str] = []
    seen: set[str] = set()
    words = 0
    for sentence in sentences:
        sentence = " ".join(sentence.split()).rstrip(".")
        if not sentence or sentence.lower() in seen:
            continue
        size = len(sentence.split())
        if kept and words + size > _DESCRIPTION_WORDS:
            continue  # a long sentence: shorter ones after it may still fit
        seen.add(sentence.lower())
        kept.append(sentence)
        words += size
    text = ". ".join(kept) + "." if kept else ""
    tokens = text.split()
    return text if len(tokens) <= _DESCRIPTION_WORDS else " ".join(tokens[:_DESCRIPTION_WORDS])


# --------------------------------------------------------------------------- CLINC150


def clinc_domains(path: PathLike) -> dict[str, list[str]]:
    """Domain -> intents from CLINC150's domains.json (the file or its directory)."""
    target = _resolve(path)
    file = _find_beside(target, "domains.json") if target.is_dir() else target
    if file is None:
        raise DatasetFormatError(
            f"{target}: expected domains.json or domains.json.gz in this directory"
        )
    data = _read_json(file)
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise DatasetFormatError(
            f"{file}: expected a JSON object mapping each domain to a list of intents"
        )
    return {_str(domain): [_str(i) for i in intents] for domain, intents in data.items()}


def load_clinc(
    path: PathLike, split: str, *, domains_path: PathLike | None = None
) -> list[tuple[str, str | None]]:
    """(text, domain) pairs of one CLINC150 split; the domain is None for out-of-scope items."""
    file = _resolve(path)
    if file.is_dir():
        found = sorted(
            p for p in file.glob("data_*.json*") if p.name.endswith((".json", ".json.gz"))
        )
        if len(found) != 1:
            names = ", ".join(p.name for p in found) or "none"
            raise DatasetFormatError(
                f"{file}: expected exactly one data_*.json[.gz] file (found: {names})"
            )
        file = found[0]
    if domains_path is None:
        beside = _find_beside(file.parent, "domains.json")
        if beside is None:
            raise DatasetFormatError(
                f"{file}: expected domains.json[.gz] beside it (or pass domains_path=...)"
            )
        domains_path = beside
    domain_of = {
        intent: domain
        for domain, intents in clinc_domains(domains_path).items()
        for intent in intents
    }
    data = _read_json(file)
    if not isinstance(data, dict):
        raise DatasetFormatError(
            f"{file}: expected CLINC150, a JSON object of splits (train, val, ...)"
        )
    if split not in data:
        available = ", ".join(sorted(data)) or "none"
        raise DatasetFormatError(f"{file}: no split {split!r}; available splits: {available}")
    items = data[split]
    if not isinstance(items, list):
        raise DatasetFormatError(
            f"{file}: split {split!r}: expected a list of [text, intent] pairs"
        )
    pairs: list[tuple[str, str | None]] = []
    for number, item in enumerate(items):
        if isinstance(item, list | tuple) and len(item) == 2:
            text, intent = item
        elif isinstance(item, dict) and "text" in item and "intent" in item:
            text, intent = item["text"], item["intent"]
        else:
            raise DatasetFormatError(
                f"{file}: split {split!r} item {number}: expected [text, intent]"
            )
        intent = _str(intent)
        if intent == "oos":
            pairs.append((_str(text), None))
        elif intent in domain_of:
            pairs.append((_str(text), domain_of[intent]))
        else:
            raise DatasetFormatError(
                f"{file}: split {split!r} item {number}: intent {intent!r} is in no domain of {domains_path}"
            )
    return pairs


# --------------------------------------------------------------------------- chat logs


def load_jsonl(path: PathLike) -> list[Dialogue]:
    """Load a canonical chat log (JSONL, plain or gzip) as one dialogue per scope."""
    file = _resolve(path)
    unscoped = file.name.removesuffix(".gz").removesuffix(".jsonl").removesuffix(".json")
    grouped: dict[str, list[Turn]] = {}
    try:
        with _open_text(file) as handle:
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


# --------------------------------------------------------------------------- LoCoMo

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
    file = _resolve(path)
    data = _read_json(file)
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
        sample_id = _str(sample.get("sample_id", f"conv-{number}"))
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
            text = _str(raw.get("text") or "")
            caption = raw.get("blip_caption")
            if isinstance(caption, str) and caption.strip():
                text = (
                    f"{text} [image: {caption.strip()}]" if text else f"[image: {caption.strip()}]"
                )
            speaker = raw.get("speaker")
            records.append(
                LogRecord(
                    id=_str(raw.get("dia_id") or f"D{number}:{index + 1}"),
                    role="user",
                    text=text,
                    ts=ts,
                    sender=_str(speaker) if speaker is not None else None,
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
            text = _str(raw).strip()
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
            answer = ", ".join(_str(part) for part in answer)
        try:
            category = int(item.get("category") or 0)
        except (TypeError, ValueError):
            category = 0
        questions.append(
            LocomoQuestion(_str(item["question"]), _str(answer), _unique(evidence), category)
        )
    return tuple(questions), malformed

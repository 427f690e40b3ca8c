"""Schema-Guided Dialogue (DSTC8): a split's dialogue files, and its schema's descriptions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._base import (
    Act,
    DatasetFormatError,
    Dialogue,
    PathLike,
    Slot,
    Turn,
    agent_name,
    as_str,
    find_beside,
    read_json,
    resolve_path,
    unique,
)


def _sgd_files(path: PathLike) -> list[Path]:
    """The dialogue files of an SGD split directory (one per stem, plain preferred), or the file."""
    target = resolve_path(path)
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
        data = read_json(file)
        if not isinstance(data, list):
            raise DatasetFormatError(f"{file}: expected SGD, a JSON list of dialogues")
        for number, body in enumerate(data):
            if not isinstance(body, dict) or not isinstance(body.get("turns"), list):
                raise DatasetFormatError(
                    f"{file}: dialogue #{number}: expected an object with 'dialogue_id' and a 'turns' list"
                )
            dialogue_id = as_str(body.get("dialogue_id", f"{file.name}#{number}"))
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
        role = "user" if as_str(raw.get("speaker", "")).upper() == "USER" else "agent"
        text = as_str(raw.get("utterance") or "")
        frames = [frame for frame in raw.get("frames") or () if isinstance(frame, dict)]
        # In a turn with several frames, the service the user turns to (the one with an
        # INFORM_INTENT) comes first: it is the turn's main agent. The file order varies.
        frames.sort(key=lambda frame: not _has_intent(frame))
        agents = unique(agent_name(as_str(frame.get("service", ""))) for frame in frames)
        if not agents and role == "agent":
            agents = user_agents
        if role == "user":
            user_agents = agents
        slots: list[Slot] = []
        turn_acts: list[Act] = []
        for frame in frames:
            service = as_str(frame.get("service", ""))
            domain = agent_name(service)
            slots.extend(_sgd_frame_slots(frame, domain, text))
            if role == "agent":
                turn_acts.extend(_sgd_frame_acts(frame, domain))
            values = (frame.get("state") or {}).get("slot_values") if role == "user" else None
            if isinstance(values, dict):
                before = state.setdefault(service, {})
                for name, listed in values.items():
                    now = tuple(as_str(v) for v in (listed if isinstance(listed, list) else [listed]))
                    slots.extend(
                        Slot(domain, name, v) for v in now if v not in before.get(name, ())
                    )
                    before[name] = now
        turns.append(Turn(f"{dialogue_id}:{index}", role, text, agents, unique(slots), acts=tuple(turn_acts)))
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
            yield Slot(domain, as_str(span.get("slot", "")), value)
    for action in frame.get("actions") or ():
        if not isinstance(action, dict) or action.get("slot") in (None, "", "intent"):
            continue
        for value in action.get("values") or ():
            if as_str(value).strip():
                yield Slot(domain, as_str(action["slot"]), as_str(value))


def _sgd_frame_acts(frame: dict[str, Any], domain: str) -> list[Act]:
    """A system frame's actions as acts, one per act name in order of first use, values kept."""
    grouped: dict[str, list[tuple[str, str]]] = {}
    for action in frame.get("actions") or ():
        if not isinstance(action, dict) or not action.get("act"):
            continue
        pairs = grouped.setdefault(as_str(action["act"]).lower(), [])
        slot = as_str(action.get("slot") or "")
        if slot:
            pairs.extend((slot, as_str(v)) for v in action.get("values") or () if as_str(v).strip())
    return [Act(domain, act, tuple(pairs)) for act, pairs in grouped.items()]


def load_sgd_schema(path: PathLike) -> dict[str, str]:
    """Agent name -> description, merged over the services of one domain (at most 100 words)."""
    target = resolve_path(path)
    file = find_beside(target, "schema.json") if target.is_dir() else target
    if file is None:
        raise DatasetFormatError(
            f"{target}: expected schema.json or schema.json.gz in this directory"
        )
    data = read_json(file)
    if not isinstance(data, list) or not all(
        isinstance(s, dict) and "service_name" in s for s in data
    ):
        raise DatasetFormatError(
            f"{file}: expected an SGD schema, a JSON list of services with 'service_name'"
        )
    services: dict[str, list[dict[str, Any]]] = {}
    for service in data:
        services.setdefault(agent_name(as_str(service["service_name"])), []).append(service)
    return {agent: _describe(group) for agent, group in services.items()}


_DESCRIPTION_WORDS = 100


def _describe(services: list[dict[str, Any]]) -> str:
    """Service descriptions, then intent, then slot descriptions, each once, within the word budget
    (a sentence that does not fit is skipped, shorter ones after it may still fit)."""
    sentences = [as_str(s.get("description") or "") for s in services]
    sentences += [
        as_str(intent.get("description") or "")
        for service in services
        for intent in service.get("intents") or ()
        if isinstance(intent, dict)
    ]
    # What an agent asks for says what it is for ("Starting city for train journey"): an
    # agent without examples is found by these words (leave-agents-out on SGD dev: 0.72 → 0.83).
    sentences += [
        as_str(slot.get("description") or "")
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

"""MultiWOZ 2.x (ConvLab-2 packaging): user and system turns with domains, slots and acts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._base import (
    GENERAL,
    Act,
    DatasetFormatError,
    Dialogue,
    PathLike,
    Slot,
    Turn,
    agent_name,
    as_str,
    read_json,
    resolve_path,
    unique,
)

# MultiWOZ acts of these pseudo-domains name no agent: "general" is chit-chat,
# "Booking" is the booking step of whatever domain the conversation is in.
_NO_AGENT = frozenset({GENERAL, "booking"})
# MultiWOZ placeholders that are not values: "?" marks a request, "none" an empty slot.
_NOT_A_VALUE = frozenset({"", "?", "none"})


def load_multiwoz(path: PathLike) -> list[Dialogue]:
    """Load MultiWOZ 2.x (ConvLab-2 style: dialogue id -> {"log": [...]}) as dialogues."""
    file = resolve_path(path)
    data = read_json(file)
    if isinstance(data, list):
        # Accept a list of dialogues carrying their own ids as well.
        try:
            data = {as_str(item["dialogue_id"]): item for item in data}
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
        dialogues.append(Dialogue(as_str(dialogue_id), _multiwoz_turns(file, as_str(dialogue_id), log)))
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
            prefix, _, act_name = as_str(act).partition("-")
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
                name, value = as_str(pair[0]).strip(), as_str(pair[1]).strip()
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
        slots = unique(Slot(agent or default, name, value) for agent, name, value in found)
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
            Turn(f"{dialogue_id}:{index}", role, as_str(entry.get("text") or ""), agents, slots, acts=turn_acts)
        )
    return tuple(turns)

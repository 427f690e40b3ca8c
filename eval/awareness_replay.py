"""Awareness in the token replay: the dataset's system acts as events, and the block the hub shows.

A replay has no tools, so nothing emits events the way a live hub does. Instead every
annotated act of a system turn becomes one ``dialogue.act`` event emitted by the agent
that handled the turn (the author of the reply in the replay): MultiWOZ ``dialog_act``
entries (``Hotel-Inform`` name=..., area=...) and SGD frame actions (act, slot, values).
Acts without a value (requests, goodbyes, ``NOTIFY_SUCCESS``) and SGD ``intent`` slots
emit nothing: no one can refer to them. The summary line is dense, e.g.
``hotel: inform name "acorn guest house", area north``.

For each call, :meth:`AwarenessReplay.block` selects events with the hub's rules
(:meth:`scopehub.hub.orchestrator.Hub.awareness_for` over an in-memory log, checked
against the store's own queries in the tests) and renders them with the hub's renderer
(:func:`scopehub.hub.context.awareness.render_awareness`) within the budget
(``HUB_AWARENESS_TOKENS``, 150 by default):

- *unconsumed*: events past the agent's cursor that target it, or broadcasts of a type in
  its ``interests``, oldest first, at most ``AWARENESS_EVENTS``;
- *collaborators*: the newest ``AWARENESS_CONTEXT`` broadcasts (and events targeted at
  it) of its ``collaborators``, if no older than ``AWARENESS_HORIZON``;
- *earlier*: events of its interests it already consumed (the newest
  ``AWARENESS_EARLIER``) whose message is still in the window, while the last ``tail``
  messages or the current one name one of their slot values
  (:func:`scopehub.hub.context.awareness.still_talked_about`).

An event whose message the call's history holds (``visible``) is not shown, and counts
as shown for the cursor. The replay renders the block twice when ``also_sees`` is set:
the scoped call's (recorded: it moves the cursor, as in the hub) and the one without
``also_sees`` (its history is shorter, so it may repeat less).

:meth:`AwarenessReplay.record` then advances the cursor to ``consumed_upto``, as the hub
does once the call is recorded (every replayed call is).

Dataset agents declare no interests or collaborators, so the replay gives every agent
(the domain agents and ``general`` alike) one of these views (``--awareness-view``):

``interests`` (default)
    ``interests=("dialogue.act",)``, no collaborators: each agent is told, once, what the
    other agents did since its own last call;
``collaborators``
    every other agent is a collaborator, no interests: each call shows the latest three
    acts of the others, again and again;
``both``
    both at once (the hub's agents declare both).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import Field

from scopehub.hub.context import Awareness, build_context, render_awareness
from scopehub.hub.context.awareness import still_talked_about
from scopehub.hub.context.builder import AgentPrompt
from scopehub.hub.context.tokens import Tokenizer
from scopehub.hub.orchestrator import (
    AWARENESS_CONTEXT,
    AWARENESS_EARLIER,
    AWARENESS_EVENTS,
    AWARENESS_HORIZON,
)
from scopehub.memory import Event, EventPayload, Message, expand_event_types, register_event_type

from .loaders import Act

__all__ = [
    "AWARENESS_MODES",
    "DEFAULT_BUDGET",
    "EVENT_TYPE",
    "VIEWS",
    "AwarenessReplay",
    "AwarenessView",
    "DialogueAct",
    "act_events",
    "awareness_selections",
    "summarize_act",
]

EVENT_TYPE = "dialogue.act"
DEFAULT_BUDGET = 150  # HUB_AWARENESS_TOKENS' default
# The replay modes with an awareness block, and the scoped mode whose history each keeps.
AWARENESS_MODES = {"scoped_awareness": "scoped", "awareness_no_also": "scoped_no_also"}


class DialogueAct(EventPayload):
    """One annotated act of an agent's reply: its domain, the act and its slot values."""

    domain: str = Field(min_length=1)
    act: str = Field(min_length=1)
    slots: list[tuple[str, str]] = Field(min_length=1, description="(slot, value) pairs in annotation order")

    def mentions(self) -> list[str]:
        """The slot values (what a person could name), not the slot names."""
        return [value for _, value in self.slots]


def _value(text: str) -> str:
    text = " ".join(text.split())
    return f'"{text}"' if " " in text or "," in text else text


def summarize_act(payload: DialogueAct) -> str:
    """``hotel: inform name "acorn guest house", area north`` (a slot's values joined by ' / ')."""
    grouped: dict[str, list[str]] = {}
    for slot, value in payload.slots:
        values = grouped.setdefault(slot.lower().replace("_", " "), [])
        if _value(value) not in values:
            values.append(_value(value))
    parts = ", ".join(f"{slot} {' / '.join(values)}" for slot, values in grouped.items())
    return f"{payload.domain}: {payload.act.lower().replace('_', ' ')} {parts}"


register_event_type(
    EVENT_TYPE,
    DialogueAct,
    description="an agent's reply as an annotated dialogue act with its slot values (token replay)",
    summary=summarize_act,
)


def act_payloads(acts: Iterable[Act]) -> list[DialogueAct]:
    """The acts that carry a value a person could refer to, as event payloads."""
    payloads = []
    for act in acts:
        slots = [(slot, value) for slot, value in act.slots if slot.lower() != "intent" and value.strip()]
        if slots and act.act:
            payloads.append(DialogueAct(domain=act.domain, act=act.act, slots=slots))
    return payloads


def act_events(
    acts: Iterable[Act], *, agent: str, scope: str, ts: float, first_id: int, message_id: int | None = None
) -> list[Event]:
    """Events of one system turn's acts, emitted by ``agent`` (who handled it), ids from ``first_id``."""
    return [
        Event(first_id + number, scope, ts, agent, EVENT_TYPE, payload.model_dump(mode="json"), None, message_id)
        for number, payload in enumerate(act_payloads(acts))
    ]


# --------------------------------------------------------------------------- views


@dataclass(frozen=True, slots=True)
class AwarenessView:
    """What every replayed agent declares: event interests, and whether all others are collaborators."""

    name: str
    interests: tuple[str, ...] = ()
    others_are_collaborators: bool = False


VIEWS = {
    "interests": AwarenessView("interests", interests=(EVENT_TYPE,)),
    "collaborators": AwarenessView("collaborators", others_are_collaborators=True),
    "both": AwarenessView("both", interests=(EVENT_TYPE,), others_are_collaborators=True),
}


class AwarenessReplay:
    """One chat's event log and cursors, and the awareness block of each call.

    ``agents`` are the replay's agents (collaborators are the others among them).
    """

    def __init__(
        self,
        scope: str,
        *,
        agents: Iterable[str],
        tokenizer: Tokenizer,
        view: AwarenessView | str = "interests",
        budget: int = DEFAULT_BUDGET,
    ) -> None:
        self.scope = scope
        self.agents = tuple(sorted(set(agents)))
        self.tokenizer = tokenizer
        self.view = VIEWS[view] if isinstance(view, str) else view
        self.budget = budget
        self.events: list[Event] = []
        self.cursors: dict[str, int] = {}
        self._interests = frozenset(expand_event_types(self.view.interests))

    # -- the log ---------------------------------------------------------------------------
    def emit(self, acts: Iterable[Act], *, agent: str, ts: float, message_id: int | None = None) -> list[Event]:
        """Append the events of a system turn's ``acts``, handled by ``agent``; returns them."""
        events = act_events(acts, agent=agent, scope=self.scope, ts=ts, first_id=len(self.events) + 1, message_id=message_id)
        self.events.extend(events)
        return events

    def collaborators(self, agent: str) -> tuple[str, ...]:
        return tuple(a for a in self.agents if a != agent) if self.view.others_are_collaborators else ()

    def _meant(self, agent: str) -> list[Event]:
        cursor = self.cursors.get(agent, 0)
        return [e for e in self.events if e.id > cursor and (e.target == agent or (e.target is None and e.type in self._interests))]

    def unconsumed(self, agent: str) -> list[Event]:
        """As the hub reads them (:func:`scopehub.memory.unconsumed_events`, ``newest=True``): the
        newest past the cursor, targeted at the agent or of an interesting type, oldest first."""
        return self._meant(agent)[-AWARENESS_EVENTS:]

    def older_unconsumed(self, agent: str) -> int:
        """As :func:`scopehub.memory.count_unconsumed`: how many more lie behind :meth:`unconsumed`."""
        return max(0, len(self._meant(agent)) - AWARENESS_EVENTS)

    def collaborator_events(self, agent: str, now: float) -> list[Event]:
        """As the hub: :func:`scopehub.memory.latest_events` of the collaborators, within the horizon."""
        collaborators = set(self.collaborators(agent))
        if not collaborators:
            return []
        latest = [e for e in self.events if e.agent in collaborators and e.target in (None, agent)][-AWARENESS_CONTEXT:]
        return [e for e in latest if now - e.ts <= AWARENESS_HORIZON]

    def earlier(self, agent: str, since_message: int) -> list[Event]:
        """As the hub: the newest events meant for the agent (:func:`scopehub.memory.latest_events`
        of its interests, or targeted at it) that it already consumed, caused by a message of
        the window (id ``since_message`` or later)."""
        cursor = self.cursors.get(agent, 0)
        meant = [e for e in self.events if e.target == agent or (e.target is None and e.type in self._interests)]
        return [
            e
            for e in meant[-AWARENESS_EARLIER:]
            if e.id <= cursor and e.message_id is not None and e.message_id >= since_message
        ]

    # -- calls -----------------------------------------------------------------------------
    def block(
        self,
        agent: str,
        now: float,
        *,
        visible: Collection[int] = frozenset(),
        talk: Sequence[str] = (),
        since_message: int | None = None,
    ) -> Awareness:
        """The awareness block ``agent`` is shown for a call at ``now``.

        ``visible`` are the ids of the messages in the call's history, ``talk`` the texts of
        the last messages and the current one, ``since_message`` the window's first message id
        (None: no earlier events come back).
        """
        if self.budget <= 0:
            return Awareness()
        earlier = still_talked_about(self.earlier(agent, since_message), talk) if since_message is not None else []
        return render_awareness(
            agent,
            unconsumed=self.unconsumed(agent),
            older_unconsumed=self.older_unconsumed(agent),
            collaborator_events=self.collaborator_events(agent, now),
            earlier=earlier,
            visible=visible,
            now=now,
            tokenizer=self.tokenizer,
            budget=self.budget,
        )

    def record(self, agent: str, shown: Awareness) -> None:
        """The call is recorded: move the cursor to what it consumed (never back, never past the log)."""
        if shown.consumed_upto:
            target = min(shown.consumed_upto, len(self.events))
            self.cursors[agent] = max(self.cursors.get(agent, 0), target)


def awareness_selections(
    prompt: AgentPrompt,
    recent: Sequence[Message],
    text: str,
    *,
    tokenizer: Tokenizer,
    also_sees: Sequence[str],
    awareness: str | Mapping[str, str],
    window: int,
    tail: int,
) -> dict[str, tuple[list[Message], int, int]]:
    """The awareness modes' calls: (history, history tokens, request tokens) per mode.

    ``scoped_awareness`` is the hub's scoped call with the block; ``awareness_no_also``
    the same without ``also_sees``. ``awareness`` is one block for both, or a block per
    mode. The request counts the block (``tokens["awareness"]``).
    """
    out: dict[str, tuple[list[Message], int, int]] = {}
    for mode, also in (("scoped_awareness", tuple(also_sees)), ("awareness_no_also", ())):
        block = awareness if isinstance(awareness, str) else awareness.get(mode, "")
        built = build_context(prompt, recent, text, tokenizer=tokenizer, also_sees=also, awareness=block, window=window, tail=tail)
        out[mode] = (list(built.history), built.tokens["history"], built.tokens["total"])
    return out

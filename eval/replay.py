"""Token replay: what scoping saves, and what it costs in lost references, on dialogue data.

``agents-hub eval tokens --format multiwoz|sgd|jsonl PATH [--chain K] [--routes gold|predicted]``

K dialogues in a row form one customer's chat (one scope). Every user turn is routed
(``predicted``: the real local router, :func:`hub.router.route`; ``gold``: the dataset's
label, and a turn without one stays with the current agent, or ``general`` at the start)
and stored with that tag; every system turn is stored as the reply of the agent that
handled the preceding user turn. ``also_sees`` comes from the router in both cases (for
gold routes: the log's own ``also_sees`` annotation when it has one, else the router's
local prediction for the gold agent). Without ``--train``, the predicted router's
examples are cross-fitted: chats are split into two folds by position and each fold is
routed by a router whose examples (at most 50 per agent) come from the other fold. For each user turn the agent's call is then built by
the real context builder (:func:`hub.context.build_context`) in seven modes:

``full``
    the last ``window`` messages whatever their tag (what an unscoped hub sends);
``scoped_no_also``
    the scoping rules without ``also_sees``: window first, tag filter, plus the tail;
``scoped``
    the same with the router's ``also_sees`` (the hub's behaviour);
``filter_first``
    the known pitfall: the *whole* history filtered by tag (agent and ``also_sees``)
    first, then its last ``window`` messages, plus the tail;
``oracle``
    only the messages the answer needs (the sources of the turn's references, see
    below) plus the tail: a lower bound;
``scoped_awareness``
    ``scoped`` plus the awareness block the hub would show (the other agents' annotated
    system acts as events, see :mod:`eval.awareness_replay`);
``awareness_no_also``
    the awareness block instead of ``also_sees``: ``scoped_no_also`` plus the block.

The request of a call is the agent's fixed prompt (persona, hub rules, tool schemas of
:func:`hub.context.agent_prompt`; ``search_memory`` when :func:`hub.context.wants_archive`
offers it, the same offer in every mode), facts (none in a replay), history and the
message. A dataset domain becomes an agent with :func:`domain_agent` (three tools plus
``search_memory``, comparable with the hub's real agents); a name the hub's registry knows
(``general``) uses the real agent. ``saving`` figures are ``1 - mode / full`` over the
sums of all calls.

References (how recall is measured)
-----------------------------------
A *reference* is a pair (user turn, annotated slot value) such that, after normalising
both texts (lower case, words of letters and digits, number words one..twelve as digits):

- the value is not in the turn's own words: not as words, not as the start of a longer
  word ("moderately" says "moderate", "northern" says "north"), and, for values of five
  characters or more, not spelt a little differently (rapidfuzz ratio >= 80 against a
  span of about as many words: "center" says "centre");
- the value is in at least one *source*: one of the previous ``window`` messages of the
  chat whose gold domains (the dataset's labels, so the set is the same for gold and
  predicted routes) do not include the slot's domain; a message with no domain counts as
  ``general``;
- the value is informative: not a yes/no/don't-care placeholder and not a bare number
  of one or two digits (counts such as "4" people or "2" nights match unrelated numbers
  in earlier messages too often to name a source).

Each (turn, value) counts once, however many slots carry it. A reference is *recalled*
in a mode when any of its sources is in that mode's history, or, in the awareness modes,
when its value is in the awareness block shown (as normalised words). Sources only older than
the window are reachable through ``search_memory`` in every mode alike; such pairs are
counted apart (``references_beyond_window``) and are not references, so ``full`` recalls
every reference by construction. For ``jsonl`` logs the ``needs`` annotations are the
references: each (turn, needed message id) whose message is within the window, recalled
when that message is in the context.

``--judge`` asks the agent's model for each reference's value with the scoped and with
the full context (see :mod:`eval.judge`).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import click
from pydantic import BaseModel, Field
from rapidfuzz import fuzz, process

from scopehub.agents import AgentSpec, Tool
from scopehub.hub.context import (
    AgentPrompt,
    build_context,
    refers_to_past,
    render_history,
    select_history,
    stable_prefix,
    wants_archive,
)
from scopehub.hub.context.tokens import MESSAGE_OVERHEAD, Tokenizer
from scopehub.hub.routing import DEFAULT_AGENT, LocalClassifier, predict_also_sees, route
from scopehub.memory import Message

from . import _report
from .awareness_replay import (
    AWARENESS_MODES,
    DEFAULT_BUDGET,
    VIEWS,
    AwarenessReplay,
    awareness_selections,
)
from .cache import CacheModel, CacheTotals, PrefixCache, Segment
from .loaders import Dialogue, Turn

__all__ = [
    "MODES",
    "CachingTokenizer",
    "Reference",
    "ReplayResult",
    "domain_agent",
    "find_references",
    "normalize_value",
    "replay",
    "tokens_command",
]

MODES = ("full", "scoped_no_also", "scoped", "filter_first", "oracle", *AWARENESS_MODES)
GENERAL = DEFAULT_AGENT

# --------------------------------------------------------------------------- references

_WORD_RE = re.compile(r"[a-z0-9]+")
_NUMBER_WORDS = {
    "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
}  # fmt: skip
# Values that say nothing a source message could hold ("yes" parking, "dontcare" area).
_UNINFORMATIVE = frozenset(
    {"yes", "no", "none", "true", "false", "dontcare", "dont care", "don t care", "do nt care", "any", "not mentioned", "free", "?"}
)


_SPELLING_CUTOFF = 80  # rapidfuzz ratio: "centre"/"center" 83, "monday"/"sunday" 67


def normalize_value(text: str) -> str:
    """Lower-case words of letters and digits, number words as digits, single-spaced."""
    return " ".join(_NUMBER_WORDS.get(word, word) for word in _WORD_RE.findall(text.lower()))


def _informative(value: str) -> bool:
    if not value or value in _UNINFORMATIVE:
        return False
    return not (value.isdigit() and len(value) <= 2)


def _said(value: str, text: str) -> bool:
    """Whether normalised ``text`` (space-padded) says ``value`` itself: as words, as the
    start of a longer word ("moderately", "northern"), or, for values of five letters or
    more, spelt a little differently ("center", "the slug and lettuce")."""
    if f" {value}" in text:
        return True
    if len(value) < 5:
        return False
    words = text.split()
    size = value.count(" ") + 1
    spans = [" ".join(words[i : i + k]) for k in range(max(1, size - 1), size + 2) for i in range(len(words) - k + 1)]
    return bool(spans) and process.extractOne(value, spans, scorer=fuzz.ratio, score_cutoff=_SPELLING_CUTOFF) is not None


@dataclass(frozen=True, slots=True)
class Reference:
    """A user turn's reference to a value that only an earlier message holds."""

    turn: str  # id of the user turn
    value: str  # normalised value, or the needed message id (jsonl)
    slot: str  # slot name ("needs" for jsonl)
    domain: str  # the slot's domain (agent)
    sources: tuple[str, ...]  # ids of the earlier messages, within the window, that hold it
    raw_value: str = ""  # the value as annotated


def find_references(turns: Sequence[Turn], *, window: int = 40) -> tuple[dict[int, list[Reference]], int]:
    """References of one chat (its turns in order), keyed by turn index; and how many
    (turn, value) pairs had their sources only beyond the window (not references)."""
    normalized = [f" {normalize_value(turn.text)} " for turn in turns]
    position = {turn.id: index for index, turn in enumerate(turns)}
    found: dict[int, list[Reference]] = {}
    beyond = 0
    for index, turn in enumerate(turns):
        if turn.role != "user":
            continue
        start = max(0, index - window)
        refs: list[Reference] = []
        if turn.needs:
            for needed in dict.fromkeys(turn.needs):
                where = position.get(needed)
                if where is not None and start <= where < index:
                    refs.append(Reference(turn.id, needed, "needs", turn.agents[0] if turn.agents else GENERAL, (needed,), needed))
                else:
                    beyond += 1  # older than the window, later, or unknown: search_memory's job
        seen: set[str] = set()
        for slot in turn.slots:
            value = normalize_value(slot.value)
            if value in seen or not _informative(value):
                continue
            seen.add(value)
            needle = f" {value} "
            if _said(value, normalized[index]):
                continue
            holders = [
                j for j in range(index) if needle in normalized[j] and slot.domain not in (turns[j].agents or (GENERAL,))
            ]
            if not holders:
                continue
            sources = tuple(turns[j].id for j in holders if j >= start)
            if sources:
                refs.append(Reference(turn.id, value, slot.name, slot.domain, sources, slot.value))
            else:
                beyond += 1
        if refs:
            found[index] = refs
    return found, beyond


# --------------------------------------------------------------------------- agents


class _FindArgs(BaseModel):
    query: str
    filters: dict[str, str] = Field(default_factory=dict, description="area, price, day, time, people...")


class _BookArgs(BaseModel):
    item: str = Field(description="name or id")
    details: dict[str, str] = Field(default_factory=dict, description="day, time, people, nights...")


class _CancelArgs(BaseModel):
    reference: str


def _never_run(ctx: Any, args: Any) -> str:  # replays build prompts, they never call tools
    return "not available in a replay"


def domain_agent(name: str, description: str = "") -> AgentSpec:
    """An agent for one dataset domain, shaped like the hub's real agents (persona, 3 tools)."""
    title = name.replace("_", " ")
    return AgentSpec(
        name=name,
        description=description or f"{title} requests",
        # As long as the hub's own agents' instructions (about 40 words at most): what a
        # call really carries, not a padded stand-in.
        instructions=(
            f"Find {title} options that match what the person asks and book or cancel them with your tools. "
            "Ask for one missing detail at a time, confirm before booking, and quote names, times and "
            "reference numbers exactly."
        ),
        tools=(
            Tool(name=f"find_{name}", description=f"Search {title} options.", args=_FindArgs, func=_never_run),
            Tool(name=f"book_{name}", description=f"Book a {title} option.", args=_BookArgs, func=_never_run),
            Tool(name=f"cancel_{name}", description=f"Cancel a {title} booking.", args=_CancelArgs, func=_never_run),
        ),
    )


def agent_prompts(agents: Iterable[str], descriptions: dict[str, str]) -> tuple[dict[str, AgentPrompt], dict[str, AgentSpec]]:
    """Prompts per agent: the hub's real agent when one has the name, else a domain agent."""
    from scopehub.agents import discover_agents
    from scopehub.hub.context.prompt import agent_prompt

    registry = discover_agents()
    specs: dict[str, AgentSpec] = {}
    for name in sorted(set(agents)):
        specs[name] = registry[name] if name in registry else domain_agent(name, descriptions.get(name, ""))
    return {name: agent_prompt(spec) for name, spec in specs.items()}, specs


class CachingTokenizer:
    """Counts each distinct text once: a replay renders the same messages thousands of times."""

    def __init__(self, base: Tokenizer) -> None:
        self.base = base
        self.name = getattr(base, "name", "tokenizer")
        self._counts: dict[str, int] = {}
        self._cuts: dict[tuple[str, int], str] = {}

    def count(self, text: str) -> int:
        cached = self._counts.get(text)
        if cached is None:
            cached = self._counts[text] = self.base.count(text)
        return cached

    def truncate(self, text: str, max_tokens: int) -> str:
        if self.count(text) <= max_tokens:
            return text
        key = (text, max_tokens)
        cut = self._cuts.get(key)
        if cut is None:
            cut = self._cuts[key] = self.base.truncate(text, max_tokens)
        return cut


# --------------------------------------------------------------------------- replay


@dataclass
class ModeTotals:
    """Sums over the calls of one mode."""

    history_tokens: int = 0
    request_tokens: int = 0
    history_messages: int = 0
    other_agent_messages: int = 0
    recalled: int = 0
    awareness_tokens: int = 0


@dataclass
class JudgeItem:
    """One reference with the provider messages of its scoped and full calls."""

    reference: Reference
    agent: str
    scoped: list[dict[str, Any]]
    full: list[dict[str, Any]]


@dataclass
class ReplayResult:
    """Everything a replay counted."""

    calls: int = 0
    references: int = 0
    beyond_window: int = 0
    modes: dict[str, ModeTotals] = field(default_factory=lambda: {mode: ModeTotals() for mode in MODES})
    by_via: Counter[str] = field(default_factory=Counter)
    labelled: int = 0  # user turns with a gold agent (predicted routes are scored on them)
    agreed: int = 0
    also_sees_calls: int = 0
    fixed_tokens: int = 0  # persona + rules + tools, summed over calls
    search_offered: int = 0  # calls offered search_memory (hub.context.offer)
    search_offered_window: int = 0  # ... of which the window was full
    search_offered_cue: int = 0  # ... of which the message refers to the past
    search_needed: int = 0  # calls whose scoped context misses a referenced message
    search_needed_offered: int = 0
    message_tokens: int = 0
    seconds: float = 0.0
    judge_items: list[JudgeItem] = field(default_factory=list)
    cache_model: CacheModel | None = None
    # Billed-equivalent figures per mode under the cache model (per-agent cache), and for
    # full history also under a per-scope cache (its best case): "full/scope".
    cache: dict[str, CacheTotals] = field(default_factory=dict)
    awareness_view: str = "interests"
    awareness_budget: int = DEFAULT_BUDGET
    awareness_events: int = 0  # dialogue.act events emitted
    awareness_blocks: int = 0  # calls shown a non-empty block
    awareness_events_shown: int = 0

    def summary(self) -> dict[str, Any]:
        """The JSON report: per-mode figures, savings against ``full``, router figures."""
        calls = max(self.calls, 1)
        full = self.modes["full"]
        modes: dict[str, Any] = {}
        for name, totals in self.modes.items():
            modes[name] = {
                "history_tokens_per_call": round(totals.history_tokens / calls, 1),
                "request_tokens_per_call": round(totals.request_tokens / calls, 1),
                "history_messages_per_call": round(totals.history_messages / calls, 2),
                "other_agent_messages_per_call": round(totals.other_agent_messages / calls, 2),
                "reference_recall": round(totals.recalled / self.references, 4) if self.references else None,
                "history_saving": round(1 - totals.history_tokens / full.history_tokens, 4) if full.history_tokens else 0.0,
                "awareness_tokens_per_call": round(totals.awareness_tokens / calls, 1),
                # History and awareness together against the full window's history.
                "history_awareness_saving": (
                    round(1 - (totals.history_tokens + totals.awareness_tokens) / full.history_tokens, 4) if full.history_tokens else 0.0
                ),
                "request_saving": round(1 - totals.request_tokens / full.request_tokens, 4) if full.request_tokens else 0.0,
            }
        report: dict[str, Any] = {
            "calls": self.calls,
            "references": self.references,
            "references_beyond_window": self.beyond_window,
            "fixed_tokens_per_call": round(self.fixed_tokens / calls, 1),
            "search_memory_offered_share": round(self.search_offered / calls, 4),
            "search_memory": {
                "offered": self.search_offered,
                "offered_window_full": self.search_offered_window,
                "offered_refers_to_past": self.search_offered_cue,
                "needed": self.search_needed,
                "needed_and_offered": self.search_needed_offered,
                "offered_when_needed": round(self.search_needed_offered / self.search_needed, 4) if self.search_needed else None,
            },
            "message_tokens_per_call": round(self.message_tokens / calls, 1),
            "router_tokens_per_message": 0,
            "modes": modes,
            "router": {
                "kind": "local",
                "router_tokens_per_message": 0,
                "by_via": dict(self.by_via),
                "agreement_with_gold": round(self.agreed / self.labelled, 4) if self.labelled else None,
                "also_sees_share": round(self.also_sees_calls / calls, 4),
            },
            "awareness": {
                "view": self.awareness_view,
                "budget": self.awareness_budget,
                "events": self.awareness_events,
                "block_share": round(self.awareness_blocks / calls, 4),
                "events_shown_per_call": round(self.awareness_events_shown / calls, 2),
            },
            "seconds": round(self.seconds, 2),
        }
        if self.cache_model is not None:
            report["cache"] = self._cache_summary()
        return report

    def _cache_summary(self) -> dict[str, Any]:
        """Per mode under the cache model: request, stable-prefix, cached, billed tokens; savings."""
        assert self.cache_model is not None
        figures = {label: totals.per_call() for label, totals in self.cache.items()}
        full, best = self.cache["full"], self.cache["full/scope"]
        for label, totals in self.cache.items():
            figures[label]["billed_saving_vs_full"] = round(1 - totals.billed_tokens / full.billed_tokens, 4) if full.billed_tokens else 0.0
            figures[label]["billed_saving_vs_full_per_scope"] = (
                round(1 - totals.billed_tokens / best.billed_tokens, 4) if best.billed_tokens else 0.0
            )
        return {"model": asdict(self.cache_model), "description": self.cache_model.describe(), "modes": figures}


ClassifierFor = Callable[[int], LocalClassifier]


def message_times(dialogues: Sequence[Dialogue], *, gap: float = 30.0, session_gap: float = 3600.0) -> list[float]:
    """When each message of a chained chat was sent: the dataset's timestamps where it has
    them, else ``gap`` seconds apart within a dialogue and ``session_gap`` between the
    dialogues of a chain (one customer's separate conversations)."""
    times: list[float] = []
    clock = 0.0
    for number, dialogue in enumerate(dialogues):
        for index, turn in enumerate(dialogue.turns):
            if turn.ts is not None:
                clock = turn.ts
            elif times:
                clock += session_gap if (number and index == 0) else gap
            times.append(clock)
    return times


def _message(
    index: int, scope: str, role: str, turn: Turn, agent: str, also: tuple[str, ...] = (), via: str | None = None, *, ts: float
) -> Message:
    return Message(id=index + 1, scope=scope, role=role, text=turn.text, ts=ts, agent=agent, also_sees=also, via=via, ext_id=turn.id)


def _chat_caches(result: ReplayResult) -> dict[str, PrefixCache]:
    """One simulated cache per mode for one chat (caches never span chats); sums go to ``result``."""
    model = result.cache_model
    if model is None:
        return {}
    variants = {mode: model for mode in MODES} | {"full/scope": replace(model, key="scope")}
    return {
        label: PrefixCache(variant, totals=result.cache.setdefault(label, CacheTotals()))
        for label, variant in variants.items()
    }


def _segments(
    stable_key: str, stable_tokens: int, shown: Sequence[Message], rendered: Sequence[dict[str, Any]],
    message_id: int, current: str, message_tokens: int, tokenizer: Tokenizer,
) -> list[Segment]:  # fmt: skip
    """A call as the cache model sees it: stable part, history messages, the message."""
    segments = [Segment(stable_key, stable_tokens, stable=True)]
    for message, item in zip(shown, rendered, strict=True):
        segments.append(
            Segment(f"{item['role']}\x00{item['content']}", tokenizer.count(item["content"]) + MESSAGE_OVERHEAD, shared=f"m{message.id}")
        )
    segments.append(Segment(f"user\x00{current}", message_tokens, shared=f"m{message_id}"))
    return segments


def replay(
    dialogues: Sequence[Dialogue],
    *,
    prompts: dict[str, AgentPrompt],
    classifier_for: ClassifierFor,
    tokenizer: Tokenizer,
    routes: str = "predicted",
    chain: int = 1,
    window: int = 40,
    tail: int = 4,
    default_also_sees: dict[str, tuple[str, ...]] | None = None,
    judge_limit: int = 0,
    show_progress: bool = False,
    cache_model: CacheModel | None = None,
    gap: float = 30.0,
    session_gap: float = 3600.0,
    awareness_view: str = "interests",
    awareness_budget: int = DEFAULT_BUDGET,
) -> ReplayResult:
    """Replay ``dialogues`` chained ``chain`` at a time; count every mode of every call.

    ``classifier_for(chain_index)`` gives the router of one chat (the evaluation trains a
    router per fold so that no chat is routed by a router that saw it). The awareness
    modes show every agent the block of ``awareness_view`` (see :data:`VIEWS`) within
    ``awareness_budget`` tokens.
    """
    if routes not in ("gold", "predicted"):
        raise ValueError("routes must be 'gold' or 'predicted'")
    counter = tokenizer if isinstance(tokenizer, CachingTokenizer) else CachingTokenizer(tokenizer)
    if awareness_view not in VIEWS:
        raise ValueError(f"awareness_view must be one of {', '.join(VIEWS)}")
    result = ReplayResult(cache_model=cache_model, awareness_view=awareness_view, awareness_budget=awareness_budget)
    started = time.perf_counter()
    chains = [dialogues[i : i + max(chain, 1)] for i in range(0, len(dialogues), max(chain, 1))]
    bar = _report.Progress(len(chains), "replay", enabled=show_progress)
    for number, group in enumerate(chains):
        turns = [turn for dialogue in group for turn in dialogue.turns]
        _replay_chat(
            turns,
            f"user:replay{number}",
            classifier_for(number),
            prompts,
            counter,
            result,
            routes=routes,
            window=window,
            tail=tail,
            default_also_sees=default_also_sees or {},
            judge_limit=judge_limit,
            times=message_times(group, gap=gap, session_gap=session_gap),
            awareness=AwarenessReplay(
                f"user:replay{number}", agents=prompts, tokenizer=counter, view=awareness_view, budget=awareness_budget
            ),
        )
        bar.advance()
    bar.close()
    result.seconds = time.perf_counter() - started
    return result


def replay_folds(dialogues: Sequence[Dialogue], *, folds: int, chain: int, classifier_for: ClassifierFor, **options: Any) -> list[ReplayResult]:
    """:func:`replay` over ``folds`` disjoint sets of chats (chat number modulo ``folds``),
    each chat keeping its own router: the spread of the figures over parts of the data."""
    size = max(chain, 1)
    chains = [dialogues[i : i + size] for i in range(0, len(dialogues), size)]
    results = []
    for fold in range(folds):
        numbers = [number for number in range(len(chains)) if number % folds == fold]
        part = [dialogue for number in numbers for dialogue in chains[number]]
        results.append(
            replay(part, chain=size, classifier_for=lambda local, numbers=numbers: classifier_for(numbers[local]), **options)
        )
    return results


def merge_results(results: Sequence[ReplayResult]) -> ReplayResult:
    """One result summing several (the pooled figures of :func:`replay_folds`)."""
    first = results[0] if results else ReplayResult()
    merged = ReplayResult(
        cache_model=first.cache_model, awareness_view=first.awareness_view, awareness_budget=first.awareness_budget
    )
    for result in results:
        # Every count (search offers, awareness events and blocks too), never the settings.
        for item in fields(ReplayResult):
            value = getattr(result, item.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and item.name != "awareness_budget":
                setattr(merged, item.name, getattr(merged, item.name) + value)
        merged.by_via.update(result.by_via)
        merged.judge_items.extend(result.judge_items)
        for mode, totals in result.modes.items():
            target = merged.modes[mode]
            for item in fields(ModeTotals):
                setattr(target, item.name, getattr(target, item.name) + getattr(totals, item.name))
        for label, totals in result.cache.items():
            into = merged.cache.setdefault(label, CacheTotals())
            for item in fields(CacheTotals):
                setattr(into, item.name, getattr(into, item.name) + getattr(totals, item.name))
    return merged


def fold_figures(results: Sequence[ReplayResult]) -> dict[str, Any]:
    """Mean ± sd and min–max over folds of the scoped mode's reference recall and savings."""
    from .routing import spread

    summaries = [result.summary() for result in results]
    scoped = [summary["modes"]["scoped"] for summary in summaries]
    aware = [summary["modes"]["scoped_awareness"] for summary in summaries]
    return {
        "scoped_reference_recall": spread([m["reference_recall"] for m in scoped if m["reference_recall"] is not None]),
        "scoped_history_saving": spread([m["history_saving"] for m in scoped]),
        "scoped_awareness_reference_recall": spread([m["reference_recall"] for m in aware if m["reference_recall"] is not None]),
        "history_awareness_saving": spread([m["history_awareness_saving"] for m in aware]),
        "awareness_tokens_per_call": spread([m["awareness_tokens_per_call"] for m in aware]),
        "scoped_no_also_reference_recall": spread(
            [s["modes"]["scoped_no_also"]["reference_recall"] for s in summaries if s["modes"]["scoped_no_also"]["reference_recall"] is not None]
        ),
        "router_agreement": spread([s["router"]["agreement_with_gold"] for s in summaries if s["router"]["agreement_with_gold"] is not None]),
    }


def _replay_chat(
    turns: list[Turn],
    scope: str,
    classifier: LocalClassifier,
    prompts: dict[str, AgentPrompt],
    tokenizer: CachingTokenizer,
    result: ReplayResult,
    *,
    routes: str,
    window: int,
    tail: int,
    default_also_sees: dict[str, tuple[str, ...]],
    judge_limit: int,
    times: list[float] | None = None,
    awareness: AwarenessReplay | None = None,
) -> None:
    aware = awareness or AwarenessReplay(scope, agents=prompts, tokenizer=tokenizer)
    references, beyond = find_references(turns, window=window)
    caches = _chat_caches(result)
    times = times or [index * 30.0 for index in range(len(turns))]
    result.beyond_window += beyond
    history: list[Message] = []
    handler: str | None = None
    for index, turn in enumerate(turns):
        if turn.role != "user":
            # A system turn is the reply of whoever handled the user turn before it.
            author = handler or (turn.agents[0] if turn.agents and turn.agents[0] in prompts else GENERAL)
            history.append(_message(index, scope, "agent", turn, author, ts=times[index]))
            # Its annotated acts are the events its author emits (eval.awareness_replay).
            result.awareness_events += len(aware.emit(turn.acts, agent=author, ts=history[-1].ts, message_id=history[-1].id))
            continue
        recent = history[-window:] if window > 0 else []
        gold = turn.agents[0] if turn.agents and turn.agents[0] in prompts else None
        if routes == "gold":
            agent = gold or handler or GENERAL
            also = tuple(a for a in turn.also_sees if a in prompts and a != agent) or predict_also_sees(
                turn.text, agent, recent, classifier, tail=tail
            )
            also = tuple(dict.fromkeys((*default_also_sees.get(agent, ()), *also)))
            via = "gold"
        else:
            decision = route(turn.text, classifier=classifier, window=recent, tail=tail, default_also_sees=default_also_sees)
            agent, also, via = decision.agent, decision.also_sees, decision.via
        if agent not in prompts:
            agent = GENERAL
        also = tuple(a for a in also if a != agent)
        result.by_via[via] += 1
        if turn.agents:
            result.labelled += 1
            result.agreed += agent in turn.agents
        result.calls += 1
        result.also_sees_calls += bool(also)
        turn_refs = references.get(index, [])
        result.references += len(turn_refs)
        # The hub's block for this call, at the message's time: what the history already
        # holds is not repeated, and earlier events come back while the talk names them.
        talk = [m.text for m in (recent[-tail:] if tail > 0 else [])] + [turn.text]
        since = recent[0].id if recent else None
        shown = aware.block(agent, now=times[index], visible=_visible(recent, agent, also, window, tail), talk=talk, since_message=since)
        # The mode without also_sees has a shorter history, so its block may repeat less.
        shown_no_also = (
            shown if not also else aware.block(agent, now=times[index], visible=_visible(recent, agent, (), window, tail), talk=talk, since_message=since)
        )
        result.awareness_blocks += bool(shown.text)
        result.awareness_events_shown += shown.events_shown
        _count_call(turn, agent, also, history, recent, turn_refs, prompts[agent], tokenizer, result, window=window, tail=tail, judge_limit=judge_limit, awareness=shown.text, awareness_no_also=shown_no_also.text, caches=caches, now=times[index], message_id=index + 1)
        aware.record(agent, shown)  # the call is recorded: the cursor moves
        handler = agent
        history.append(_message(index, scope, "user", turn, agent, also, via, ts=times[index]))


def _visible(recent: Sequence[Message], agent: str, also: Sequence[str], window: int, tail: int) -> frozenset[int]:
    """Ids of the messages a scoped call's history holds (events they caused are not repeated)."""
    return frozenset(m.id for m in select_history(recent, agent, also, window=window, tail=tail))


def _count_call(
    turn: Turn,
    agent: str,
    also: tuple[str, ...],
    history: list[Message],
    recent: list[Message],
    refs: list[Reference],
    prompt: AgentPrompt,
    tokenizer: CachingTokenizer,
    result: ReplayResult,
    *,
    window: int,
    tail: int,
    judge_limit: int,
    caches: dict[str, PrefixCache] | None = None,
    now: float = 0.0,
    message_id: int = 0,
    awareness: str = "",
    awareness_no_also: str | None = None,
) -> None:
    """Build the call in every mode with the real context builder and add up its figures."""
    # One tool offer per call, decided as the hub decides it, for every mode alike.
    offer = bool(prompt.optional_tools) and (prompt.always_optional or wants_archive(turn.text, len(recent), window))
    result.search_offered += offer
    result.search_offered_window += bool(prompt.optional_tools) and window > 0 and len(recent) >= window
    result.search_offered_cue += bool(prompt.optional_tools) and refers_to_past(turn.text)
    scoped = build_context(
        prompt, recent, turn.text, tokenizer=tokenizer, also_sees=also, window=window, tail=tail, offer_optional=offer
    )
    fixed = scoped.stable_tokens + scoped.tokens["facts"]
    result.fixed_tokens += fixed
    result.message_tokens += scoped.tokens["message"]
    no_also = (
        scoped
        if not also
        else build_context(prompt, recent, turn.text, tokenizer=tokenizer, window=window, tail=tail, offer_optional=offer)
    )
    tail_messages = history[-tail:] if tail > 0 else []
    allowed = {agent, *also}
    # The pitfall: filter the whole history by tag first, window after.
    filtered = [m for m in history if m.agent in allowed][-window:] if window > 0 else []
    first_ids = {m.id for m in filtered} | {m.id for m in tail_messages}
    filter_first = [m for m in history if m.id in first_ids]
    needed = {source for ref in refs for source in ref.sources}
    tail_ids = {m.id for m in tail_messages}
    oracle = [m for m in recent if m.ext_id in needed or m.id in tail_ids]
    selections: dict[str, tuple[list[Message], int, int]] = {}
    full_history = scoped.full_history_tokens - (scoped.tokens["total"] - scoped.tokens["history"])
    selections["full"] = (list(recent[-window:]) if window > 0 else [], full_history, scoped.full_history_tokens)
    selections["scoped_no_also"] = (list(no_also.history), no_also.tokens["history"], no_also.tokens["total"])
    selections["scoped"] = (list(scoped.history), scoped.tokens["history"], scoped.tokens["total"])
    for mode, chosen in (("filter_first", filter_first), ("oracle", oracle)):
        # Already selected: hand the builder exactly these (window and tail cover them all).
        built = build_context(
            prompt, chosen, turn.text, tokenizer=tokenizer, window=len(chosen), tail=len(chosen), offer_optional=offer
        )
        selections[mode] = (chosen, built.tokens["history"], built.tokens["total"])
    if caches:
        stable_key = stable_prefix(scoped)
        message_part = scoped.tokens["message"]
        for mode, (messages, _, request_tokens) in selections.items():
            shown = [m for m in messages if m.via != "command"]
            rendered = render_history(shown, agent, tokenizer=tokenizer, max_tokens=1000)
            segments = _segments(stable_key, scoped.stable_tokens, shown, rendered, message_id, turn.text, message_part, tokenizer)
            # The segments are the request the builder counted, to the token.
            assert sum(seg.tokens for seg in segments) == request_tokens, (mode, request_tokens)
            caches[mode].bill(agent, segments, now)
            if mode == "full":
                caches["full/scope"].bill(agent, segments, now)
    blocks = {"scoped_awareness": awareness, "awareness_no_also": awareness if awareness_no_also is None else awareness_no_also}
    selections.update(
        awareness_selections(prompt, recent, turn.text, tokenizer=tokenizer, also_sees=also, awareness=blocks, window=window, tail=tail)
    )
    for mode, (messages, history_tokens, request_tokens) in selections.items():
        totals = result.modes[mode]
        aware = mode in AWARENESS_MODES
        block = blocks.get(mode, "")
        said = f" {normalize_value(block)} " if block else ""
        totals.history_tokens += history_tokens
        totals.request_tokens += request_tokens
        totals.awareness_tokens += tokenizer.count(block) if block else 0
        totals.history_messages += len(messages)
        totals.other_agent_messages += sum(1 for m in messages if m.agent != agent)
        if refs:
            present = {m.ext_id for m in messages}
            totals.recalled += sum(
                1
                for ref in refs
                if present.intersection(ref.sources) or (aware and ref.slot != "needs" and f" {ref.value} " in said)
            )
    # search_memory is needed when the scoped context misses what the answer refers to.
    shown = {m.ext_id for m in scoped.history}
    if any(not shown.intersection(ref.sources) for ref in refs):
        result.search_needed += 1
        result.search_needed_offered += offer
    if refs and len(result.judge_items) < judge_limit:
        window_messages = list(recent[-window:])
        full = build_context(
            prompt, window_messages, turn.text, tokenizer=tokenizer, window=len(window_messages),
            tail=len(window_messages), offer_optional=offer,
        )
        for ref in refs:
            if len(result.judge_items) < judge_limit:
                result.judge_items.append(JudgeItem(ref, agent, scoped.messages, full.messages))


# --------------------------------------------------------------------------- datasets


@dataclass
class Prepared:
    """A dataset ready to replay: dialogues, agents' prompts and the router per chat."""

    dialogues: list[Dialogue]
    prompts: dict[str, AgentPrompt]
    classifier_for: ClassifierFor
    default_also_sees: dict[str, tuple[str, ...]]
    agents: list[str]


def load_dialogues(fmt: str, path: str) -> tuple[list[Dialogue], dict[str, str]]:
    """Dialogues of PATH and the agent descriptions its dataset provides."""
    from .loaders import load_jsonl, load_multiwoz, load_sgd, load_sgd_schema
    from .routing import slot_descriptions

    if fmt == "multiwoz":
        dialogues = load_multiwoz(path)
        return dialogues, slot_descriptions(dialogues)
    if fmt == "sgd":
        dialogues = load_sgd(path)
        descriptions = slot_descriptions(dialogues)
        # A lone dialogue file without its schema: slot names describe the domains.
        with contextlib.suppress(FileNotFoundError, ValueError):
            descriptions.update(load_sgd_schema(path))
        return dialogues, descriptions
    if fmt == "jsonl":
        return load_jsonl(path), {}
    raise ValueError(f"unknown format {fmt!r}")


def prepare(
    fmt: str,
    path: str,
    *,
    chain: int,
    limit: int | None = None,
    train_path: str | None = None,
    per_agent: int = 50,
) -> Prepared:
    """Load PATH and build the agents and routers for a replay.

    The predicted router's examples come from ``train_path`` when given; otherwise the
    chats are split in two folds by position and each fold is routed by a router whose
    examples come from the other fold (cross-fitting: no turn is routed by a router that
    was shown it, and every dialogue is still replayed).
    """
    from .routing import build_profiles, dialogue_examples, general_profile

    dialogues, descriptions = load_dialogues(fmt, path)
    if limit:
        dialogues = dialogues[:limit]
    agents = {a for d in dialogues for t in d.turns for a in (*t.agents, *t.also_sees)} | {GENERAL}
    prompts, specs = agent_prompts(agents, descriptions)
    descriptions = {name: spec.description for name, spec in specs.items()}
    keywords = {name: spec.keywords for name, spec in specs.items()}
    default_also_sees = {name: spec.also_sees for name, spec in specs.items() if spec.also_sees}
    size = max(chain, 1)
    chains = [dialogues[i : i + size] for i in range(0, len(dialogues), size)]

    def classifier(train: Iterable[Dialogue]) -> LocalClassifier:
        examples = dialogue_examples(train, per_agent=per_agent)
        domain_agents = sorted(a for a in agents if a != GENERAL)
        general_examples = list(specs[GENERAL].examples) if GENERAL in specs else []
        profiles = build_profiles(domain_agents, descriptions, examples, keywords=keywords)
        return LocalClassifier([*profiles, general_profile(general_examples)])

    if train_path:
        trained, _ = load_dialogues(fmt, train_path)
        shared = classifier(trained)
        return Prepared(dialogues, prompts, lambda _: shared, default_also_sees, sorted(agents))
    folds = [
        classifier(d for number, group in enumerate(chains) if number % 2 != fold for d in group) for fold in (0, 1)
    ]
    return Prepared(dialogues, prompts, lambda number: folds[(number % 2)], default_also_sees, sorted(agents))


# --------------------------------------------------------------------------- output


_MODE_LABELS = {
    "full": "full (window)",
    "scoped_no_also": "scoped, no also_sees",
    "scoped": "scoped",
    "filter_first": "filter first (pitfall)",
    "oracle": "oracle",
    "scoped_awareness": "scoped + awareness",
    "awareness_no_also": "awareness, no also_sees",
}


_CACHE_LABELS = {"full": "full, per-agent cache", "full/scope": "full, per-scope cache"}


def print_summary(report: dict[str, Any]) -> None:
    """The per-mode table and the router line."""
    rows = []
    for mode in MODES:
        figures = report["modes"][mode]
        rows.append(
            [
                _MODE_LABELS[mode],
                figures["history_tokens_per_call"],
                _report.pct(figures["history_saving"]) if mode != "full" else "-",
                figures["request_tokens_per_call"],
                _report.pct(figures["request_saving"]) if mode != "full" else "-",
                figures["other_agent_messages_per_call"],
                _report.pct(figures["reference_recall"]),
                figures["awareness_tokens_per_call"] if mode in AWARENESS_MODES else "-",
                _report.pct(figures["history_awareness_saving"]) if mode in AWARENESS_MODES else "-",
            ]
        )
    data = report.get("dataset", {})
    title = (
        f"Token replay: {data.get('format', '?')} {data.get('dialogues', '?')} dialogues, chain {data.get('chain', '?')}, "
        f"{data.get('routes', '?')} routes, window {data.get('window', '?')}, tail {data.get('tail', '?')}; "
        f"{report['calls']:,} calls, {report['references']:,} references"
    )
    click.echo(
        _report.format_table(
            [
                "mode", "history tok/call", "saving", "request tok/call", "saving", "other-agent msgs/call", "ref. recall",
                "awareness tok/call", "history+awareness saving",
            ],
            rows,
            title=title,
        )
    )
    router = report["router"]
    agreement = router["agreement_with_gold"]
    click.echo(
        f"\nfixed prompt {report['fixed_tokens_per_call']:.0f} tok/call (search_memory offered on "
        f"{_report.pct(report['search_memory_offered_share'])} of calls); router: local, 0 tokens/message"
        + (f", agrees with gold on {_report.pct(agreement)} of labelled turns" if agreement is not None else "")
        + f", also_sees on {_report.pct(router['also_sees_share'])} of calls"
        + f"; {report['references_beyond_window']} references only beyond the window (search_memory)"
    )
    search = report["search_memory"]
    if search["needed"]:
        click.echo(
            f"search_memory offered on {search['needed_and_offered']} of the {search['needed']} calls whose scoped "
            f"context misses a referenced message ({_report.pct(search['offered_when_needed'])})"
        )
    cache = report.get("cache")
    if cache:
        rows = []
        labels = [*MODES[:1], "full/scope", *MODES[1:]]
        for label in labels:
            figures = cache["modes"][label]
            if not figures["request_tokens_per_call"]:
                continue  # a mode the cache model does not bill (the awareness modes)
            rows.append(
                [
                    _CACHE_LABELS.get(label, _MODE_LABELS.get(label, label)),
                    figures["request_tokens_per_call"],
                    figures["stable_prefix_tokens_per_call"],
                    _report.pct(figures["cached_share"]),
                    figures["billed_tokens_per_call"],
                    _report.pct(figures["billed_saving_vs_full"]) if label != "full" else "-",
                    _report.pct(figures["billed_saving_vs_full_per_scope"]) if label != "full/scope" else "-",
                ]
            )
        click.echo(
            "\n"
            + _report.format_table(
                ["mode", "request tok/call", "stable prefix", "cached", "billed-equiv. tok/call", "vs full", "vs full, per-scope cache"],
                rows,
                title=f"Billed-equivalent input under the cache model: {cache['description']}",
            )
        )
    aware = report.get("awareness")
    if aware:
        click.echo(
            f"awareness: view '{aware['view']}', budget {aware['budget']} tokens; {aware['events']:,} dialogue.act events; "
            f"a block on {_report.pct(aware['block_share'])} of calls, {aware['events_shown_per_call']:.2f} events shown per call"
        )
    judge = report.get("judge")
    if judge:
        click.echo(
            f"judge ({judge['model']}): scoped {judge['scoped_correct']}/{judge['asked']}, "
            f"full {judge['full_correct']}/{judge['asked']} exact matches"
        )


def _token_spread(figure: dict[str, Any]) -> str:
    """``26.1 ± 1.7 (23.2–27.4, 5 folds)`` for a spread of tokens per call."""
    if not figure.get("folds"):
        return "-"
    return f"{figure['mean']:.1f} ± {figure['sd']:.1f} ({figure['min']:.1f}–{figure['max']:.1f}, {figure['folds']} folds)"


@click.command("tokens")
@click.option("--format", "fmt", type=click.Choice(["multiwoz", "sgd", "jsonl"]), required=True, help="dataset format of PATH")
@click.argument("path", type=click.Path(exists=True))
@click.option("--chain", type=int, default=None, help="dialogues in a row forming one customer's chat [default: 3; 1 for jsonl]")
@click.option("--routes", type=click.Choice(["gold", "predicted"]), default="predicted", show_default=True, help="dataset labels or the local router")
@click.option("--limit", type=int, default=None, help="replay only the first N dialogues")
@click.option("--window", default=40, show_default=True, help="HUB_WINDOW: recent messages before the tag filter")
@click.option("--tail", default=4, show_default=True, help="HUB_TAIL: last messages every agent sees")
@click.option("--train", "train_path", type=click.Path(exists=True), default=None, help="examples for the predicted router (default: cross-fitted from PATH)")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="write the report as JSON here")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False), default=None, help="write PNG charts here (needs matplotlib)")
@click.option("--judge", is_flag=True, help="ask the configured model (HUB_MODEL) for each referenced value, scoped vs full")
@click.option("--judge-limit", default=100, show_default=True, help="references the judge asks about (0: all)")
@click.option("--awareness-view", type=click.Choice(sorted(VIEWS)), default="interests", show_default=True, help="what every agent declares for the awareness modes: interest in dialogue.act events, all other agents as collaborators, or both")
@click.option("--awareness-tokens", type=click.IntRange(0, 5_000), default=DEFAULT_BUDGET, show_default=True, envvar="HUB_AWARENESS_TOKENS", help="HUB_AWARENESS_TOKENS: budget of the awareness block")
@click.option("--folds", default=0, show_default=True, help="replay K disjoint parts of the chats: mean ± sd and min–max of recall and saving")
@click.option("--quiet", is_flag=True, help="no progress on stderr")
@click.option(
    "--cache",
    "cache_provider",
    type=click.Choice(["openai", "anthropic", "none"]),
    default="openai",
    show_default=True,
    help="prompt-cache model for billed-equivalent tokens: the provider's defaults (see eval/cache.py)",
)
@click.option("--min-prefix", type=int, default=None, help="shortest cacheable prefix in tokens [openai, anthropic: 1024]")
@click.option("--ttl", type=float, default=None, help="seconds a cache entry lives unused [300]")
@click.option("--cached-price", type=float, default=None, help="price of a cached input token, as a fraction [openai 0.5, anthropic 0.1]")
@click.option("--write-price", type=float, default=None, help="price of a token written to the cache [openai 1.0, anthropic 1.25]")
@click.option("--end-mark/--no-end-mark", default=None, help="anthropic: a breakpoint at the request's end too, not only after the stable part")
@click.option("--gap", type=float, default=30.0, show_default=True, help="seconds between messages when the dataset has no timestamps")
@click.option("--session-gap", type=float, default=3600.0, show_default=True, help="seconds between the chained dialogues of one chat")
def tokens_command(
    fmt: str,
    path: str,
    chain: int | None,
    routes: str,
    limit: int | None,
    window: int,
    tail: int,
    train_path: str | None,
    json_out: str | None,
    plots_dir: str | None,
    judge: bool,
    judge_limit: int,
    awareness_view: str,
    awareness_tokens: int,
    folds: int,
    quiet: bool,
    cache_provider: str,
    min_prefix: int | None,
    ttl: float | None,
    cached_price: float | None,
    write_price: float | None,
    end_mark: bool | None,
    gap: float,
    session_gap: float,
) -> None:
    """Replay a dataset through the router and context builder; tokens, billed-equivalent
    tokens under a prompt-cache model, and reference recall per mode."""
    from .cache import preset

    cache_model = (
        None
        if cache_provider == "none"
        else preset(
            cache_provider, min_prefix=min_prefix, ttl=ttl, read_price=cached_price, write_price=write_price, mark_end=end_mark
        )
    )
    from scopehub.hub.context.tokens import get_tokenizer

    model = None
    if judge:
        from .judge import model_from_settings

        model = model_from_settings()  # fails before the long replay when no model is configured
    if plots_dir:
        from .plots import require_matplotlib

        require_matplotlib()
    chain = chain if chain is not None else (1 if fmt == "jsonl" else 3)
    prepared = prepare(fmt, path, chain=chain, limit=limit, train_path=train_path)
    if not quiet:
        click.echo(f"replaying {len(prepared.dialogues)} dialogues, {len(prepared.agents)} agents", err=True)
    options: dict[str, Any] = {
        "prompts": prepared.prompts,
        "tokenizer": get_tokenizer(),
        "routes": routes,
        "window": window,
        "tail": tail,
        "default_also_sees": prepared.default_also_sees,
        "judge_limit": (judge_limit or 10**9) if judge else 0,
        "show_progress": not quiet,
        "cache_model": cache_model,
        "gap": gap,
        "session_gap": session_gap,
        "awareness_view": awareness_view,
        "awareness_budget": awareness_tokens,
    }
    fold_results: list[ReplayResult] = []
    if folds > 1:
        # The parts together are the whole replay: pooled figures come from their sum.
        fold_results = replay_folds(prepared.dialogues, folds=folds, chain=chain, classifier_for=prepared.classifier_for, **options)
        result = merge_results(fold_results)
    else:
        result = replay(prepared.dialogues, classifier_for=prepared.classifier_for, chain=chain, **options)
    report: dict[str, Any] = {
        "dataset": {
            "format": fmt,
            "path": str(path),
            "dialogues": len(prepared.dialogues),
            "chain": chain,
            "routes": routes,
            "window": window,
            "tail": tail,
            "agents": prepared.agents,
            "gap_s": gap,
            "session_gap_s": session_gap,
        },
        **result.summary(),
    }
    if fold_results:
        report["folds"] = fold_figures(fold_results)
    if judge and model is not None:
        from .judge import run_judge

        report["judge"] = run_judge(result.judge_items, model, show_progress=not quiet)
    print_summary(report)
    if fold_results:
        from .routing import format_spread

        figures = report["folds"]
        click.echo(
            _report.format_table(
                ["scoped mode, over folds", "mean ± sd (min–max)"],
                [
                    ["reference recall", format_spread(figures["scoped_reference_recall"])],
                    ["history saving", format_spread(figures["scoped_history_saving"])],
                    ["recall without also_sees", format_spread(figures["scoped_no_also_reference_recall"])],
                    ["scoped + awareness: reference recall", format_spread(figures["scoped_awareness_reference_recall"])],
                    ["scoped + awareness: history+awareness saving", format_spread(figures["history_awareness_saving"])],
                    ["awareness tokens per call", _token_spread(figures["awareness_tokens_per_call"])],
                    ["router agrees with gold", format_spread(figures["router_agreement"])],
                ],
                title=f"\nCross-validation: {folds} disjoint parts of the chats",
            )
        )
    if json_out:
        _report.write_json(json_out, report)
        click.echo(f"wrote {json_out}")
    if plots_dir:
        from .plots import plot_replay

        for written in plot_replay(report, plots_dir):
            click.echo(f"wrote {written}")

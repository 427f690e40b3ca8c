"""The replay itself: each chat routed message by message, each call built in every mode."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

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
from scopehub.hub.routing.cascade import opens_session
from scopehub.memory import Message

from .. import _report
from ..awareness_replay import (
    AWARENESS_MODES,
    DEFAULT_BUDGET,
    VIEWS,
    AwarenessReplay,
    awareness_selections,
)
from ..cache import CacheModel, CacheTotals, PrefixCache, Segment
from ..judge import JudgeItem
from ..loaders import Dialogue, Turn
from ..references import Reference, find_references, normalize_value
from .agents import CachingTokenizer
from .result import MODES, ReplayResult

GENERAL = DEFAULT_AGENT


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
            dialogue_of=[dialogue.id for dialogue in group for _ in dialogue.turns],
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
    dialogue_of: Sequence[str] | None = None,
) -> None:
    aware = awareness or AwarenessReplay(scope, agents=prompts, tokenizer=tokenizer)
    excluded: Counter[str] = Counter()
    references, beyond = find_references(turns, window=window, dialogues=dialogue_of, excluded=excluded)
    result.references_own_agent += excluded["own_agent"]
    result.references_other_dialogue += excluded["other_dialogue"]
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
                turn.text, agent, recent, classifier, tail=tail, new_session=opens_session(recent, times[index])
            )
            also = tuple(dict.fromkeys((*default_also_sees.get(agent, ()), *also)))
            via = "gold"
        else:
            decision = route(turn.text, classifier=classifier, window=recent, tail=tail, default_also_sees=default_also_sees, now=times[index])
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

"""Reflection: distill older episodes into knowledge fragments that archive search finds.

A background job (daily by default, per scope) takes the messages and events older
than ``HUB_REFLECT_AFTER_DAYS`` that were not reflected yet, cuts them into episodes
(a pause of more than ``EPISODE_GAP_S``, or ``EPISODE_ITEMS`` items), and turns each
episode into a few fragments of 1–2 sentences with an importance in 0..1 and the ids of
their sources: by the model (checked like digest lines) or, without one, extractively
(the episode's most salient sentences). Fragments are vault items of kind ``knowledge``:
``search_memory`` finds them, ranked by relevance weighted by importance.

It runs under the scope's ``reflect`` claim, renewed while the run goes on, so two
workers never reflect one scope at once; each episode's fragments and the watermark move
in one transaction, the watermark by a compare-and-set, so neither a crash nor a second
run that got the claim anyway (its clock ahead, the first one's loop blocked past the
TTL) ever keeps an episode twice. Fail-open: a model failure stops the run where it is
(the next run resumes there) and nothing else is affected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from zoneinfo import ZoneInfo

from scopehub.hub.dbwork import in_db_thread
from scopehub.hub.digest.compaction import check_items, parse_items, reflection_messages
from scopehub.hub.digest.extractive import speaker
from scopehub.hub.digest.service import REFLECT_CLAIM, BackgroundMemoryJob
from scopehub.hub.digest.text import Salience, SourceText, content_words, date_label, sentences
from scopehub.memory import (
    ClaimLease,
    ClaimLost,
    Event,
    Message,
    ReflectionState,
    add_knowledge,
    events_after,
    get_reflection,
    save_reflection,
    summarize_event,
)

__all__ = ["Fragment", "ReflectReport", "Reflector", "extractive_fragments"]

log = logging.getLogger(__name__)

EPISODE_GAP_S = 3 * 3600  # a pause this long starts a new episode
EPISODE_ITEMS = 40  # messages and events per episode at most
FRAGMENT_EVERY = 12  # about one fragment per this many items of an episode
MAX_FRAGMENTS = 3  # per episode
MAX_ITEMS = 5000  # messages (and as many events) per run; the next run goes on
IMPORTANCE_HALF = 4.0  # the salience that maps to importance 0.5 (extractive)
SHORT_SENTENCE = 10  # words: a sentence this short takes its message's next sentence along
STATS_MESSAGES = 2000


class _Overtaken(ClaimLost):
    """Another worker reflected the episode this run was about to keep."""


@dataclass(frozen=True, slots=True)
class Fragment:
    """A fragment about to be kept."""

    text: str
    importance: float
    messages: tuple[int, ...]
    events: tuple[int, ...]
    ts: float


@dataclass
class ReflectReport:
    """What one reflection run did in a scope."""

    scope: str
    outcome: str  # off | busy | nothing | reflected | failed
    fragments: int = 0
    episodes: int = 0
    messages: int = 0
    events: int = 0
    reason: str = ""
    usage: dict[str, int] = field(default_factory=dict)


def _episodes(messages: Sequence[Message], events: Sequence[Event]) -> list[tuple[list[Message], list[Event]]]:
    items: list[tuple[float, int, Message | Event]] = [(m.ts, 0, m) for m in messages] + [(e.ts, 1, e) for e in events]
    items.sort(key=lambda item: (item[0], item[1], item[2].id))
    episodes: list[tuple[list[Message], list[Event]]] = []
    last_ts: float | None = None
    for ts, _, item in items:
        if not episodes or (last_ts is not None and ts - last_ts > EPISODE_GAP_S) or sum(map(len, episodes[-1])) >= EPISODE_ITEMS:
            episodes.append(([], []))
        (episodes[-1][0] if isinstance(item, Message) else episodes[-1][1]).append(item)  # type: ignore[arg-type]
        last_ts = ts
    return episodes


def extractive_fragments(
    messages: Sequence[Message], events: Sequence[Event], salience: Salience, zone: ZoneInfo
) -> list[Fragment]:
    """An episode's most salient sentences as fragments, with no model call."""
    candidates: list[tuple[float, str, Message | Event]] = []
    for message in messages:
        if message.via == "command":
            continue
        parts = sentences(message.text)
        for index, sentence in enumerate(parts):
            score = salience.score(sentence)
            if score <= 0:
                continue
            text = sentence
            if len(sentence.split()) < SHORT_SENTENCE and index + 1 < len(parts):
                text = f"{sentence} {parts[index + 1]}"  # 1-2 sentences that stand alone
            candidates.append((score, text, message))
    for event in events:
        summary = summarize_event(event)
        score = salience.score(summary)
        if score > 0:
            candidates.append((score, summary, event))
    wanted = min(MAX_FRAGMENTS, max(1, round((len(messages) + len(events)) / FRAGMENT_EVERY)))
    chosen: list[Fragment] = []
    seen: list[set[str]] = []
    for score, text, source in sorted(candidates, key=lambda item: -item[0]):
        words = content_words(text)
        if any(len(words & other) >= 0.6 * min(len(words), len(other)) for other in seen if other and words):
            continue
        seen.append(words)
        who = speaker(source) if isinstance(source, Message) else f"{source.agent} agent"
        chosen.append(
            Fragment(
                text=f"{date_label(source.ts, zone)}, {who}: {text}",
                importance=round(score / (score + IMPORTANCE_HALF), 3),
                messages=(source.id,) if isinstance(source, Message) else (),
                events=(source.id,) if isinstance(source, Event) else (),
                ts=source.ts,
            )
        )
        if len(chosen) >= wanted:
            break
    return chosen


class Reflector(BackgroundMemoryJob):
    """Distills a scope's older episodes into knowledge fragments, under the scope's claim."""

    job = "reflection"

    async def reflect_due(self, holder: str, *, now: float | None = None) -> list[ReflectReport]:
        """Reflect every scope whose last run is ``HUB_REFLECT_EVERY_HOURS`` old; never raises."""
        every = self.settings.reflect_every_hours * 3600
        if every <= 0:
            return []
        now = self.clock() if now is None else now
        reports = []
        # Every read off the event loop where the store waits on the network: with 10,000
        # scopes the due checks alone held the worker's other chats for as many round trips.
        for scope in await in_db_thread(self.store, self.store.scopes):
            try:
                if now - (await in_db_thread(self.store, get_reflection, self.store, scope)).last_run < every:
                    continue
                reports.append(await self.reflect(scope, holder, now=now))
            except Exception:
                log.exception("reflection failed for %s; nothing else was affected", scope)
        return reports

    async def reflect(self, scope: str, holder: str, *, now: float | None = None) -> ReflectReport:
        """Distill the scope's unreflected messages and events older than ``HUB_REFLECT_AFTER_DAYS``.

        Under the scope's ``reflect`` claim, renewed while the run goes on (a long run on a
        slow model outlasts any TTL fixed in advance); each episode's fragments are kept
        only where the watermark is still where this run read it (a compare-and-set), so
        a second run that got the claim anyway never keeps an episode twice.
        """
        now = self.clock() if now is None else float(now)
        offset = now - self.clock()  # a run "as of" another time keeps its claim on that clock
        lease = ClaimLease(
            self.store,
            scope,
            REFLECT_CLAIM,
            holder,
            note="hub: reflecting on older messages",
            ttl=self.settings.claim_ttl,
            clock=lambda: self.clock() + offset,
            run=partial(in_db_thread, self.store),
        )
        async with lease:
            if not lease.held:
                log.info("reflection of %s is held by another worker; skipping", scope)
                return ReflectReport(scope, "busy")
            return await self._reflect(scope, now, lease)

    def _older(self, scope: str, cutoff: float) -> tuple[ReflectionState, list[Message], list[Event]]:
        """The watermark as read, and the messages and events after it older than ``cutoff``.

        The episodes and the compare-and-set's expected watermark come from this one read:
        read again later, the watermark could have moved past episodes this run still
        holds (another worker kept them meanwhile), and the run would keep them twice.
        """
        state = get_reflection(self.store, scope)
        messages: list[Message] = []
        for message in self.store.messages(scope, after=state.message_upto, limit=MAX_ITEMS):
            if message.ts >= cutoff:  # the watermark is an id: stop at the first recent one
                break
            messages.append(message)
        events: list[Event] = []
        for event in events_after(self.store, scope, state.event_upto, limit=MAX_ITEMS):
            if event.ts >= cutoff:
                break
            events.append(event)
        return state, messages, events

    async def _reflect(self, scope: str, now: float, lease: ClaimLease) -> ReflectReport:
        cutoff = now - self.settings.reflect_after_days * 86400
        mark, messages, events = await in_db_thread(self.store, self._older, scope, cutoff)
        usage = {"model_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        report = ReflectReport(scope, "nothing", messages=len(messages), events=len(events), usage=usage)
        if messages or events:
            report.outcome = "reflected"
            up_to = messages[-1].id if messages else None
            recent = await in_db_thread(self.store, partial(self.store.window, up_to=up_to), scope, STATS_MESSAGES)
            salience = Salience().add(m.text for m in recent)
            for episode_messages, episode_events in _episodes(messages, events):
                try:
                    if self.mode == "extractive":
                        fragments = extractive_fragments(episode_messages, episode_events, salience, self.zone)
                    else:
                        fragments = await self._by_model(episode_messages, episode_events, usage)
                    lease.still_held()
                    mark = await in_db_thread(self.store, self._keep, scope, mark, episode_messages, episode_events, fragments, now)
                except ClaimLost as exc:  # another worker took over: it goes on from where the watermark is
                    report.outcome, report.reason = "busy", str(exc)
                    log.info("reflection of %s stopped: %s", scope, report.reason)
                    break
                except Exception as exc:  # fail-open: keep what was done, resume here next run
                    report.outcome, report.reason = "failed", f"{type(exc).__name__}: {exc}"
                    log.warning("reflection of %s stopped: %s", scope, report.reason)
                    break
                report.episodes += 1
                report.fragments += len(fragments)
        await in_db_thread(self.store, self._count_run, scope, now, usage)
        log.info("reflection of %s: %d fragments from %d episodes", scope, report.fragments, report.episodes)
        return report

    def _count_run(self, scope: str, now: float, usage: dict[str, int]) -> None:
        save_reflection(self.store, scope, message_upto=0, event_upto=0, now=now, usage={"runs": 1, **usage})

    def _keep(
        self,
        scope: str,
        mark: ReflectionState,
        messages: Sequence[Message],
        events: Sequence[Event],
        fragments: Sequence[Fragment],
        now: float,
    ) -> ReflectionState:
        """One transaction: move the watermark past the episode (compare-and-set), then keep its fragments."""
        with self.store.transaction():
            moved = save_reflection(
                self.store,
                scope,
                message_upto=max((m.id for m in messages), default=0),
                event_upto=max((e.id for e in events), default=0),
                now=now,
                usage={"fragments": len(fragments)},
                expect=(mark.message_upto, mark.event_upto),
            )
            if moved is None:
                raise _Overtaken("another worker reflected these episodes meanwhile")
            for fragment in fragments:
                add_knowledge(
                    self.store,
                    scope,
                    fragment.text,
                    importance=fragment.importance,
                    messages=fragment.messages,
                    events=fragment.events,
                    ts=fragment.ts,
                    mode=self.mode,
                )
        return moved

    async def _by_model(self, messages: Sequence[Message], events: Sequence[Event], usage: dict[str, int]) -> list[Fragment]:
        assert self.model is not None
        summaries = [(e.id, e.ts, summarize_event(e)) for e in events]
        prompt = reflection_messages(messages, summaries, self.zone)
        timeout = self.settings.digest_timeout
        usage["model_calls"] += 1
        response = await asyncio.wait_for(self.model.complete(prompt, json_mode=True, timeout=timeout), timeout)
        usage["prompt_tokens"] += int(response.prompt_tokens or 0)
        usage["completion_tokens"] += int(response.completion_tokens or 0)
        items = parse_items(response.content, "fragments")
        if items is None:
            raise ValueError("the model's answer was not the JSON asked for")
        sources: dict[str, SourceText] = {f"m{m.id}": SourceText(m.text, speaker(m), m.ts) for m in messages}
        sources |= {f"e{event_id}": SourceText(summary, None, ts) for event_id, ts, summary in summaries}
        checked = check_items(items, sources, zone=self.zone, names=self.names, prefixes=("m", "e"), bare="m")
        fragments = []
        for item in checked.kept[:MAX_FRAGMENTS]:
            keys = item["source_keys"]
            try:
                importance = min(1.0, max(0.0, float(item.get("importance", 0.5))))
            except (TypeError, ValueError):
                importance = 0.5
            fragments.append(
                Fragment(
                    text=item["text"],
                    importance=importance,
                    messages=tuple(int(k[1:]) for k in keys if k.startswith("m")),
                    events=tuple(int(k[1:]) for k in keys if k.startswith("e")),
                    ts=max(sources[k].ts or 0.0 for k in keys),
                )
            )
        return fragments

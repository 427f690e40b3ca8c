"""The lessons section: one agent's own memory, for that agent's calls only. Pure: no I/O.

What the agent learnt (mostly from the person's feedback), what came of its work (the
performance digest: 👍/👎, corrections, tasks done, reminders acknowledged ...), its
weaknesses and strengths, its active goals and plans, and its research (what its requests
found, with the sources), as a few short lines within ``budget`` tokens.

Lines are let in by importance: high lessons and the record of its work first, then its
weaknesses, then goals, plans, medium lessons and research *taken in turn* (one of each,
then the next of each), so that ten plans never push every medium lesson out; then
strengths and low lessons. Within one importance the newest lesson first. They are shown
in a stable order (record, lessons, traits, goals, plans, research), so the section
changes only where the memory did.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, zip_longest

from scopehub.hub.context.tokens import Tokenizer
from scopehub.memory import AgentMemory, Knowledge, Lesson, Performance

__all__ = ["LESSONS_HEADER", "record_line", "render_lessons", "research_line"]

LESSONS_HEADER = "Your lessons from this chat (the person's feedback, your notes):"
_LINE_CHARS = 240  # one lesson is a sentence, never a paragraph


def _short(text: str) -> str:
    return text if len(text) <= _LINE_CHARS else text[: _LINE_CHARS - 1].rstrip() + "…"


def _lesson_line(lesson: Lesson) -> str:
    times = f", ×{lesson.seen}" if lesson.seen > 1 else ""  # learnt again: the person said it more than once
    return f"- [{lesson.kind}, {lesson.importance}{times}] {_short(lesson.text)}"


def record_line(performance: Performance | None, days: float) -> str:
    """The performance digest as one line ("" when nothing was measured)."""
    if performance is None or performance.empty:
        return ""
    said = [
        text
        for count, text in (
            (performance.thumbs_up, f"👍 {performance.thumbs_up}"),
            (performance.thumbs_down, f"👎 {performance.thumbs_down}"),
            (performance.corrections, f"{performance.corrections} corrected"),
        )
        if count
    ]
    did = [f"{label} {count}" for label, count in performance.outcomes.items()]
    if performance.outcomes.get("reminders sent"):
        did.append(f"acknowledged {performance.reminders_acknowledged}")
    parts = "; ".join(part for part in (", ".join(said), ", ".join(did)) if part)
    return f"Your record (last {days:g} d): {parts}."


def _sources(fragment: Knowledge) -> str:
    named = [f"#{i}" for i in fragment.messages] + [f"vault #{i}" for i in fragment.vault] + [f"event {i}" for i in fragment.events]
    return ", ".join(named[:4]) + (" …" if len(named) > 4 else "")


def research_line(fragment: Knowledge, when: str) -> str:
    """One research entry with its sources: ``- research: text (from #12, vault #3; 2 d ago)``."""
    return f"- research: {_short(fragment.text)} (from {_sources(fragment)}; {when})"


def render_lessons(
    memory: AgentMemory,
    *,
    tokenizer: Tokenizer,
    budget: int,
    performance: Performance | None = None,
    record_days: float = 30,
    research: Sequence[tuple[Knowledge, str]] = (),
) -> str:
    """The section for ``memory.agent`` within ``budget`` tokens ("" when empty or nothing fits).

    ``research``: the agent's fragments, newest first, each with when it was found ("2 d ago").
    """
    record = record_line(performance, record_days)
    if budget <= 0 or (memory.empty and not record and not research):
        return ""
    lessons = list(memory.lessons)  # high first, then newest (lessons_of's order)
    weak = f"Weak at: {', '.join(t.topic for t in memory.weaknesses)}." if memory.weaknesses else ""
    strong = f"Strong at: {', '.join(t.topic for t in memory.strengths)}." if memory.strengths else ""
    goals = [f"- goal #{g.id} ({g.progress}%): {_short(g.text)}" for g in memory.goals]
    plans = [f"- plan #{p.id}: {_short(p.text)}" for p in memory.plans]
    found = [research_line(fragment, when) for fragment, when in research]

    def of(importance: str) -> list[tuple[str, int]]:
        return [("lesson", i) for i, item in enumerate(lessons) if item.importance == importance]

    # (group, index) in the order lines are let in while the budget lasts.
    priority: list[tuple[str, int]] = of("high") + ([("record", 0)] if record else []) + ([("weak", 0)] if weak else [])
    taken_in_turn = zip_longest(
        [("goal", i) for i in range(len(goals))],
        [("plan", i) for i in range(len(plans))],
        of("medium"),
        [("research", i) for i in range(len(found))],
    )
    priority += [key for key in chain.from_iterable(taken_in_turn) if key is not None]
    priority += ([("strong", 0)] if strong else []) + of("low")

    def compose(chosen: set[tuple[str, int]]) -> str:
        lines = [record] if ("record", 0) in chosen else []
        lines += [_lesson_line(item) for i, item in enumerate(lessons) if ("lesson", i) in chosen]
        lines += [text for key, text in (("weak", weak), ("strong", strong)) if (key, 0) in chosen]
        lines += [line for i, line in enumerate(goals) if ("goal", i) in chosen]
        lines += [line for i, line in enumerate(plans) if ("plan", i) in chosen]
        lines += [line for i, line in enumerate(found) if ("research", i) in chosen]
        return "\n".join([LESSONS_HEADER, *lines]) if lines else ""

    chosen: set[tuple[str, int]] = set()
    for key in priority:
        if tokenizer.count(compose(chosen | {key})) <= budget:
            chosen.add(key)
    return compose(chosen)

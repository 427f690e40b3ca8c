"""The lessons section: one agent's own memory, for that agent's calls only. Pure: no I/O.

What the agent learnt (mostly from the person's feedback), its weaknesses and strengths,
and its active goals and plans, as a few short lines within ``budget`` tokens. Lines are
chosen by importance: high lessons, then weaknesses, goals and plans, then medium
lessons, strengths, and low lessons last; within one importance the newest lesson
first. They are shown in a stable order (lessons, traits, goals, plans), so the section
changes only where the memory did.
"""

from __future__ import annotations

from scopehub.hub.context.tokens import Tokenizer
from scopehub.memory import AgentMemory, Lesson

__all__ = ["LESSONS_HEADER", "render_lessons"]

LESSONS_HEADER = "Your lessons from this chat (the person's feedback, your notes):"
_LINE_CHARS = 240  # one lesson is a sentence, never a paragraph


def _short(text: str) -> str:
    return text if len(text) <= _LINE_CHARS else text[: _LINE_CHARS - 1].rstrip() + "…"


def _lesson_line(lesson: Lesson) -> str:
    times = f", ×{lesson.seen}" if lesson.seen > 1 else ""  # learnt again: the person said it more than once
    return f"- [{lesson.kind}, {lesson.importance}{times}] {_short(lesson.text)}"


def render_lessons(memory: AgentMemory, *, tokenizer: Tokenizer, budget: int) -> str:
    """The section for ``memory.agent`` within ``budget`` tokens ("" when empty or nothing fits)."""
    if budget <= 0 or memory.empty:
        return ""
    lessons = list(memory.lessons)  # high first, then newest (lessons_of's order)
    weak = f"Weak at: {', '.join(t.topic for t in memory.weaknesses)}." if memory.weaknesses else ""
    strong = f"Strong at: {', '.join(t.topic for t in memory.strengths)}." if memory.strengths else ""
    goals = [f"- goal #{g.id} ({g.progress}%): {_short(g.text)}" for g in memory.goals]
    plans = [f"- plan #{p.id}: {_short(p.text)}" for p in memory.plans]
    # (group, index) in the order lines are let in while the budget lasts.
    priority: list[tuple[str, int]] = [("lesson", i) for i, item in enumerate(lessons) if item.importance == "high"]
    priority += [("weak", 0)] if weak else []
    priority += [("goal", i) for i in range(len(goals))] + [("plan", i) for i in range(len(plans))]
    priority += [("lesson", i) for i, item in enumerate(lessons) if item.importance == "medium"]
    priority += [("strong", 0)] if strong else []
    priority += [("lesson", i) for i, item in enumerate(lessons) if item.importance == "low"]

    def compose(chosen: set[tuple[str, int]]) -> str:
        lines = [_lesson_line(item) for i, item in enumerate(lessons) if ("lesson", i) in chosen]
        lines += [text for key, text in (("weak", weak), ("strong", strong)) if (key, 0) in chosen]
        lines += [line for i, line in enumerate(goals) if ("goal", i) in chosen]
        lines += [line for i, line in enumerate(plans) if ("plan", i) in chosen]
        return "\n".join([LESSONS_HEADER, *lines]) if lines else ""

    chosen: set[tuple[str, int]] = set()
    for key in priority:
        if tokenizer.count(compose(chosen | {key})) <= budget:
            chosen.add(key)
    return compose(chosen)

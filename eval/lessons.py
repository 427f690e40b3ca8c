"""``agents-hub eval lessons``: does an agent stop repeating a mistake once the person says so?

A scripted replay on the real hub (the built-in agents, the real router, context builder
and store): day after day the person asks the tasks agent for "my list", and a scripted
model answers with the shopping list (the mistake) until a lesson saying otherwise is
in the tasks agent's context; then it answers with the work list. After each mistake
the person gives feedback, one way per run: a 👎 reaction (what the Telegram
transport records), ``/feedback no, I meant the work list``, or a correction as the
next message. Between the questions the person also talks to the other agents.

Measured, per way of giving feedback:

- exchanges until the lesson is in context: questions to the tasks agent up to and
  including its first call carrying the lesson (and mistakes made, against the same
  replay with lessons off: ``HUB_LESSONS_TOKENS=0``);
- what it costs: the lessons section's tokens per tasks call (exact, as counted by the
  context builder), the lesson model's calls (off the request path);
- that nobody else pays: the lessons tokens of every other agent's calls (must be 0).

With ``--no-lesson-model`` the lesson model is absent, so each feedback is kept verbatim
as an observation (fail-open), which the scripted agent also understands.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import click

from scopehub.agents import discover_agents
from scopehub.hub.context.lessons import LESSONS_HEADER
from scopehub.hub.lessons import LESSON_PROMPT, LessonKeeper
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.orchestrator import Deps, Hub, Inbound, Reply
from scopehub.hub.settings import load_settings
from scopehub.memory import Store

from . import _report

__all__ = ["LessonsResult", "lessons_command", "run_lessons_replay"]

SCOPE = "user:eval"
QUESTION = "what's on my list today?"
MISTAKE = "Your shopping list: milk, eggs, bread."
RIGHT = "Your work list: send the report, call the plumber."
FEEDBACK_TEXT = "no, I meant the work list"
LESSON = "When the person asks for 'my list', they mean the work tasks, not the shopping list."
# The other agents' part of each day: they must not pay for the tasks agent's lesson.
OTHERS = ("/general good morning", "/notes note that the wifi password is hunter2", "/reminders remind me at 6pm to stretch")
MODES = ("reaction", "command", "correction")


@dataclass
class LessonsResult:
    """The figures of one replay."""

    mode: str
    lesson_model: bool
    days: int
    lessons_on: bool = True
    exchanges_until_lesson: int | None = None  # questions to tasks up to and including the first whose call had it
    mistakes: int = 0
    tasks_calls: int = 0
    lessons_tokens_per_tasks_call: list[int] = field(default_factory=list)
    other_calls: int = 0
    other_lessons_tokens: int = 0
    lesson_model_calls: int = 0
    lesson_model_prompt_tokens: int = 0
    section: str = ""

    @property
    def lessons_tokens_after(self) -> float:
        """Mean lessons tokens of the tasks calls that carried the section."""
        carried = [t for t in self.lessons_tokens_per_tasks_call if t]
        return statistics.fmean(carried) if carried else 0.0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["lessons_tokens_after"] = round(self.lessons_tokens_after, 1)
        return data


def _scripted(lesson_model: bool) -> tuple[FunctionModel, FunctionModel | None]:
    """The agents' model (repeats the mistake until the lesson is in its context) and the lesson model."""

    def agents(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        # The stable part is the first system message; facts, lessons... follow in a second one.
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        if not system.startswith("You are the tasks agent."):
            return "Done."
        section = system[system.index(LESSONS_HEADER) :] if LESSONS_HEADER in system else ""
        # It understands the model's lesson and the verbatim feedback alike.
        return RIGHT if ("work tasks" in section or "work list" in section) else MISTAKE

    def lessons(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        assert messages[0]["content"] == LESSON_PROMPT
        return json.dumps({"lesson": LESSON, "kind": "failure", "importance": "high", "topic": "task lists"})

    return FunctionModel(agents, name="scripted-agents"), (FunctionModel(lessons, name="scripted-lessons") if lesson_model else None)


async def _replay(mode: str, *, days: int, lesson_model: bool, lessons_tokens: int) -> LessonsResult:
    agents_model, lessons_model = _scripted(lesson_model)
    store = Store(":memory:")
    settings = load_settings(db=":memory:", lessons_tokens=lessons_tokens)
    hub = Hub(
        Deps(store=store, settings=settings, model=agents_model, lessons=LessonKeeper(store, lessons_model)),
        discover_agents(entry_point_group=None),
    )
    result = LessonsResult(mode=mode, lesson_model=lesson_model, days=days, lessons_on=lessons_tokens > 0)

    async def say(text: str) -> Reply | None:
        reply = await hub.handle(Inbound(scope=SCOPE, text=text, chat="eval", sender="person"))
        await hub.after_send(reply)  # learning runs after the reply, as the transports do
        if reply is not None and reply.kind == "agent":
            if reply.agent == "tasks":
                result.tasks_calls += 1
                result.lessons_tokens_per_tasks_call.append(reply.tokens.get("lessons", 0))
            else:
                result.other_calls += 1
                result.other_lessons_tokens += reply.tokens.get("lessons", 0)
        return reply

    try:
        for day in range(1, days + 1):
            reply = await say(QUESTION)
            assert reply is not None and reply.agent == "tasks", reply
            if result.exchanges_until_lesson is None and reply.tokens.get("lessons", 0) > 0:
                result.exchanges_until_lesson = day
            if reply.text == MISTAKE:
                result.mistakes += 1
                if mode == "reaction":  # what the Telegram transport does with a 👎 on the reply
                    stored = store.get(SCOPE, reply.reply_id) if reply.reply_id else None
                    if stored is not None and hub.feedback_on(SCOPE, stored, "👎", source="reaction", signal="negative"):
                        await hub.learn_feedback(SCOPE)
                elif mode == "command":
                    await say(f"/feedback {FEEDBACK_TEXT}")
                else:
                    await say(FEEDBACK_TEXT)  # the correction is also answered, by the tasks agent
            for text in OTHERS:
                await say(text)
    finally:
        result.section = hub.lessons_for("tasks", SCOPE)
        if lessons_model is not None:
            result.lesson_model_calls = len(lessons_model.calls)
            result.lesson_model_prompt_tokens = sum(
                sum(hub.deps.tokenizer.count(m["content"]) for m in call.messages) for call in lessons_model.calls
            )
        store.close()
    return result


def run_lessons_replay(
    modes: Sequence[str] = MODES, *, days: int = 10, lesson_model: bool = True
) -> list[LessonsResult]:
    """Each way of giving feedback with lessons on, then one baseline with lessons off."""
    results = [asyncio.run(_replay(mode, days=days, lesson_model=lesson_model, lessons_tokens=120)) for mode in modes]
    results.append(asyncio.run(_replay(modes[0], days=days, lesson_model=lesson_model, lessons_tokens=0)))
    return results


@click.command("lessons")
@click.option("--days", default=10, show_default=True, type=click.IntRange(2, 1000), help="questions to the tasks agent")
@click.option("--mode", "modes", multiple=True, type=click.Choice(MODES), help="ways of giving feedback (default: all)")
@click.option("--no-lesson-model", is_flag=True, help="no lesson model: feedback is kept verbatim (fail-open)")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@_report.report_option
def lessons_command(days: int, modes: tuple[str, ...], no_lesson_model: bool, as_json: bool) -> list[dict[str, Any]]:
    """Scripted replay: a mistake repeats until the person's feedback is a lesson in the agent's context."""
    results = run_lessons_replay(modes or MODES, days=days, lesson_model=not no_lesson_model)
    figures = [r.as_dict() for r in results]
    if as_json:
        click.echo(json.dumps(figures, ensure_ascii=False, indent=2))
        return figures
    source = "scripted lesson model" if not no_lesson_model else "no lesson model (verbatim observations)"
    rows = [
        [
            r.mode,
            "on" if r.lessons_on else "off",
            "never" if r.exchanges_until_lesson is None else f"{r.exchanges_until_lesson} exchanges",
            f"{r.mistakes}/{r.days}",
            f"{r.lessons_tokens_after:.1f}",
            f"{r.other_lessons_tokens} in {r.other_calls}",
            r.lesson_model_calls,
        ]
        for r in results
    ]
    click.echo(
        _report.format_table(
            ["feedback", "lessons", "until in context", "mistakes", "lessons tok/call", "others' lessons tok", "lesson calls"],
            rows,
            title=f"lessons replay: {days} days, the tasks agent asked once a day, {len(OTHERS)} other-agent messages a day; {source}",
        )
    )
    learnt = next((r for r in results if r.section), None)
    if learnt is not None:
        click.echo(f"\nthe tasks agent's lessons section after the {learnt.mode} run:")
        click.echo(learnt.section)
    return figures

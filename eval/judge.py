"""``--judge``: does the agent actually find the referenced value, scoped and with full history?

For each reference (see :mod:`eval.references`), the agent's model gets the call exactly as
built (persona, rules, history) with the current message followed by one question: which
exact value of the slot the message refers to. The answer is scored by exact match after
normalisation (:func:`eval.references.normalize_value`); a lenient figure (the value appears
in the answer) is reported beside it. Tools are not offered: the question is what the
context holds, not what a search would find. ``jsonl`` references (``needs``) name a
message, not a value, so the judge skips them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from . import _report
from .references import Reference, normalize_value

if TYPE_CHECKING:
    from scopehub.hub.models import ChatModel

__all__ = ["JudgeItem", "exact_match", "judge_messages", "model_from_settings", "run_judge"]

QUESTION = (
    "\n\n[Evaluation question, not part of the chat] Which exact {slot} does this message refer to? "
    "Answer with the value only, as it appears in the conversation, or 'unknown'."
)


@dataclass
class JudgeItem:
    """One reference with the provider messages of its scoped and full calls."""

    reference: Reference
    agent: str
    scoped: list[dict[str, Any]]
    full: list[dict[str, Any]]


def model_from_settings() -> ChatModel:
    """The agents' model from HUB_MODEL / HUB_API_BASE; a clear usage error without one."""
    from scopehub.hub.app import build_model
    from scopehub.hub.settings import load_settings

    settings = load_settings()
    if not settings.model:
        raise click.UsageError(
            "--judge needs a model: set HUB_MODEL to a litellm model string (e.g. openai/gpt-4o-mini with "
            "OPENAI_API_KEY, or openai/<name> with HUB_API_BASE=http://localhost:8000/v1 for a local server)"
        )
    return build_model(settings)


def judge_messages(messages: Sequence[dict[str, Any]], slot: str) -> list[dict[str, Any]]:
    """The call's provider messages with the question appended to the current message."""
    asked = [dict(message) for message in messages]
    if asked and asked[-1].get("role") == "user":
        asked[-1]["content"] = f"{asked[-1]['content']}{QUESTION.format(slot=slot.replace('_', ' ').lower())}"
    return asked


def exact_match(answer: str | None, value: str) -> tuple[bool, bool]:
    """(exact, contained) after normalisation: the answer is the value / holds the value."""
    got = normalize_value((answer or "").strip().strip(".\"'"))
    want = normalize_value(value)
    return got == want, bool(want) and f" {want} " in f" {got} "


async def _judge(items: Sequence[JudgeItem], model: ChatModel, *, concurrency: int, show_progress: bool) -> dict[str, Any]:
    from scopehub.hub.errors import ModelError

    semaphore = asyncio.Semaphore(max(concurrency, 1))
    bar = _report.Progress(len(items) * 2, "judge", enabled=show_progress)
    errors = 0

    async def ask(messages: list[dict[str, Any]]) -> str | None:
        nonlocal errors
        async with semaphore:
            try:
                response = await model.complete(messages)
            except ModelError:
                errors += 1  # counted as a wrong answer, and reported
                return None
            finally:
                bar.advance()
            return response.content

    questions = []
    for item in items:
        slot = item.reference.slot
        questions.append(ask(judge_messages(item.scoped, slot)))
        questions.append(ask(judge_messages(item.full, slot)))
    answers = await asyncio.gather(*questions)
    bar.close()
    figures = {"scoped_correct": 0, "full_correct": 0, "scoped_contains": 0, "full_contains": 0}
    examples = []
    for number, item in enumerate(items):
        scoped_answer, full_answer = answers[2 * number], answers[2 * number + 1]
        value = item.reference.raw_value or item.reference.value
        scoped_exact, scoped_in = exact_match(scoped_answer, value)
        full_exact, full_in = exact_match(full_answer, value)
        figures["scoped_correct"] += scoped_exact
        figures["full_correct"] += full_exact
        figures["scoped_contains"] += scoped_in
        figures["full_contains"] += full_in
        if scoped_exact != full_exact and len(examples) < 10:
            examples.append(
                {"turn": item.reference.turn, "slot": item.reference.slot, "value": value, "scoped": scoped_answer, "full": full_answer}
            )
    asked = len(items)
    return {
        "asked": asked,
        **figures,
        "scoped_accuracy": round(figures["scoped_correct"] / asked, 4) if asked else None,
        "full_accuracy": round(figures["full_correct"] / asked, 4) if asked else None,
        "errors": errors,
        "disagreements": examples,
    }


def run_judge(items: Sequence[JudgeItem], model: ChatModel, *, concurrency: int = 4, show_progress: bool = False) -> dict[str, Any]:
    """Ask about every slot-value reference in ``items``; exact-match accuracy scoped vs full."""
    usable = [item for item in items if item.reference.slot != "needs"]
    report = asyncio.run(_judge(usable, model, concurrency=concurrency, show_progress=show_progress))
    report["model"] = getattr(model, "name", "model")
    report["skipped"] = len(items) - len(usable)
    return report

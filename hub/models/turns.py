"""The provider messages of one embedded-model call, taken apart (persona, facts,
history, the person's message, this reply's tool steps), and the text tests on them
the planner and the evaluation share."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Turn", "clip", "is_copy", "same_words", "split_turn", "text_of"]


@dataclass(frozen=True, slots=True)
class Turn:
    """The provider messages of one agent call, taken apart."""

    persona: str  # the first paragraph of the system message
    facts: str  # the facts block inside the system message, if any
    history: tuple[dict[str, str], ...]  # earlier user/assistant turns, oldest first
    message: str  # the person's current message
    steps: tuple[dict[str, Any], ...]  # tool calls and results of this reply so far

    @property
    def last_reply(self) -> str:
        """The newest earlier assistant reply ('' when none)."""
        for item in reversed(self.history):
            if item["role"] == "assistant":
                return item["content"]
        return ""

    @property
    def last_exchange(self) -> tuple[dict[str, str], ...]:
        """The newest earlier user turn and the reply after it."""
        for index in range(len(self.history) - 1, 0, -1):
            if self.history[index]["role"] == "assistant" and self.history[index - 1]["role"] == "user":
                return self.history[index - 1 : index + 1]
        return ()



def text_of(content: Any) -> str:
    return content if isinstance(content, str) else ("" if content is None else json.dumps(content))


def split_turn(messages: Sequence[Mapping[str, Any]], facts_header: str = "Facts about") -> Turn:
    """Persona, facts, history, current message and this reply's tool steps.

    Tool steps are the assistant tool calls and tool results after the person's message;
    a user message right after a tool result is the hub talking (a step-limit note),
    not the person, and belongs to the steps.
    """
    system = "\n\n".join(text_of(m.get("content")) for m in messages if m.get("role") == "system")
    rest = [m for m in messages if m.get("role") != "system"]
    index = len(rest) - 1
    while index >= 0:
        item = rest[index]
        role = item.get("role")
        if role == "tool" or (role == "assistant" and item.get("tool_calls")):
            index -= 1
            continue
        if role == "user" and index > 0 and rest[index - 1].get("role") == "tool":
            index -= 1
            continue
        break
    current = text_of(rest[index].get("content")) if index >= 0 and rest[index].get("role") == "user" else ""
    history = tuple(
        {"role": str(m.get("role")), "content": text_of(m.get("content"))}
        for m in rest[: max(index, 0)]
        if m.get("role") in ("user", "assistant") and not m.get("tool_calls")
    )
    paragraphs = [part.strip() for part in system.split("\n\n") if part.strip()]
    persona = paragraphs[0] if paragraphs else ""
    facts = next((part for part in paragraphs if part.startswith(facts_header)), "")
    return Turn(persona=persona, facts=facts, history=history, message=current, steps=tuple(rest[index + 1 :]))



def clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _normal(text: str) -> str:
    """Lower case, words only; dots and colons stay inside words (e-mail addresses, 09:30)."""
    text = re.sub(r"[.,!?;:]+(?=\s|$)", " ", text.casefold())
    return " ".join(re.sub(r"[^\w@.#:/-]+", " ", text).split())


def is_copy(reply: str, earlier: Iterable[str]) -> bool:
    """Whether ``reply`` repeats one of the ``earlier`` texts, or a run of three or more of
    its words, word for word (case and punctuation aside)."""
    probe = _normal(reply)
    if not probe:
        return False
    for text in earlier:
        seen = _normal(text) if text else ""
        if probe == seen or (len(probe.split()) >= 3 and f" {probe} " in f" {seen} "):
            return True
    return False


def same_words(reply: str, earlier: Iterable[str]) -> bool:
    """Whether ``reply`` says one of the ``earlier`` texts again, whole (case and punctuation aside)."""
    probe = _normal(reply)
    return bool(probe) and any(probe == _normal(text) for text in earlier if text)

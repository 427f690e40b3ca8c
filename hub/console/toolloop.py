"""A call's tool loop as an operator reads it: each round's latency and tokens, and each
tool call as ``name(argument=value, ...) → result``.

The call record keeps each tool call's name, its arguments as the model sent them (a JSON
object, cut at 500 characters), whether it worked and the start of its result, with the
round that asked for it; and each model request's latency and provider tokens
(``extra["rounds"]``). Older records have no rounds: their tool calls are shown as one
group, said so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Round", "ToolStep", "readable_arguments", "tool_rounds"]


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One tool call: ``name(arguments) → result``."""

    name: str
    arguments: str
    ok: bool
    result: str


@dataclass(slots=True)
class Round:
    """One model request of the loop and the tool calls it asked for (none: the final answer)."""

    number: int  # from 1
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    steps: list[ToolStep] = field(default_factory=list)


def _value(value: Any) -> str:
    # Strings in double quotes as JSON writes them, but with every character as it is
    # (no \\u escapes): the page escapes HTML, not the JSON.
    return json.dumps(value, ensure_ascii=False)


def readable_arguments(raw: Any) -> str:
    """``title="buy milk", due="friday"`` from the JSON the model sent; the raw text when it is not JSON."""
    if isinstance(raw, dict):
        parsed: Any = raw
    else:
        try:
            parsed = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
        except ValueError:
            return str(raw)  # cut at 500 characters, or not JSON at all: as the model wrote it
    if isinstance(parsed, dict):
        return ", ".join(f"{key}={_value(value)}" for key, value in parsed.items())
    return _value(parsed)


def tool_rounds(extra: dict[str, Any]) -> tuple[list[Round], bool]:
    """The loop's rounds, and whether the record kept them (False: an older record, one group)."""
    calls = [c for c in extra.get("tool_calls") or () if isinstance(c, dict)]
    recorded = [r for r in extra.get("rounds") or () if isinstance(r, dict)]
    steps = [
        (c.get("round"), ToolStep(str(c.get("name", "?")), readable_arguments(c.get("arguments", "")), bool(c.get("ok")), str(c.get("result", ""))))
        for c in calls
    ]
    if not recorded:
        return ([Round(1, steps=[step for _, step in steps])] if steps else []), False
    rounds = [
        Round(i + 1, r.get("latency_ms"), r.get("prompt_tokens"), r.get("completion_tokens")) for i, r in enumerate(recorded)
    ]
    for number, step in steps:
        index = number if isinstance(number, int) and 0 <= number < len(rounds) else len(rounds) - 1
        rounds[index].steps.append(step)
    return rounds, True

"""Fakes for tests and evaluations: ``ScriptedModel`` plays back steps and records
calls (openai-agents' ScriptedModel); ``FunctionModel`` answers with a function
(pydantic-ai's FunctionModel). Not used by the running bot.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scopehub.hub.errors import ModelError
from scopehub.hub.models.base import ModelResponse

Step = ModelResponse | BaseException | str | Callable[..., Any]


@dataclass
class RecordedCall:
    """What a fake model was asked."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    model: str | None
    json_mode: bool


@dataclass
class ScriptedModel:
    """Plays back steps in order and records every call.

    A step is a ``ModelResponse``, a plain string (a text reply), an exception to
    raise, or a callable ``(messages, tools) -> step``. When the script runs out,
    ``default`` answers (``None`` raises, so tests notice unexpected calls).
    """

    steps: list[Step] = field(default_factory=list)
    name: str = "scripted"
    default: Step | None = None
    calls: list[RecordedCall] = field(default_factory=list)

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        model: str | None = None,
        json_mode: bool = False,
        timeout: float | None = None,
    ) -> ModelResponse:
        self.calls.append(RecordedCall([dict(m) for m in messages], list(tools or []), model, json_mode))
        if self.steps:
            step = self.steps.pop(0)
        elif self.default is not None:
            step = self.default
        else:
            raise ModelError("ScriptedModel: no scripted step left")
        return await _play(step, messages, tools)


async def _play(step: Step, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> ModelResponse:
    if callable(step) and not isinstance(step, ModelResponse | BaseException):
        result = step(list(messages), list(tools or []))
        if inspect.isawaitable(result):
            result = await result
        step = result
    if isinstance(step, BaseException):
        raise step
    if isinstance(step, str):
        return ModelResponse(content=step)
    if isinstance(step, ModelResponse):
        return step
    raise TypeError(f"unsupported scripted step {step!r}")


class FunctionModel(ScriptedModel):
    """Answers every call with ``func(messages, tools)`` (sync or async), recording calls."""

    def __init__(self, func: Callable[[list[dict[str, Any]], list[dict[str, Any]]], Step | Awaitable[Step]], name: str = "function") -> None:
        super().__init__(steps=[], name=name, default=func)
        self.func = func

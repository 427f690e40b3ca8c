"""The tool loop: one agent call from built context to final text.

Tools run with the scope's ``ToolContext``; a tool's exception, bad arguments or an
unknown tool name become text for the model, never a crash. Model failures propagate
as :class:`ModelError` for the hub to turn into a reply the person understands.

Bounds, so a confused model cannot run away with time or tokens: at most
``max_steps`` tool rounds, at most ``MAX_CALLS_PER_STEP`` calls per round, each result
cut to ``TOOL_RESULT_CHARS`` and all results of one reply to ``TOOL_OUTPUT_BUDGET``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from scopehub.agents import Tool, ToolContext
from scopehub.hub.models import ChatModel, ModelResponse, ToolCall

__all__ = [
    "FINAL_STEP_NOTE",
    "MAX_CALLS_PER_STEP",
    "STEP_LIMIT_REPLY",
    "TOOL_OUTPUT_BUDGET",
    "TOOL_RESULT_CHARS",
    "AgentResult",
    "run_agent",
    "run_tool",
]

log = logging.getLogger(__name__)

STEP_LIMIT_REPLY = "I could not finish that within my step limit. Could you narrow the request?"
# Sent before the last model call. The tools stay offered on that call: some providers
# (Anthropic through litellm) reject a conversation holding tool calls when no tools are given.
FINAL_STEP_NOTE = "[hub] Tool step limit reached: answer the person now in plain text, without calling tools."
TOOL_RESULT_CHARS = 4000  # a tool result is context too: keep it bounded
TOOL_OUTPUT_BUDGET = 16000  # all tool results of one reply together
MAX_CALLS_PER_STEP = 8


@dataclass
class AgentResult:
    """What the agent produced and what it cost."""

    text: str
    steps: int = 0
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str | None = None
    hit_step_limit: bool = False
    # Provider-reported prompt caching over every request of the reply; None: never reported.
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    requests: int = 0  # model requests made (one per step)
    # One entry per model request: its latency and the tokens the provider reported for it
    # (None: not reported), and how many tool calls it asked for (the console's tool loop).
    rounds: list[dict[str, Any]] = field(default_factory=list)
    usage_reported: bool = False  # some request came back with token usage


def _validation_text(name: str, exc: ValidationError) -> str:
    """Pydantic's errors as one short line the model can act on."""
    problems = []
    for error in exc.errors()[:5]:
        where = ".".join(str(part) for part in error.get("loc", ())) or "arguments"
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
    return f"error: bad arguments for {name}: " + "; ".join(problems)


async def run_tool(
    tools: dict[str, Tool], name: str, raw_arguments: str, ctx: ToolContext, *, limit: int = TOOL_RESULT_CHARS
) -> tuple[str, bool]:
    """Run one tool call; returns (result text for the model, ok). Never raises for tool failures."""
    selected = tools.get(name)
    if selected is None:
        return f"error: unknown tool {name!r}; available: {', '.join(sorted(tools))}", False
    try:
        arguments = ToolCall(id="", name=name, arguments=raw_arguments).parsed_arguments()
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        return f"error: arguments of {name} are not a JSON object ({exc}); send valid JSON", False
    try:
        result = await selected.run(ctx, arguments)
    except ValidationError as exc:
        return _validation_text(name, exc), False
    except Exception as exc:  # the model gets the reason and may try again
        log.warning("tool %s failed: %s", name, exc, exc_info=True)
        reason = str(exc).strip() or type(exc).__name__
        return f"error: {name} failed: {reason[:500]}", False
    if len(result) > limit:
        result = result[:limit] + "\n[truncated]"
    return result, True


async def run_agent(
    messages: Sequence[dict[str, Any]],
    tools: Sequence[Tool],
    model: ChatModel,
    ctx: ToolContext,
    *,
    max_steps: int = 5,
    model_name: str | None = None,
    schemas: Sequence[dict[str, Any]] | None = None,
) -> AgentResult:
    """Call the model, run the tools it asks for, repeat up to ``max_steps`` tool rounds.

    At most ``max_steps + 1`` model calls: the last one is told to answer in words, and
    if it still asks for tools the person gets :data:`STEP_LIMIT_REPLY`.
    """
    conversation = [dict(message) for message in messages]
    by_name = {t.name: t for t in tools}
    tool_schemas = list(schemas) if schemas is not None else [t.schema() for t in tools]
    result = AgentResult(text="")
    budget = TOOL_OUTPUT_BUDGET
    for step in range(max_steps + 1):
        final = step == max_steps
        if final and step > 0:
            conversation.append({"role": "user", "content": FINAL_STEP_NOTE})
        asked = time.perf_counter()
        response: ModelResponse = await model.complete(conversation, tools=tool_schemas or None, model=model_name)
        result.rounds.append(
            {
                "latency_ms": round((time.perf_counter() - asked) * 1000, 1),
                "prompt_tokens": response.prompt_tokens,
                "completion_tokens": response.completion_tokens,
                "tool_calls": 0 if final else len(response.tool_calls),
            }
        )
        result.steps = step + 1
        result.prompt_tokens += response.prompt_tokens or 0
        result.completion_tokens += response.completion_tokens or 0
        result.model = response.model or result.model
        result.requests += 1
        result.usage_reported |= response.prompt_tokens is not None
        if response.cached_tokens is not None or response.cache_write_tokens is not None:
            result.cached_tokens = (result.cached_tokens or 0) + (response.cached_tokens or 0)
            result.cache_write_tokens = (result.cache_write_tokens or 0) + (response.cache_write_tokens or 0)
        if not response.tool_calls or final:
            text = (response.content or "").strip()
            if response.tool_calls:
                log.info("agent still asked for tools after %d rounds; stopping", max_steps)
                result.hit_step_limit = True
                text = text or STEP_LIMIT_REPLY
            result.text = text
            return result
        conversation.append(response.as_message())
        for index, call in enumerate(response.tool_calls):
            if index >= MAX_CALLS_PER_STEP:
                # Every call still needs an answer: providers reject unanswered tool call ids.
                output, ok = f"error: at most {MAX_CALLS_PER_STEP} tool calls per step; this one was skipped", False
            elif budget <= 0:
                output, ok = "error: tool output budget for this reply is spent; answer with what you have", False
            else:
                output, ok = await run_tool(by_name, call.name, call.arguments, ctx, limit=min(TOOL_RESULT_CHARS, budget))
                budget -= len(output)
            result.tool_calls.append(
                {"name": call.name, "arguments": call.arguments[:500], "ok": ok, "result": output[:500], "round": step}
            )
            conversation.append({"role": "tool", "tool_call_id": call.id, "content": output})
    raise AssertionError("unreachable: the final step always returns")  # pragma: no cover

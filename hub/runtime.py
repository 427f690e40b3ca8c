"""The tool loop: one agent call from built context to final text.

Tools run with the scope's ``ToolContext``; a tool's exception, bad arguments or an
unknown tool name become text for the model, never a crash. Model failures propagate
as :class:`ModelError` for the hub to turn into a reply the person understands.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import Tool, ToolContext

from .llm import ChatModel, ModelResponse

__all__ = ["STEP_LIMIT_REPLY", "AgentResult", "run_agent"]

log = logging.getLogger(__name__)

STEP_LIMIT_REPLY = "I could not finish that within my step limit. Could you narrow the request?"
_TOOL_RESULT_CHARS = 4000  # a tool result is context too: keep it bounded


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


async def run_tool(tools: dict[str, Tool], name: str, raw_arguments: str, ctx: ToolContext) -> tuple[str, bool]:
    """Run one tool call; returns (result text for the model, ok)."""
    selected = tools.get(name)
    if selected is None:
        return f"error: unknown tool {name!r}; available: {', '.join(sorted(tools))}", False
    from .llm import ToolCall

    try:
        arguments = ToolCall(id="", name=name, arguments=raw_arguments).parsed_arguments()
    except ValueError as exc:
        return f"error: arguments are not a JSON object ({exc}); send valid JSON", False
    try:
        result = await selected.run(ctx, arguments)
    except Exception as exc:  # the model gets the reason and may try again
        log.info("tool %s failed: %s", name, exc, exc_info=True)
        reason = str(exc).strip() or type(exc).__name__
        return f"error: {reason[:500]}", False
    if len(result) > _TOOL_RESULT_CHARS:
        result = result[:_TOOL_RESULT_CHARS] + "\n[truncated]"
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
    """Call the model, run the tools it asks for, repeat up to ``max_steps`` tool rounds."""
    conversation = [dict(message) for message in messages]
    by_name = {t.name: t for t in tools}
    tool_schemas = list(schemas) if schemas is not None else [t.schema() for t in tools]
    result = AgentResult(text="")
    for step in range(max_steps + 1):
        # The last round offers no tools, so the model has to answer in words.
        offer = tool_schemas if step < max_steps else None
        response: ModelResponse = await model.complete(conversation, tools=offer or None, model=model_name)
        result.steps = step + 1
        result.prompt_tokens += response.prompt_tokens or 0
        result.completion_tokens += response.completion_tokens or 0
        result.model = response.model or result.model
        if not response.tool_calls or offer is None:
            text = (response.content or "").strip()
            if not text and response.tool_calls:
                result.hit_step_limit = True
                text = STEP_LIMIT_REPLY
            result.text = text
            return result
        conversation.append(response.as_message())
        for call in response.tool_calls:
            output, ok = await run_tool(by_name, call.name, call.arguments, ctx)
            result.tool_calls.append({"name": call.name, "arguments": call.arguments, "ok": ok, "result": output[:200]})
            conversation.append({"role": "tool", "tool_call_id": call.id, "content": output})
    result.hit_step_limit = True
    result.text = STEP_LIMIT_REPLY
    return result

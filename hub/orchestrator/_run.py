"""Run, the fourth stage of a turn: the agent's model call and its tool loop, under one deadline.

A failing model never raises out of here: the outcome says what the person is told
instead (their message is kept) and why, for the call record.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from scopehub.agents import Channel, ToolContext, agent_tools
from scopehub.hub.errors import ModelError, ModelNotConfigured, ModelUnavailable
from scopehub.hub.orchestrator._sections import PreparedCall
from scopehub.hub.orchestrator._types import Deps
from scopehub.hub.runtime import AgentResult, run_agent

__all__ = [
    "MODEL_DOWN_REPLY",
    "MODEL_FAILED_REPLY",
    "MODEL_SLOW_REPLY",
    "NO_ANSWER_REPLY",
    "NO_MODEL_REPLY",
    "RunOutcome",
    "run_call",
]

log = logging.getLogger(__name__)

MODEL_DOWN_REPLY = "Sorry, I can't reach the language model right now. Your message is saved; please try again in a minute."
MODEL_FAILED_REPLY = "Sorry, the language model rejected this request. Your message is saved; try rephrasing it."
MODEL_SLOW_REPLY = "Sorry, the language model is taking too long to answer. Your message is saved; please try again in a minute."
NO_ANSWER_REPLY = "I have no answer to that. Could you rephrase it?"
NO_MODEL_REPLY = "No language model is configured. Set HUB_MODEL (see README). Your message is saved."


@dataclass(frozen=True)
class RunOutcome:
    """What the agent's run gave: the reply's text, or the apology sent instead and why."""

    ok: bool
    text: str
    result: AgentResult | None
    latency_ms: float
    failure: str = ""  # a failure the call record names ("deadline"); empty otherwise
    error: BaseException | None = None  # what made it fail, for the call record (the console shows why)


async def run_call(deps: Deps, call: PreparedCall, channels: Mapping[str, Channel]) -> RunOutcome:
    """Run ``call``'s agent with its tools; never raises for a model failure."""
    settings = deps.settings
    spec, inbound = call.spec, call.inbound
    model = deps.model
    started = time.perf_counter()
    ok, failure = True, ""
    error: BaseException | None = None
    result: AgentResult | None = None
    try:
        if model is None:
            raise ModelNotConfigured("no model configured")
        tool_ctx = ToolContext(
            store=deps.store,
            scope=inbound.scope,
            chat=inbound.chat,
            message_id=call.message.id,
            clock=deps.clock,
            extra={**deps.tool_services, "timezone": settings.timezone, "channels": channels},
            agent=spec.name,
        )
        # One deadline over the whole run (every model request, retry and tool round), so a
        # hung provider costs the person HUB_REPLY_DEADLINE seconds at most, on any transport.
        # In this task (asyncio.timeout, not wait_for): Ctrl-C in the terminal still stops it.
        async with asyncio.timeout(settings.reply_deadline):
            result = await run_agent(
                call.context.messages,
                agent_tools(spec),
                model,
                tool_ctx,
                max_steps=settings.max_tool_steps,
                model_name=spec.model or None,
                schemas=call.context.tools,
            )
        text = result.text or NO_ANSWER_REPLY
    except ModelNotConfigured as exc:
        ok, text, error = False, NO_MODEL_REPLY, exc
    except TimeoutError as exc:
        log.warning("no answer for %s/%s within %ss; apologising", inbound.scope, spec.name, settings.reply_deadline)
        ok, text, failure = False, MODEL_SLOW_REPLY, "deadline"
        error = TimeoutError(f"no answer within the reply deadline ({settings.reply_deadline} s)") if not str(exc) else exc
    except ModelUnavailable as exc:
        log.warning("model unavailable for %s/%s: %s", inbound.scope, spec.name, exc)
        ok, text, error = False, MODEL_DOWN_REPLY, exc
    except ModelError as exc:
        log.warning("model refused %s/%s: %s", inbound.scope, spec.name, exc)
        ok, text, error = False, MODEL_FAILED_REPLY, exc
    latency_ms = (time.perf_counter() - started) * 1000
    return RunOutcome(ok=ok, text=text, result=result, latency_ms=latency_ms, failure=failure, error=error)

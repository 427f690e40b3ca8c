"""The optional LLM router: sees the recent window with tags, answers ``{agent, also_sees}``.

Its answer is validated with pydantic; malformed JSON, an unknown agent, a timeout or
any other error raises :class:`RouterError`, and the hub keeps the local decision.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError, field_validator

from scopehub.hub.errors import RouterError
from scopehub.hub.models import ChatModel
from scopehub.hub.routing import AgentProfile, Route
from scopehub.memory import Message

__all__ = ["RouterAnswer", "RouterCall", "ask_router", "build_router_messages", "refine_with_llm"]

log = logging.getLogger(__name__)

_SNIPPET_CHARS = 160


class RouterAnswer(BaseModel):
    """The JSON the router model must answer."""

    agent: str
    also_sees: list[str] = []

    @field_validator("agent")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip().lstrip("@/").lower()


def build_router_messages(text: str, profiles: Sequence[AgentProfile], window: Sequence[Message], *, recent: int = 12) -> list[dict[str, str]]:
    """A compact routing prompt: agents, the last ``recent`` tagged messages, the new message."""
    agents = "\n".join(f"- {p.name}: {p.description}" for p in profiles)
    lines = []
    for message in window[-recent:]:
        tag = message.agent or "-"
        who = "user" if message.role == "user" else "agent"
        snippet = message.text.replace("\n", " ")[:_SNIPPET_CHARS]
        lines.append(f"[{tag}] {who}: {snippet}")
    system = (
        "Route the new message to one agent. Reply with JSON only: "
        '{"agent": "<name>", "also_sees": ["<other agents whose recent messages it refers to>"]}.\n'
        f"Agents:\n{agents}"
    )
    user = "Recent messages ([agent] role: text):\n" + ("\n".join(lines) or "(none)") + f"\n\nNew message: {text[:2000]}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_router_answer(raw: str | None, agents: Sequence[str]) -> RouterAnswer:
    """Validate the model's JSON; raise RouterError when it cannot be used."""
    if not raw:
        raise RouterError("empty router answer")
    match = re.search(r"\{.*\}", raw, re.S)  # tolerate prose or code fences around the JSON
    if match is None:
        raise RouterError(f"router answer is not JSON: {raw[:100]!r}")
    try:
        answer = RouterAnswer.model_validate(json.loads(match.group(0)))
    except (ValueError, ValidationError) as exc:
        raise RouterError(f"router answer invalid: {exc}") from exc
    if answer.agent not in agents:
        raise RouterError(f"router chose unknown agent {answer.agent!r}")
    answer.also_sees = [name for name in dict.fromkeys(a.strip().lower() for a in answer.also_sees) if name in agents and name != answer.agent]
    return answer


@dataclass
class RouterCall:
    """One request to the router model: what it was sent, what it answered and what came of it.

    The hub records it (``on_call`` of :func:`refine_with_llm`), so that the console shows
    the router's prompt and answer, and why it was not used when it failed.
    """

    messages: list[dict[str, str]]
    answer: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    route: Route | None = None  # None: the answer could not be used (see error)
    error: RouterError | None = None
    cause: BaseException | None = None  # what went wrong underneath the RouterError
    latency_ms: float = 0.0
    local: Route | None = None  # the local router's route, which stands when this one fails


async def ask_router(
    text: str,
    *,
    model: ChatModel,
    profiles: Sequence[AgentProfile],
    window: Sequence[Message],
    timeout: float = 8.0,
    model_name: str | None = None,
) -> RouterCall:
    """Ask the router model once; a failure is kept on the returned call, never raised."""
    call = RouterCall(build_router_messages(text, profiles, window))
    started = time.perf_counter()
    try:
        response = await asyncio.wait_for(model.complete(call.messages, json_mode=True, model=model_name, timeout=timeout), timeout)
    except TimeoutError as exc:
        call.error, call.cause = RouterError("router model timed out"), exc
    except RouterError as exc:
        call.error = exc
    except Exception as exc:
        call.error, call.cause = RouterError(f"router model failed: {type(exc).__name__}: {exc}"), exc
    else:
        call.answer, call.prompt_tokens, call.completion_tokens = response.content, response.prompt_tokens, response.completion_tokens
        try:
            answer = parse_router_answer(response.content, [p.name for p in profiles])
            call.route = Route(agent=answer.agent, also_sees=tuple(answer.also_sees), via="llm")
        except RouterError as exc:
            call.error = exc
    call.latency_ms = (time.perf_counter() - started) * 1000
    return call


async def refine_with_llm(
    local: Route,
    text: str,
    *,
    model: ChatModel,
    profiles: Sequence[AgentProfile],
    window: Sequence[Message],
    timeout: float = 8.0,
    model_name: str | None = None,
    on_call: Callable[[RouterCall], None] | None = None,
) -> Route:
    """The LLM stage after the local cascade; any failure of it keeps the local route.

    ``on_call(call)`` hears every request, failed ones too, with its prompt, answer and
    tokens, so the hub can record it like an agent call.

    An explicit address or a reply to an agent is never second-guessed.
    """
    if local.via in ("explicit", "reply"):
        return local
    try:
        call = await ask_router(text, model=model, profiles=profiles, window=window, timeout=timeout, model_name=model_name)
    except Exception:
        log.exception("LLM router crashed; keeping the local route")
        return local
    call.local = local
    if on_call is not None:
        try:
            on_call(call)
        except Exception:  # accounting must never change the route
            log.exception("router call not recorded")
    if call.route is None:
        log.warning("LLM router unusable (%s); keeping the local route", call.error)
        return local
    return call.route

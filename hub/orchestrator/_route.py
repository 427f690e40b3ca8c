"""Routing, the second stage of a turn: which agent answers, and whose messages it may read.

The local router decides for zero tokens (:func:`scopehub.hub.routing.route`); the LLM
router, when configured, may refine its decision. Both are pure over the window; this
module builds the classifier once; the hub runs the local route (embedding included) in
its database thread, off the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from scopehub.hub.models import ChatModel
from scopehub.hub.routing import AgentProfile, LocalClassifier, Route, refine_with_llm, route
from scopehub.hub.routing.defaults import build_router
from scopehub.hub.routing.llm_router import RouterCall
from scopehub.hub.settings import Settings
from scopehub.memory import Message

__all__ = ["addressed_route", "agent_profile", "build_classifier", "local_route", "refine_route"]

log = logging.getLogger(__name__)


def agent_profile(spec: Any, leave_out: Collection[str] = ()) -> AgentProfile:
    """What the router knows of an agent (an ``AgentSpec``): its description, examples and
    domain words. ``leave_out``: texts held out (cross-validation)."""
    held = set(leave_out)
    examples = tuple(text for text in dict.fromkeys(spec.examples) if text not in held)
    return AgentProfile(name=spec.name, description=spec.description, examples=examples, keywords=spec.keywords)


def build_classifier(profiles: Sequence[AgentProfile], settings: Settings) -> tuple[LocalClassifier, str | None]:
    """The local router's scorer as ``HUB_ROUTER_EMBEDDER`` asks (``hub.routing.defaults``,
    the build every evaluation runs too) and the embedder it blends in (None: lexical only)."""
    classifier, config = build_router(profiles, settings.router_embedder)
    log.info("router: %s", config.describe())
    return classifier, config.embedder or None


def addressed_route(agent: str, default_also_sees: Mapping[str, Sequence[str]]) -> Route:
    """The route of a message the transport addressed to ``agent`` (a file in its inbox): as explicit as "/agent"."""
    also = tuple(name for name in default_also_sees.get(agent, ()) if name != agent)
    return Route(agent=agent, also_sees=also, via="explicit")


def local_route(
    text: str,
    window: list[Message],
    reply_to: Message | None,
    *,
    classifier: LocalClassifier,
    settings: Settings,
    default_also_sees: Mapping[str, Sequence[str]],
    agents: Collection[str] | None = None,
    now: float | None = None,
) -> Route:
    """The local router's route of ``text``: zero tokens, pure (embedding included, which
    is why the hub calls it from its database thread, never on the event loop). ``agents``:
    the only agents that may answer (the chat's /settings); None: every agent. ``now`` is
    when the message came (after a long silence it opens a new conversation)."""
    return route(
        text,
        classifier=classifier,
        window=window,
        reply_to=reply_to,
        tail=settings.tail,
        default_also_sees=default_also_sees,
        agents=agents,
        now=now,
    )


async def refine_route(
    local: Route,
    text: str,
    window: list[Message],
    *,
    settings: Settings,
    profiles: Sequence[AgentProfile],
    router_model: ChatModel,
    on_call: Callable[[RouterCall], None] | None = None,
    agents: Collection[str] | None = None,
) -> Route:
    """The local route refined by the LLM router; ``on_call(call)`` records each of its calls
    (its prompt, answer and tokens); ``agents``: the only agents it may choose."""
    return await refine_with_llm(
        local,
        text,
        model=router_model,
        profiles=[p for p in profiles if agents is None or p.name in agents] or profiles,
        window=window,
        timeout=settings.router_timeout,
        model_name=settings.router_model or None,
        on_call=on_call,
    )

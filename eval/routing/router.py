"""The router an evaluation builds: the product's (``hub.routing.defaults``), timed.

:class:`RouterOptions` carries what the command line may change; its defaults are the
hub's own (``HUB_ROUTER_EMBEDDER``, the gate of that setting and engine, the shipped
weights), so that every figure an ``eval`` command prints is what users run, and the
report says which configuration that was.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scopehub.hub.routing import AgentProfile, LocalClassifier
from scopehub.hub.routing.defaults import PRODUCT, build_router

from .metrics import percentile

__all__ = ["RouterOptions", "build_classifier", "embedding_figures"]


@dataclass(frozen=True)
class RouterOptions:
    """How an evaluation builds its routers; every default is the product's.

    ``setting`` is a ``HUB_ROUTER_EMBEDDER`` value (None: the environment's, as the hub
    reads it). ``semantic_weight`` / ``semantic_gate`` override the product's for
    experiments; ``message_cache`` keeps the dataset's message vectors on disk between
    folds and runs (latencies then count only texts embedded afresh); ``overrides`` are
    further :class:`LocalClassifier` arguments (experiments only).
    """

    setting: str | None = None
    semantic_weight: float | None = None
    semantic_gate: float | str | None = PRODUCT
    message_cache: bool = True
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def resolved_setting(self) -> str:
        if self.setting is not None:
            return self.setting
        from scopehub.hub.settings import load_settings

        return load_settings().router_embedder


class _TimedEmbedder:
    """An embedder that records how long each call took (the eval reports it)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.latencies_ms: list[float] = []
        self.model_id = getattr(embedder, "model_id", type(embedder).__name__)
        self.engine = getattr(embedder, "engine", "")

    def embed(self, texts: list[str]) -> list[Any]:
        started = time.perf_counter()
        vectors = self.embedder.embed(texts)
        self.latencies_ms.append((time.perf_counter() - started) * 1000)
        return vectors

    def embed_passages(self, texts: list[str]) -> list[Any]:
        return getattr(self.embedder, "embed_passages", self.embedder.embed)(texts)


def build_classifier(profiles: Sequence[AgentProfile], options: RouterOptions | None = None) -> tuple[LocalClassifier, dict[str, Any]]:
    """The product's router over ``profiles`` (as ``options`` change it) and the figures of
    its build for the report: its configuration, build time, examples embedded.

    Examples and descriptions are embedded through the disk cache (as in the hub). With
    ``message_cache`` the dataset's messages are too, so that folds and reruns embed each
    text once; the embedding latencies are then those of the texts embedded in this run.
    """
    from scopehub.hub.routing.semantic import (
        CachedEmbedder,
        resolve_embedder,
        shared_cache,
        shared_embedder,
    )

    options = options or RouterOptions()
    started = time.perf_counter()
    setting = options.resolved_setting()
    name = resolve_embedder(setting)
    timed = None
    embedder: Any = None
    cache: Any = None
    if name:
        raw = shared_embedder(name)
        cache = shared_cache(raw)
        timed = _TimedEmbedder(raw)
        embedder = CachedEmbedder(timed, cache) if options.message_cache else timed
        embedder.engine = timed.engine  # type: ignore[union-attr]
    classifier, config = build_router(
        profiles,
        setting,
        embedder=embedder,
        cache=cache,
        semantic_weight=options.semantic_weight,
        semantic_gate=options.semantic_gate,
        **dict(options.overrides),
    )
    info: dict[str, Any] = {
        "router": config.as_dict(),
        "configuration": config.describe(),
        "embedder": config.embedder or None,
        "build_s": round(time.perf_counter() - started, 3),
    }
    if timed is not None and classifier.semantic is not None:
        info.update(
            {
                "semantic_weight": config.semantic_weight,
                "semantic_gate": config.semantic_gate,
                "embedded_examples": sum(len(set(p.examples)) for p in profiles),
                "examples_set_apart": getattr(classifier.semantic, "set_apart", 0),
                "message_cache": options.message_cache,
            }
        )
        timed.latencies_ms.clear()  # from here on: one call per new message
        info["_timed"] = timed
    return classifier, info


def embedding_figures(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` with the embedding calls' count and latencies (the timer taken out)."""
    timed = info.pop("_timed", None)
    if timed is None:
        return info
    return {
        **info,
        "embedded_messages": len(timed.latencies_ms),
        "embed_p50_ms": round(percentile(timed.latencies_ms, 50), 3),
        "embed_p95_ms": round(percentile(timed.latencies_ms, 95), 3),
    }

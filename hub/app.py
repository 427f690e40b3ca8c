"""The composition root: settings → store, model, facts, agents → a ready ``Hub``.

Transports and the CLI build their hub here, so every surface runs the same hub.
"""

from __future__ import annotations

import logging
from pathlib import Path

from scopehub.agents import AgentRegistry, discover_agents, search_memory
from scopehub.hub.errors import ConfigError, ModelNotConfigured
from scopehub.hub.models import ChatModel, LiteLLMModel
from scopehub.hub.orchestrator import Deps, Hub
from scopehub.hub.settings import Settings
from scopehub.memory import Store

__all__ = ["build_hub", "build_model", "open_store", "teach_tools"]

log = logging.getLogger(__name__)


def open_store(settings: Settings) -> Store:
    """The configured SQLite store."""
    return Store(Path(settings.db))


def build_model(settings: Settings, *, required: bool = True) -> ChatModel | None:
    """The agents' model: ``HUB_MODEL`` through litellm, else the embedded local model."""
    if settings.model:
        return LiteLLMModel(
            settings.model,
            api_base=settings.api_base or None,
            api_key=settings.api_key or None,
            timeout=settings.model_timeout,
            retries=settings.model_retries,
        )
    try:
        from scopehub.hub.models.local import LocalModel  # the optional `local` extra
    except ImportError:
        LocalModel = None
    if LocalModel is not None:
        try:
            return LocalModel.from_package(timeout=settings.model_timeout)
        except ModelNotConfigured:
            pass
    if required:
        raise ModelNotConfigured(
            "no model configured: set HUB_MODEL to a litellm model string (e.g. openai/gpt-4o-mini with OPENAI_API_KEY, "
            "or ollama/llama3.2 with HUB_API_BASE=http://localhost:11434), or install the embedded model with "
            "pip install 'scopehub[local]'"
        )
    return None


def teach_tools(model: ChatModel | None, registry: AgentRegistry) -> None:
    """Hand the tools' example utterances to a model that uses them (the embedded one).

    Hosted models never see them: they are not part of the tool schemas the hub sends.
    """
    learn = getattr(model, "learn_tools", None)
    if not callable(learn):
        return
    from scopehub.hub.models.planner import Demo

    catalogue: dict[str, list[Demo]] = {}
    for spec in registry:
        for tool in (*spec.tools, search_memory):
            demos = catalogue.setdefault(tool.name, [])
            for example in tool.examples:
                demo = Demo(example.text, example.args, example.earlier)
                if demo not in demos:
                    demos.append(demo)
    # "To-do list: add, list ..." -> "to-do list": what each specialist is for, in a few words.
    topics = [spec.description.split(":", 1)[0].strip().lower() for spec in registry if ":" in spec.description]
    about = f"You are part of a chat assistant for {', '.join(topics[:-1])} and {topics[-1]}." if len(topics) > 1 else ""
    learn(catalogue, about)


def build_router_model(settings: Settings) -> ChatModel | None:
    """The optional LLM router model (``HUB_ROUTER_MODEL``)."""
    if not settings.router_model:
        return None
    return LiteLLMModel(
        settings.router_model,
        api_base=settings.api_base or None,
        api_key=settings.api_key or None,
        timeout=settings.router_timeout,
        retries=0,
    )


def build_hub(
    settings: Settings,
    *,
    store: Store | None = None,
    model: ChatModel | None = None,
    registry: AgentRegistry | None = None,
    model_required: bool = True,
) -> Hub:
    """A hub wired from settings; pass ``store``/``model``/``registry`` to override."""
    if registry is None:
        registry = discover_agents()
        for module, reason in registry.errors.items():
            log.error("agent %s not loaded: %s", module, reason)
    if not len(registry):
        raise ConfigError("no agent could be loaded")
    store = store if store is not None else open_store(settings)
    if model is None:
        model = build_model(settings, required=model_required)
    teach_tools(model, registry)
    facts = None
    try:
        from scopehub.hub.facts import FactKeeper
    except ImportError:
        FactKeeper = None
    if FactKeeper is not None:
        facts = FactKeeper(store=store, model=model)
    deps = Deps(store=store, settings=settings, model=model, router_model=build_router_model(settings), facts=facts)
    return Hub(deps, registry)

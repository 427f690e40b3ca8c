"""The composition root: settings → store, model, facts, agents → a ready ``Hub``.

Transports and the CLI build their hub here, so every surface runs the same hub.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from scopehub.agents import AgentRegistry, discover_agents, search_memory
from scopehub.hub.digest import DigestKeeper, Reflector
from scopehub.hub.errors import ConfigError, ModelNotConfigured
from scopehub.hub.models import ChatModel, LiteLLMModel
from scopehub.hub.orchestrator import Deps, Hub
from scopehub.hub.settings import Settings
from scopehub.memory import Store
from scopehub.memory import open_store as memory_open_store

__all__ = ["build_digest", "build_hub", "build_model", "open_store", "teach_tools"]

log = logging.getLogger(__name__)


def open_store(settings: Settings) -> Store:
    """The configured store (``HUB_DB``)."""
    return memory_open_store(settings.db, pg_erase_vacuum=settings.pg_erase_vacuum, pg_lock_timeout=settings.pg_lock_timeout)


def build_model(settings: Settings, *, required: bool = True) -> ChatModel | None:
    """The agents' model: ``HUB_MODEL`` through litellm, else the embedded local model."""
    if settings.model:
        return LiteLLMModel(
            settings.model,
            api_base=settings.api_base or None,
            api_key=settings.api_key or None,
            timeout=settings.model_timeout,
            retries=settings.model_retries,
            cache_marks=settings.cache_marks,
        )
    local_problem = ""
    try:
        # Our own module: it imports llama_cpp only when a model is built, so an ImportError
        # here is a broken checkout or install, never a missing extra.
        from scopehub.hub.models.engine import XLlamaEngine
        from scopehub.hub.models.local import LocalModel
    except ImportError as exc:
        log.error("the embedded model is off: scopehub.hub.models.local cannot be imported", exc_info=True)
        local_problem = f"scopehub.hub.models.local cannot be imported ({exc})"
    else:
        try:
            return LocalModel.from_package(
                settings.local_model, n_threads=settings.local_threads, embedder=settings.router_embedder, timeout=settings.model_timeout
            )
        except ModelNotConfigured as exc:
            local_problem = str(exc)
            if XLlamaEngine.available() is not None:
                log.debug("no embedded model: %s", exc)  # the `local` extra is simply not installed
            else:  # installed, but broken or incomplete
                log.warning("the embedded model is off: %s", exc, exc_info=exc)
    if required:
        raise ModelNotConfigured(
            "no model configured: set HUB_MODEL to a litellm model string (e.g. openai/gpt-4o-mini with OPENAI_API_KEY, "
            "or ollama_chat/llama3.2 with HUB_API_BASE=http://localhost:11434), or install the embedded model: "
            "pip install -e '.[local]' in a checkout, pip install 'scopehub[local]' otherwise"
            + (f" (embedded model: {local_problem})" if local_problem else "")
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
    schemas = {tool.name: tool.schema() for spec in registry for tool in (*spec.tools, search_memory)}
    if "schemas" in inspect.signature(learn).parameters:  # the embedded model warms its prompts up with them
        keywords = {tool.name: tool.keywords for spec in registry for tool in (*spec.tools, search_memory) if tool.keywords}
        learn(catalogue, about, schemas=list(schemas.values()), keywords=keywords)
    else:
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
        # The bot still answers, without persistent facts; say so loudly, with the cause.
        log.error("persistent facts are off: scopehub.hub.facts cannot be imported", exc_info=True)
    else:
        facts = FactKeeper(store=store, model=model)
    digest, reflector = build_digest(settings, store, model, registry)
    deps = Deps(
        store=store,
        settings=settings,
        model=model,
        router_model=build_router_model(settings),
        facts=facts,
        tool_services={"dispatch": _outbox_writer(settings)},
        digest=digest,
        reflector=reflector,
    )
    return Hub(deps, registry)


def _outbox_writer(settings: Settings):
    """What the ``dispatch`` tool calls: write a file into an outside team's Maildir outbox.

    The Maildir package is imported on the first dispatch, not at every start."""
    from scopehub.hub.settings import maildir_root

    root = maildir_root(settings)

    def dispatch(*args: Any, **kwargs: Any) -> Any:
        from scopehub.hub.transports.maildir import dispatch_out

        return dispatch_out(root, *args, **kwargs)

    return dispatch


def build_digest(
    settings: Settings, store: Store, model: ChatModel | None, registry: AgentRegistry
) -> tuple[DigestKeeper, Reflector]:
    """The digest of older history and reflection, sharing one mode (``HUB_DIGEST_MODE``).

    ``HUB_REFLECT_MODEL`` gives reflection a model of its own: it writes lasting knowledge
    (seed 003: the model matters more there than for any other call).
    """
    names = tuple(registry.names)
    digest = DigestKeeper(store, settings, model=model, names=names)
    if settings.reflect_model and settings.digest_mode != "extractive":
        reflect_with = LiteLLMModel(
            settings.reflect_model,
            api_base=settings.api_base or None,
            api_key=settings.api_key or None,
            timeout=settings.digest_timeout,
            retries=settings.model_retries,
        )
        reflector = Reflector(store, settings, model=reflect_with, mode="model", names=names)
    else:
        reflector = Reflector(store, settings, model=model, names=names)
    log.debug("digest: %s; reflection: %s", digest.mode, reflector.mode)
    return digest, reflector

"""The hub: store → route → context → run → reply.

The folders follow the data flow: :mod:`.routing` decides who answers, :mod:`.context`
builds what that agent is sent, :mod:`.models` and :mod:`.runtime` run it,
:mod:`.orchestrator` (the ``Hub``) ties them to the store, :mod:`.facts` keeps what must
never scroll away, :mod:`.transports` talk to people and programs, and :mod:`.cli` is the
command line. :mod:`.app` is the composition root that builds a ready hub from settings.

Importing this package is cheap: litellm and python-telegram-bot load only when used.
"""

from scopehub.hub.context import (
    AgentPrompt,
    Context,
    Tokenizer,
    agent_prompt,
    build_context,
    get_tokenizer,
    select_history,
)
from scopehub.hub.errors import (
    ConfigError,
    HubError,
    ModelError,
    ModelNotConfigured,
    ModelUnavailable,
    RouterError,
    ToolError,
)
from scopehub.hub.models import ChatModel, LiteLLMModel, ModelResponse, ToolCall
from scopehub.hub.orchestrator import Deps, Hub, Inbound, Reply
from scopehub.hub.routing import AgentProfile, LocalClassifier, Route, route
from scopehub.hub.settings import Settings, load_settings

__all__ = [
    "AgentProfile",
    "AgentPrompt",
    "ChatModel",
    "ConfigError",
    "Context",
    "Deps",
    "Hub",
    "HubError",
    "Inbound",
    "LiteLLMModel",
    "LocalClassifier",
    "ModelError",
    "ModelNotConfigured",
    "ModelResponse",
    "ModelUnavailable",
    "Reply",
    "Route",
    "RouterError",
    "Settings",
    "Tokenizer",
    "ToolCall",
    "ToolError",
    "agent_prompt",
    "build_context",
    "get_tokenizer",
    "load_settings",
    "route",
    "select_history",
]

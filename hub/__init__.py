"""The hub: settings, router, context builder, LLM adapter, runtime, the ``Hub``
orchestrator, transports and the CLI.

Importing this package is cheap: litellm and python-telegram-bot load only when used.
"""

from .context import AgentPrompt, Context, build_context, select_history
from .errors import (
    ConfigError,
    HubError,
    ModelError,
    ModelNotConfigured,
    ModelUnavailable,
    RouterError,
    ToolError,
)
from .hub import Deps, Hub, Inbound, Reply, agent_prompt
from .llm import ChatModel, FunctionModel, LiteLLMModel, ModelResponse, ScriptedModel, ToolCall
from .router import AgentProfile, LocalClassifier, Route, route
from .settings import Settings, load_settings
from .tokens import Tokenizer, get_tokenizer

__all__ = [
    "AgentProfile",
    "AgentPrompt",
    "ChatModel",
    "ConfigError",
    "Context",
    "Deps",
    "FunctionModel",
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
    "ScriptedModel",
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

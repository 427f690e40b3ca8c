"""The documented error tree. Library code raises these; only the edges (CLI, chat
transports) turn them into short messages for people.

    HubError
    ├── ConfigError            a setting is missing or invalid (names the variable)
    ├── ModelError             the model could not answer
    │   ├── ModelNotConfigured no model is configured at all
    │   ├── ModelUnavailable   timeouts, rate limits, provider errors after retries
    │   └── ModelRequestBlocked a real model request in a test run
    ├── RouterError            the LLM router's answer was unusable (always caught: local fallback)
    ├── ToolError              a tool failed; becomes text for the model, never a crash
    └── AgentLoadError         an agent module failed to import or declare itself
    StoreError (memory.errors) the store could not do what was asked
    ├── InvalidScope
    └── InvalidRecord
"""

from __future__ import annotations

from scopehub.memory.errors import InvalidRecord, InvalidScope, StoreError

__all__ = [
    "AgentLoadError",
    "ConfigError",
    "HubError",
    "InvalidRecord",
    "InvalidScope",
    "ModelError",
    "ModelNotConfigured",
    "ModelRequestBlocked",
    "ModelUnavailable",
    "RouterError",
    "StoreError",
    "ToolError",
]


class HubError(Exception):
    """Base class of the hub's own errors."""


class ConfigError(HubError):
    """A setting is missing or invalid; the message names the variable."""


class ModelError(HubError):
    """The model could not produce an answer."""


class ModelNotConfigured(ModelError):
    """Neither HUB_MODEL nor the embedded local model is available."""


class ModelUnavailable(ModelError):
    """The provider kept failing (timeout, rate limit, server error) after retries."""


class ModelRequestBlocked(ModelError):
    """A test run tried to reach a real model provider."""


class RouterError(HubError):
    """The LLM router's answer could not be used."""


class ToolError(HubError):
    """A tool could not do what the model asked; the message is shown to the model."""


class AgentLoadError(HubError):
    """An agent module could not be loaded; the message names the module."""

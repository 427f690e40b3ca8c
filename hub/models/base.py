"""The model behind a one-method protocol: ``ChatModel.complete`` takes provider messages
and tool schemas and returns one assistant turn.

With ``HUB_TEST_GUARD`` set (the test suite sets it), a request to anything but a loopback
server raises :class:`~scopehub.hub.errors.ModelRequestBlocked`.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlparse

from scopehub.hub.errors import ModelRequestBlocked

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model asked for; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> dict[str, Any]:
        """Arguments as a dict; raises ValueError on JSON that is not an object."""
        if not self.arguments or not self.arguments.strip():
            return {}
        value = json.loads(self.arguments)
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One assistant turn: text, tool calls, and the provider's usage."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    prompt_tokens: int | None = None  # all input tokens, cached ones included
    completion_tokens: int | None = None
    model: str | None = None
    # Prompt caching as the provider reported it; None: it reported nothing about caching.
    cached_tokens: int | None = None  # input tokens read from the provider's cache
    cache_write_tokens: int | None = None  # input tokens written to it (Anthropic bills them extra)

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation for the next step."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                for call in self.tool_calls
            ]
        return message


@runtime_checkable
class ChatModel(Protocol):
    """Anything that can answer one chat turn."""

    name: str

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        model: str | None = None,
        json_mode: bool = False,
        timeout: float | None = None,
    ) -> ModelResponse: ...


def _is_loopback(api_base: str | None) -> bool:
    if not api_base:
        return False
    host = urlparse(api_base).hostname or ""
    return host in {"localhost", "::1"} or host.startswith("127.")


def check_request_allowed(model: str, api_base: str | None) -> None:
    """In tests, only loopback servers and litellm's offline mock may be reached."""
    if os.environ.get("HUB_TEST_GUARD") and not _is_loopback(api_base):
        raise ModelRequestBlocked(
            f"real model request to {model!r} (api_base={api_base!r}) blocked in tests: use the fake server or ScriptedModel"
        )


_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def unfenced(content: str) -> str:
    """A model's answer without the code fence some models put around JSON even in JSON mode."""
    text = content.strip()
    return _FENCE.sub("", text) if text.startswith("```") else text


def parse_json_answer(content: str | None, who: str, logger: logging.Logger) -> tuple[bool, Any]:
    """``(True, data)`` for a model's JSON answer; ``(False, None)`` when it is empty or not JSON.

    Both failures are logged as ``"<who> returned nothing"`` / ``"<who> returned malformed JSON"``.
    """
    if not content or not content.strip():
        logger.warning("%s returned nothing", who)
        return False, None
    try:
        return True, json.loads(unfenced(content))
    except ValueError:
        logger.warning("%s returned malformed JSON: %.200r", who, content)
        return False, None

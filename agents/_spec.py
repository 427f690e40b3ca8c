"""``AgentSpec`` and ``Tool``: an agent is a frozen, module-level declaration.

A tool is a function ``(ctx: ToolContext, args: ArgsModel) -> str`` whose arguments
are a pydantic model; its JSON schema is derived from that model and kept tight,
because every schema is paid for on every call.

A tool that changes something records it as an event in the same transaction::

    with ctx.transaction():
        task = memory.add_task(ctx.store, ctx.scope, title)
        ctx.emit("task.created", {"task_id": task.id, "title": task.title})

An invalid payload raises ``memory.InvalidEvent`` naming the field; the runtime turns it
into text for the model, and the row is rolled back with the event.
"""

from __future__ import annotations

import inspect
import json
import re
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from scopehub.memory import (
    Event,
    InvalidEvent,
    Store,
    emit_event,
    event_types,
    is_event_pattern,
)

__all__ = ["AgentSpec", "Channel", "Tool", "ToolContext", "ToolExample", "tool"]

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{1,31}$")
_CHANNEL_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_EVENT_TYPE_RE = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$")


@dataclass(frozen=True)
class ToolContext:
    """What a tool may touch: the store, within one scope, at one moment, for one agent."""

    store: Store
    scope: str
    chat: str | None = None
    message_id: int | None = None
    clock: Callable[[], float] = time.time
    extra: dict[str, Any] = field(default_factory=dict)
    agent: str | None = None  # the agent whose call runs the tool; the runtime sets it

    def now(self) -> float:
        return self.clock()

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """The store's transaction (re-entrant): wrap a row write and its ``emit`` in it."""
        return self.store.transaction()

    def emit(
        self,
        type: str,
        payload: Mapping[str, Any] | BaseModel,
        *,
        target: str | None = None,
        agent: str | None = None,
    ) -> Event:
        """Record an event of this scope, caused by the current message, in the current transaction.

        The emitter is ``agent`` when given (a built-in agent's tools name their own agent,
        so they emit correctly when called outside the runtime, as tests and evaluations
        do), else the context's agent. Raises ``memory.InvalidEvent`` naming the field.
        """
        emitter = agent or self.agent
        if not emitter:
            raise InvalidEvent(f"event {type}: no emitting agent (the runtime sets ToolContext.agent)")
        return emit_event(
            self.store,
            self.scope,
            emitter,
            type,
            payload,
            target=target,
            message_id=self.message_id,
            now=self.now(),
        )


ToolFunction = Callable[[ToolContext, Any], "str | Awaitable[str]"]


@dataclass(frozen=True, slots=True)
class ToolExample:
    """An utterance that asks for a tool, optionally with the arguments it means.

    ``earlier`` is what the conversation said just before, when the utterance refers to it
    ("put that on my tasks"). Examples are never sent to a hosted model: a local model
    uses them to choose the tool and as demonstrations of its arguments.
    """

    text: str
    arguments: str | None = None  # JSON object text (kept as text so the example stays hashable)
    earlier: str = ""

    @property
    def args(self) -> dict[str, Any] | None:
        """The arguments as a dict, or None when the example shows none."""
        return json.loads(self.arguments) if self.arguments is not None else None


ExampleLike = str | tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str] | ToolExample


def _example(value: ExampleLike) -> ToolExample:
    if isinstance(value, ToolExample):
        return value
    if isinstance(value, str):
        return ToolExample(value)
    text, arguments, *rest = value
    return ToolExample(text, json.dumps(arguments, ensure_ascii=False), rest[0] if rest else "")


def _compact_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema without titles and other noise the model need not read."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            cleaned = {}
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    # Property names are data, not schema keywords: keep every one.
                    cleaned[key] = {prop: strip(sub) for prop, sub in value.items()}
                    continue
                if key == "title":
                    continue
                if key == "anyOf" and isinstance(value, list):
                    # Optional[X] -> X; a missing argument already means "not given".
                    options = [v for v in value if v != {"type": "null"}]
                    if len(options) == 1:
                        cleaned.update(strip(options[0]))
                        continue
                if key == "default":
                    # Omitting an argument already means "the tool's default": not worth
                    # tokens on every call.
                    continue
                cleaned[key] = strip(value)
            return cleaned
        if isinstance(node, list):
            return [strip(item) for item in node]
        return node

    schema = strip(model.model_json_schema())
    schema.pop("description", None)
    schema.setdefault("properties", {})
    schema["type"] = "object"
    return schema


class Tool(BaseModel):
    """One tool: name, description, argument model, and the function that runs it."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    description: str
    args: type[BaseModel]
    func: Any  # ToolFunction; Any keeps pydantic from wrapping the callable
    examples: tuple[ToolExample, ...] = ()
    # Words that say this tool's action whatever the object ("delete", "lösche", "annule"): a
    # small model picks its tool from them as from the examples. Never sent to a hosted model.
    keywords: tuple[str, ...] = ()

    @field_validator("examples", mode="before")
    @classmethod
    def _examples(cls, value: Any) -> tuple[ToolExample, ...]:
        return tuple(_example(item) for item in value or ())

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not re.match(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$", value):
            raise ValueError(f"tool name {value!r} must be a function-like identifier")
        return value

    def schema(self) -> dict[str, Any]:
        """The OpenAI-style function schema sent to the model."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": _compact_schema(self.args)},
        }

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> str:
        """Validate arguments and run; raises on bad arguments or a failing tool."""
        parsed = self.args.model_validate(arguments)
        result = self.func(ctx, parsed)
        if inspect.isawaitable(result):
            result = await result
        return result if isinstance(result, str) else str(result)


def tool(
    func: ToolFunction | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    examples: Iterable[ExampleLike] = (),
    keywords: Iterable[str] = (),
) -> Any:
    """Declare a tool from ``def f(ctx: ToolContext, args: SomeModel) -> str``.

    The description is the docstring's first line; the argument schema comes from
    ``SomeModel`` (its field descriptions included). ``examples`` are utterances that ask
    for this tool, each a string or ``(utterance, arguments)`` or ``(utterance, arguments,
    earlier)``; the embedded model picks tools and writes arguments from them.
    """

    def wrap(function: ToolFunction) -> Tool:
        hints = get_type_hints(function)
        params = list(inspect.signature(function).parameters)
        if len(params) != 2:
            raise TypeError(f"tool {function.__name__} must take (ctx, args)")
        args_model = hints.get(params[1])
        if not (isinstance(args_model, type) and issubclass(args_model, BaseModel)):
            raise TypeError(f"tool {function.__name__}: annotate its second parameter with a pydantic model")
        doc = description or (inspect.getdoc(function) or "").strip().splitlines()[0:1]
        text = doc if isinstance(doc, str) else (doc[0] if doc else function.__name__)
        return Tool(
            name=name or function.__name__, description=text, args=args_model, func=function, examples=tuple(examples), keywords=tuple(keywords)
        )

    return wrap(func) if func is not None else wrap


class Channel(BaseModel):
    """A talk channel (seed 000's talkspace): a name, what it is for, and who belongs to it.

    Declared in an ``AgentSpec`` (``channels=(Channel(...),)``); the declaring agent always
    belongs to it. ``members`` names agents; ``"*"`` means every agent. The hub adds the
    ``team`` channel every agent belongs to.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    purpose: str = Field(min_length=1, max_length=200)
    members: tuple[str, ...] = ()

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _CHANNEL_RE.match(value):
            raise ValueError(f"channel name {value!r}: use 1-32 lower-case letters, digits, - or _ starting with a letter")
        return value

    @field_validator("members")
    @classmethod
    def _valid_members(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name != "*" and not _NAME_RE.match(name):
                raise ValueError(f"channel members: {name!r} is not an agent name (or '*' for everyone)")
        return value

    def includes(self, agent: str) -> bool:
        """Whether ``agent`` belongs to the channel."""
        return "*" in self.members or agent in self.members


class AgentSpec(BaseModel):
    """An agent: what the router reads (description, examples) and what the model gets."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = Field(description="one or two sentences the router reads")
    instructions: str = Field(description="the agent's persona and rules, kept short: paid on every call")
    examples: tuple[str, ...] = ()  # what the router reads; the tools' examples are added to it
    keywords: tuple[str, ...] = ()  # domain nouns that name this agent ("email", "mail")
    tools: tuple[Tool, ...] = ()
    model: str | None = None
    also_sees: tuple[str, ...] = ()
    # Coordination. Event type names are checked for form here, and against the registry by
    # check_event_types() once every plugin has registered its types (discovery does it):
    # a plugin agent may name a type its own module registers after the spec is built.
    emits: tuple[str, ...] = ()  # event types its tools emit
    interests: tuple[str, ...] = ()  # broadcast event types it is shown ("reminder.*" allowed)
    collaborators: tuple[str, ...] = ()  # agents whose recent events it is made aware of
    # "auto": search_memory is offered when the call may need the archive (hub.context.offer);
    # "always": on every call (an agent whose job is finding what was kept).
    offer_search: Literal["auto", "always"] = "auto"
    # Talk channels it declares (it belongs to each); every agent also belongs to "team".
    channels: tuple[Channel, ...] = ()
    # Offer the hub's ``team`` tool (channels, lessons, goals, plans). Its schema is paid on
    # every call, so only agents that use it get it; declaring a channel implies it.
    team_tool: bool = False

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _NAME_RE.match(value):
            raise ValueError(f"agent name {value!r}: use 2-32 lower-case letters, digits or _ starting with a letter")
        return value

    @field_validator("emits", "interests")
    @classmethod
    def _valid_event_names(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        for name in value:
            if not (_EVENT_TYPE_RE.match(name) or (info.field_name == "interests" and is_event_pattern(name))):
                raise ValueError(f"{info.field_name}: {name!r} is not an event type name such as 'task.created'")
        return value

    @model_validator(mode="after")
    def _routed_by_tool_examples(self) -> AgentSpec:
        # A tool's example utterances say what its agent is asked for, in more wordings and
        # languages than the agent's own list ("Avisa al equipo de finanzas ...", "note: call
        # the bank"): the router reads them as the agent's examples too (after its own, no
        # repeats). Leave-phrasings-out (eval phrasings --folds 5, 317): 0.885 -> 0.908.
        extra = [example.text for tool in self.tools for example in tool.examples]
        if extra:
            object.__setattr__(self, "examples", tuple(dict.fromkeys((*self.examples, *extra))))
        return self

    @field_validator("collaborators")
    @classmethod
    def _valid_collaborators(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not _NAME_RE.match(name):
                raise ValueError(f"collaborators: {name!r} is not an agent name")
        return value

    def check_event_types(self, known: Iterable[str] | None = None) -> list[str]:
        """Problems with ``emits`` and ``interests`` against the registered event types ([] if none).

        ``known`` defaults to every type registered now; call it after plugins have loaded.
        """
        registered = set(known) if known is not None else {entry.name for entry in event_types()}
        problems = [f"{self.name}: emits unknown event type {name!r}" for name in self.emits if name not in registered]
        for name in self.interests:
            if is_event_pattern(name):
                prefix = "" if name == "*" else name[:-1]
                if not any(known_name.startswith(prefix) for known_name in registered):
                    problems.append(f"{self.name}: interest {name!r} matches no registered event type")
            elif name not in registered:
                problems.append(f"{self.name}: interested in unknown event type {name!r}")
        return problems

"""What a turn takes in and gives back (``Inbound``, ``Reply``) and the services it uses (``Deps``)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from scopehub.hub.context.tokens import Tokenizer, get_tokenizer
from scopehub.hub.digest.service import DigestSection
from scopehub.hub.models import ChatModel
from scopehub.hub.settings import Settings
from scopehub.memory import Feedback, Lesson, Message, Store

if TYPE_CHECKING:
    from scopehub.hub.orchestrator._hub import Hub

__all__ = [
    "CommandHandler",
    "Deps",
    "DigestService",
    "FactsService",
    "Inbound",
    "LessonService",
    "ReflectionService",
    "Reply",
]


class DigestService(Protocol):
    """The scope's digest of older history: its section for a call, and its compaction after a reply."""

    def section(self, scope: str, before_id: int | None = None) -> DigestSection: ...

    def due(self, scope: str) -> bool: ...

    async def after_reply(self, scope: str, holder: str, *, due: bool | None = None) -> object: ...


class ReflectionService(Protocol):
    """Reflection into knowledge fragments, run by a transport's schedule or on demand."""

    async def reflect(self, scope: str, holder: str, *, now: float | None = None) -> object: ...

    async def reflect_due(self, holder: str, *, now: float | None = None) -> list[Any]: ...


class FactsService(Protocol):
    """Persistent facts: the block for every call, and learning after a reply."""

    def block(self, scope: str, tokenizer: Tokenizer, budget: int) -> str: ...

    async def after_reply(self, scope: str, message: Message) -> None: ...

    # after_reply in parts, so that the hub reads and writes in steps of its own: the store's
    # part before the model's (None: nothing to learn), the model's, the store's after it.
    def plan_learning(self, scope: str, message: Message) -> Any: ...

    async def consult(self, plan: Any) -> Any: ...

    def keep_learnt(self, plan: Any, answer: Any) -> object: ...


class LessonService(Protocol):
    """Agent lessons: learning one from the person's feedback, after the reply is sent."""

    async def learn(self, feedback: Feedback) -> Lesson: ...


@dataclass
class Deps:
    """The services the hub uses, passed down explicitly."""

    store: Store
    settings: Settings
    model: ChatModel | None = None
    router_model: ChatModel | None = None
    tokenizer: Tokenizer = field(default_factory=get_tokenizer)
    clock: Callable[[], float] = time.time
    facts: FactsService | None = None
    # Services tools may use, by name (``ToolContext.extra``): e.g. "dispatch", which writes
    # into an outside team's Maildir outbox. The composition root fills it.
    tool_services: dict[str, Any] = field(default_factory=dict)
    lessons: LessonService | None = None  # None: the hub's LessonKeeper on ``model``
    digest: DigestService | None = None
    reflector: ReflectionService | None = None


@dataclass(frozen=True)
class Inbound:
    """A message from any transport, normalised."""

    scope: str
    text: str
    chat: str | None = None
    sender: str | None = None
    ext_id: str | None = None  # the transport's id (Telegram message id), unique per scope
    reply_to_ext: str | None = None  # the transport id of the message this replies to
    ts: float | None = None
    addressed: bool = True  # False: store and tag, but do not answer (group chatter)
    agent: str | None = None  # addressed to this agent by the transport (a Maildir inbox): no routing


@dataclass(frozen=True)
class Reply:
    """What the person gets back, with what it cost."""

    text: str
    kind: str = "agent"  # agent | command | error
    agent: str | None = None
    also_sees: tuple[str, ...] = ()
    via: str | None = None
    message_id: int | None = None  # the stored inbound message
    reply_id: int | None = None  # the stored reply
    tokens: dict[str, int] = field(default_factory=dict)
    full_history_tokens: int = 0
    scope: str | None = None


CommandHandler = Callable[["Hub", Inbound, Message, str], Awaitable[str]]

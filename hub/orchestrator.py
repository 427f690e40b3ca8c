"""The Hub: store → route → tag → build context → run the agent → store the reply.

Transports (Telegram, terminal, eval replays) normalise what they receive into an
``Inbound`` and call :meth:`Hub.handle`. The message is committed before any model
call, so a failing model never loses it. Messages of one scope are handled in order
(a lock per scope); different scopes run concurrently.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from scopehub.agents import AgentRegistry, ToolContext, search_memory
from scopehub.hub.context import Context, build_context
from scopehub.hub.context.prompt import agent_prompt
from scopehub.hub.context.tokens import Tokenizer, get_tokenizer
from scopehub.hub.errors import ModelError, ModelNotConfigured, ModelUnavailable
from scopehub.hub.models import ChatModel
from scopehub.hub.routing import AgentProfile, LocalClassifier, Route, refine_with_llm, route
from scopehub.hub.routing.classifier import LATENCY_GATE, SEMANTIC_GATE
from scopehub.hub.runtime import AgentResult, run_agent
from scopehub.hub.settings import Settings
from scopehub.memory import CallRecord, DuplicateMessage, Message, NewMessage, Store, validate_scope

__all__ = ["Deps", "FactsService", "Hub", "Inbound", "Reply"]

log = logging.getLogger(__name__)

MODEL_DOWN_REPLY = "Sorry, I can't reach the language model right now. Your message is saved; please try again in a minute."
MODEL_FAILED_REPLY = "Sorry, the language model rejected this request. Your message is saved; try rephrasing it."
NO_ANSWER_REPLY = "I have no answer to that. Could you rephrase it?"
NO_MODEL_REPLY = "No language model is configured. Set HUB_MODEL (see README). Your message is saved."


class FactsService(Protocol):
    """Persistent facts: the block for every call, and learning after a reply."""

    def block(self, scope: str, tokenizer: Tokenizer, budget: int) -> str: ...

    async def after_reply(self, scope: str, message: Message) -> None: ...


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


class Hub:
    """The orchestrator. Pure decisions (router, context) in, I/O (store, model) at the edges."""

    def __init__(self, deps: Deps, registry: AgentRegistry, *, commands: dict[str, CommandHandler] | None = None) -> None:
        if not len(registry):
            raise ValueError("the hub needs at least one agent")
        self.deps = deps
        self.registry = registry
        self.profiles = [
            AgentProfile(name=s.name, description=s.description, examples=s.examples, keywords=s.keywords) for s in registry
        ]
        self.classifier = self._build_classifier()
        self.prompts = {spec.name: agent_prompt(spec) for spec in registry}
        self.default_also_sees = {spec.name: spec.also_sees for spec in registry if spec.also_sees}
        if commands is None:
            from scopehub.hub.commands import COMMANDS

            commands = COMMANDS
        self.commands = dict(commands)
        # Called after /forget all (a transport cancels that scope's scheduled reminders).
        self.erase_hooks: list[Callable[[str], Awaitable[None]]] = []
        self._locks: dict[str, asyncio.Lock] = {}
        self._background: set[asyncio.Task[Any]] = set()

    def _build_classifier(self) -> LocalClassifier:
        """The local router's scorer: lexical, blended with embeddings when configured (or,
        for ``auto``, when the ``semantic`` extra is installed)."""
        lexical = LocalClassifier(self.profiles)
        from scopehub.hub.routing.semantic import (
            build_semantic_scorer,
            make_embedder,
            resolve_embedder,
            shared_cache,
        )

        self.embedder_name = resolve_embedder(self.deps.settings.router_embedder)
        if not self.embedder_name:
            return lexical
        embedder = make_embedder(self.embedder_name)
        try:
            cache = shared_cache(embedder)  # examples and descriptions only, never messages
        except (OSError, sqlite3.Error) as exc:
            log.warning("embedding cache unavailable (%s); embedding the agents' examples afresh", exc)
            cache = None
        scorer = build_semantic_scorer(self.profiles, embedder, lexical=lexical, cache=cache)
        # auto: on because it is installed, so it must cost English messages nothing.
        gate = LATENCY_GATE if self.deps.settings.router_embedder == "auto" else SEMANTIC_GATE
        return LocalClassifier(self.profiles, semantic=scorer, semantic_gate=gate)

    # -- helpers ----------------------------------------------------------------------
    @property
    def store(self) -> Store:
        return self.deps.store

    @property
    def settings(self) -> Settings:
        return self.deps.settings

    def lock_for(self, scope: str) -> asyncio.Lock:
        lock = self._locks.get(scope)
        if lock is None:
            lock = self._locks[scope] = asyncio.Lock()
        return lock

    def facts_block(self, scope: str) -> str:
        """The scope's facts for every call; fail-open: a failure means no facts, logged."""
        if self.deps.facts is None:
            return ""
        try:
            return self.deps.facts.block(scope, self.deps.tokenizer, self.settings.facts_tokens)
        except Exception:
            log.exception("facts unavailable for %s; answering without them", scope)
            return ""

    def recent(self, scope: str, before_id: int) -> list[Message]:
        """The scope's last HUB_WINDOW messages before ``before_id``."""
        return self.store.window(scope, self.settings.window, up_to=before_id - 1)

    def build_call(self, agent: str, scope: str, recent: list[Message], text: str, also_sees: tuple[str, ...] = ()) -> Context:
        """The context ``agent`` is sent for ``text`` after the ``recent`` messages."""
        return build_context(
            self.prompts[agent],
            recent,
            text,
            tokenizer=self.deps.tokenizer,
            also_sees=also_sees,
            facts_block=self.facts_block(scope),
            window=self.settings.window,
            tail=self.settings.tail,
            message_tokens=self.settings.message_tokens,
        )

    def context_for(self, agent: str, scope: str, message: Message, also_sees: tuple[str, ...] = ()) -> Context:
        """Exactly what ``agent`` is sent for ``message`` (the ``agents-hub context`` command)."""
        return self.build_call(agent, scope, self.recent(scope, message.id), message.text, also_sees)

    # -- the request path -----------------------------------------------------------------
    async def handle(self, inbound: Inbound) -> Reply | None:
        """Store, route and answer one message; ``None`` when it is stored but not answered."""
        scope = validate_scope(inbound.scope)
        async with self.lock_for(scope):
            return await self._handle(inbound)

    async def _handle(self, inbound: Inbound) -> Reply | None:
        store = self.store
        reply_to = store.find_ext(inbound.scope, inbound.reply_to_ext) if inbound.reply_to_ext else None
        message = store.find_ext(inbound.scope, inbound.ext_id) if inbound.ext_id is not None else None
        if message is not None:
            # A redelivery (transport retry, restart re-sending) is never stored twice. It is
            # answered only if the first delivery was stored but never answered (a crash in
            # between); commands are not re-run.
            if message.via == "command" or not inbound.addressed or store.is_answered(message.id):
                log.info("message %s of %s was already handled; ignoring the redelivery", inbound.ext_id, inbound.scope)
                return None
            log.info("message %s of %s was stored but never answered; answering it now", inbound.ext_id, inbound.scope)
        else:
            try:
                message = store.append(
                    NewMessage(
                        scope=inbound.scope,
                        role="user",
                        text=inbound.text,
                        ts=inbound.ts if inbound.ts is not None else self.deps.clock(),
                        sender=inbound.sender,
                        chat=inbound.chat,
                        ext_id=inbound.ext_id,
                        reply_to=reply_to.id if reply_to else None,
                    )
                )
            except DuplicateMessage:
                # Another process stored the same delivery a moment ago; it answers it.
                log.info("message %s of %s is being handled elsewhere", inbound.ext_id, inbound.scope)
                return None
        # Commands act only when addressed to us: "/forget@other_bot all" in a group must not erase.
        command = self._command_of(inbound.text) if inbound.addressed else None
        if command is not None:
            name, argument = command
            store.set_route(message.id, "hub", (), "command")
            try:
                text = await self.commands[name](self, inbound, message, argument)
            except Exception:
                log.exception("command /%s failed in %s", name, inbound.scope)
                text = f"/{name} failed; nothing was lost. Please try again."
            return Reply(text=text, kind="command", agent="hub", via="command", message_id=message.id, scope=inbound.scope)

        window = self.recent(inbound.scope, message.id)
        decision = await self._route(inbound.text, window, reply_to)
        store.set_route(message.id, decision.agent, decision.also_sees, decision.via)
        if not inbound.addressed:
            return None
        return await self._answer(inbound, message, decision, window)

    def _command_of(self, text: str) -> tuple[str, str] | None:
        stripped = text.strip()
        if not stripped.startswith("/"):
            return None
        head, _, rest = stripped[1:].partition(" ")
        name = head.split("@", 1)[0].lower()
        if name in self.commands and name not in self.registry:
            return name, rest.strip()
        return None

    async def _route(self, text: str, window: list[Message], reply_to: Message | None) -> Route:
        routing = functools.partial(
            route,
            text,
            classifier=self.classifier,
            window=window,
            reply_to=reply_to,
            tail=self.settings.tail,
            default_also_sees=self.default_also_sees,
        )
        # Embedding a message takes milliseconds of CPU: keep it off the event loop.
        local = await asyncio.to_thread(routing) if self.embedder_name else routing()
        if self.deps.router_model is None:
            return local
        return await refine_with_llm(
            local,
            text,
            model=self.deps.router_model,
            profiles=self.profiles,
            window=window,
            timeout=self.settings.router_timeout,
            model_name=self.settings.router_model or None,
        )

    async def _answer(self, inbound: Inbound, message: Message, decision: Route, window: list[Message]) -> Reply:
        spec = self.registry[decision.agent]
        text_for_agent = decision.text if decision.text else inbound.text
        context = self.build_call(spec.name, inbound.scope, window, text_for_agent, decision.also_sees)
        base = Reply(
            text="",
            agent=spec.name,
            also_sees=decision.also_sees,
            via=decision.via,
            message_id=message.id,
            tokens=context.tokens,
            full_history_tokens=context.full_history_tokens,
            scope=inbound.scope,
        )
        model = self.deps.model
        model_name = spec.model or None
        started = time.perf_counter()
        ok = True
        result: AgentResult | None = None
        try:
            if model is None:
                raise ModelNotConfigured("no model configured")
            tool_ctx = ToolContext(
                store=self.store,
                scope=inbound.scope,
                chat=inbound.chat,
                message_id=message.id,
                clock=self.deps.clock,
                extra={"timezone": self.settings.timezone},
            )
            result = await run_agent(
                context.messages,
                (*spec.tools, search_memory),
                model,
                tool_ctx,
                max_steps=self.settings.max_tool_steps,
                model_name=model_name,
                schemas=context.tools,
            )
            text = result.text or NO_ANSWER_REPLY
        except ModelNotConfigured:
            ok, text = False, NO_MODEL_REPLY
        except ModelUnavailable as exc:
            log.warning("model unavailable for %s/%s: %s", inbound.scope, spec.name, exc)
            ok, text = False, MODEL_DOWN_REPLY
        except ModelError as exc:
            log.warning("model refused %s/%s: %s", inbound.scope, spec.name, exc)
            ok, text = False, MODEL_FAILED_REPLY
        latency_ms = (time.perf_counter() - started) * 1000
        # The reply is stored before the call is recorded: a crash in between must leave the
        # message looking unanswered, so that its redelivery is answered (Store.is_answered).
        stored = None
        if ok:
            stored = self.store.append(
                NewMessage(
                    scope=inbound.scope,
                    role="agent",
                    text=text,
                    ts=self.deps.clock(),
                    agent=spec.name,
                    also_sees=decision.also_sees,
                    via=decision.via,
                    chat=inbound.chat,
                    reply_to=message.id,
                )
            )
        self.store.record_call(
            CallRecord(
                scope=inbound.scope,
                agent=spec.name,
                message_id=message.id,
                via=decision.via,
                also_sees=decision.also_sees,
                tokens=context.tokens,
                full_history_tokens=context.full_history_tokens,
                model=(result.model if result else None) or model_name or (model.name if model else None),
                latency_ms=latency_ms,
                prompt_tokens=result.prompt_tokens if result else None,
                completion_tokens=result.completion_tokens if result else None,
                ok=ok,
                extra={"tool_calls": result.tool_calls} if result and result.tool_calls else {},
            )
        )
        if stored is None:
            return Reply(**{**base.__dict__, "text": text, "kind": "error"})
        return Reply(**{**base.__dict__, "text": text, "reply_id": stored.id})

    # -- after the reply is sent ------------------------------------------------------------
    async def after_send(self, reply: Reply | None) -> None:
        """Learning off the request path (fact extraction); never raises."""
        if reply is None or reply.kind != "agent" or self.deps.facts is None or reply.message_id is None:
            return
        message = self.store.get(reply.scope, reply.message_id) if reply.scope else None
        if message is None:
            return
        try:
            await self.deps.facts.after_reply(message.scope, message)
        except Exception:
            log.exception("fact extraction failed for %s; the reply was not affected", message.scope)

    def schedule_after_send(self, reply: Reply | None) -> None:
        """Run :meth:`after_send` in the background (transports call this once they sent)."""
        if reply is None or reply.kind != "agent" or self.deps.facts is None:
            return
        task = asyncio.get_running_loop().create_task(self.after_send(reply))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for background work (tests, shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

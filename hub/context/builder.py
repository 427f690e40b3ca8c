"""The context builder: exactly what one agent is sent for one message. Pure: no I/O.

The scoping rules (DESIGN.md):
1. take the scope's last ``window`` messages first, then keep those tagged for the agent
   or for an agent in ``also_sees`` (filtering first would hand every agent a full window);
2. add the last ``tail`` messages whatever their tag; time order, no duplicates;
3. the facts block goes into every call; 4. everything older is left to ``search_memory``
(and, compacted, to the scope's digest section when one is given).
Chat commands (``via == "command"``) count towards the window but are never sent.
6. Every section is counted with exact tokens; 7. the order serves prompt caching:

    tools + [system: persona, rules]       the stable part, byte-identical per agent
    [system: facts, lessons, awareness, digest]   present sections only, in this order
    history ...                             oldest first
    [user: message]

Providers cache a request's prefix; keeping what changes least first makes the longest
prefix repeat. The stable system message carries :data:`CACHE_MARK` (cache_control);
the model adapter keeps it only for providers that take explicit breakpoints.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scopehub.hub.context.offer import wants_archive, wants_team
from scopehub.hub.context.tokens import MESSAGE_OVERHEAD, Tokenizer
from scopehub.memory import Message

__all__ = [
    "CACHE_MARK",
    "EXTRA_SECTIONS",
    "SECTIONS",
    "STABLE_SECTIONS",
    "AgentPrompt",
    "Context",
    "build_context",
    "fixed_tokens",
    "render_history",
    "select_history",
    "stable_prefix",
    "with_sender",
]

STABLE_SECTIONS = ("persona", "rules", "tools")
# Sections the caller supplies as plain text; an empty one is left out and costs nothing.
EXTRA_SECTIONS = ("facts", "lessons", "awareness", "digest")
SECTIONS = (*STABLE_SECTIONS, *EXTRA_SECTIONS, "history", "message")
# An Anthropic-style cache breakpoint (litellm passes it on); see LiteLLMModel for where it is kept.
CACHE_MARK = {"type": "ephemeral"}
_JOIN = "\n\n"


@dataclass(frozen=True, slots=True)
class AgentPrompt:
    """The fixed part of an agent's calls: persona, shared rules, tool schemas.

    ``optional_tools`` (``search_memory``) are offered only when the call may need them
    (:func:`~scopehub.hub.context.offer.wants_archive`), or always with ``always_optional``.
    ``team_tools`` (the hub's ``team`` tool, for agents that do not take it on every call)
    only when :func:`~scopehub.hub.context.offer.wants_team` says the call may use them.
    """

    name: str
    persona: str
    rules: str = ""
    tools: tuple[dict[str, Any], ...] = ()
    optional_tools: tuple[dict[str, Any], ...] = ()
    always_optional: bool = False
    team_tools: tuple[dict[str, Any], ...] = ()

    def offered(self, optional: bool, team: bool = False) -> list[dict[str, Any]]:
        """Tool schemas of a call; optional ones last, so the agent's own keep their place."""
        return [*self.tools, *(self.optional_tools if optional else ()), *(self.team_tools if team else ())]

    def system(self) -> str:
        """The stable system text: persona, then the hub rules."""
        return self.persona + (_JOIN + self.rules if self.rules else "")


@dataclass(frozen=True, slots=True)
class Context:
    """Provider messages for one call and what each section cost."""

    agent: str
    also_sees: tuple[str, ...]
    history: tuple[Message, ...]
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    tokens: dict[str, int]
    full_history_tokens: int
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.tokens["total"]

    @property
    def stable_tokens(self) -> int:
        """Tokens of the stable part (persona, rules, tools): the cacheable prefix per agent."""
        return sum(self.tokens[name] for name in STABLE_SECTIONS)


def fixed_tokens(prompt: AgentPrompt, tokenizer: Tokenizer, *, optional: bool = True, team: bool = False) -> dict[str, int]:
    """Tokens of persona, rules and tools as every call counts them (``agents-hub agents`` too).

    The system message's framing is counted with the persona; the rules include the blank
    line that joins them to it. ``team``: with the triggered team tool (see AgentPrompt).
    """
    tools = prompt.offered(optional, team)
    return {
        "persona": tokenizer.count(prompt.persona) + MESSAGE_OVERHEAD,
        "rules": tokenizer.count(_JOIN + prompt.rules) if prompt.rules else 0,
        "tools": tokenizer.count(json.dumps(tools, separators=(",", ":"))) if tools else 0,
    }


def stable_prefix(context: Context) -> str:
    """The serialised stable part of a call: tools and the first system message, as sent."""
    return json.dumps({"tools": context.tools, "system": context.messages[0]}, sort_keys=True, separators=(",", ":"))


def select_history(
    recent: Sequence[Message],
    agent: str,
    also_sees: Sequence[str] = (),
    *,
    window: int = 40,
    tail: int = 4,
) -> list[Message]:
    """The history an agent is sent: window first, then the tag filter, plus the tail."""
    # Chat commands (/help, /usage ...) are talk to the hub, not conversation: they take
    # their place in the window but are never sent to an agent.
    windowed = [m for m in (recent[-window:] if window > 0 else []) if m.via != "command"]
    allowed = {agent, *also_sees}
    tail_ids = {message.id for message in windowed[-tail:]} if tail > 0 else set()
    return [message for message in windowed if message.agent in allowed or message.id in tail_ids]


def with_sender(text: str, sender: str | None, scope: str) -> str:
    """``"Alice: text"`` in a group (the model must tell the members apart), the text elsewhere."""
    if sender and scope.startswith("group:"):
        return f"{sender}: {text}"
    return text


def render_history(history: Sequence[Message], agent: str, *, tokenizer: Tokenizer | None = None, max_tokens: int = 0) -> list[dict[str, Any]]:
    """Provider messages for stored history; other agents' replies are labelled as theirs."""
    rendered = []
    for message in history:
        text = message.text
        if tokenizer is not None and max_tokens > 0:
            text = tokenizer.truncate(text, max_tokens)
        if message.role == "agent":
            if message.agent and message.agent != agent:
                text = f"[{message.agent} agent] {text}"
            rendered.append({"role": "assistant", "content": text})
        else:
            rendered.append({"role": "user", "content": with_sender(text, message.sender, message.scope)})
    return rendered


def _history_tokens(rendered: Sequence[dict[str, Any]], tokenizer: Tokenizer) -> int:
    return sum(tokenizer.count(item["content"]) + MESSAGE_OVERHEAD for item in rendered)


def _extra_message(parts: dict[str, str], tokenizer: Tokenizer) -> tuple[str, dict[str, int]]:
    """The second system message (present sections joined in order) and each one's tokens."""
    tokens = dict.fromkeys(EXTRA_SECTIONS, 0)
    texts: list[str] = []
    for name in EXTRA_SECTIONS:
        text = parts[name]
        if not text:
            continue
        # The first present section carries the message framing, the others their separator.
        tokens[name] = tokenizer.count(_JOIN + text) if texts else tokenizer.count(text) + MESSAGE_OVERHEAD
        texts.append(text)
    return _JOIN.join(texts), tokens


def build_context(
    prompt: AgentPrompt,
    recent: Sequence[Message],
    message_text: str,
    *,
    tokenizer: Tokenizer,
    also_sees: Sequence[str] = (),
    facts_block: str = "",
    lessons: str = "",
    awareness: str = "",
    digest: str = "",
    window: int = 40,
    tail: int = 4,
    message_tokens: int = 4000,
    history_message_tokens: int = 1000,
    offer_optional: bool | None = None,
    offer_team: bool | None = None,
    scope: str = "",
    sender: str | None = None,
) -> Context:
    """Build one agent call.

    ``recent`` is the scope's messages before the current one, oldest first (at least
    ``window`` of them when there are that many); ``message_text`` is the current message,
    written by ``sender`` in ``scope``: in a group it carries its sender like the history.
    ``facts_block``, ``lessons``, ``awareness`` and ``digest`` are plain text from the
    caller, already within their budgets; empty ones are left out. ``offer_optional``
    forces the optional tools on or off; by default :func:`wants_archive` decides.
    ``offer_team`` likewise for the team tools; by default :func:`wants_team` decides from
    the message alone (the hub also tells it when the call shows unread channel news).
    """
    history = select_history(recent, prompt.name, also_sees, window=window, tail=tail)
    rendered = render_history(history, prompt.name, tokenizer=tokenizer, max_tokens=history_message_tokens)
    labelled = with_sender(message_text, sender, scope)
    current = tokenizer.truncate(labelled, message_tokens)
    if offer_optional is None:
        offer_optional = bool(prompt.optional_tools) and (
            prompt.always_optional or wants_archive(message_text, len(recent), window)
        )
    if offer_team is None:
        offer_team = wants_team(message_text)
    offer_team = offer_team and bool(prompt.team_tools)
    tools = prompt.offered(offer_optional, offer_team)
    extra_text, extra_tokens = _extra_message(
        {"facts": facts_block, "lessons": lessons, "awareness": awareness, "digest": digest}, tokenizer
    )
    messages: list[dict[str, Any]] = [{"role": "system", "content": prompt.system(), "cache_control": dict(CACHE_MARK)}]
    if extra_text:
        messages.append({"role": "system", "content": extra_text})
    messages += [*rendered, {"role": "user", "content": current}]
    tokens = {
        **fixed_tokens(prompt, tokenizer, optional=offer_optional, team=offer_team),
        **extra_tokens,
        "history": _history_tokens(rendered, tokenizer),
        "message": tokenizer.count(current) + MESSAGE_OVERHEAD,
    }
    tokens["total"] = sum(tokens[name] for name in SECTIONS)
    full_window = [m for m in (recent[-window:] if window > 0 else []) if m.via != "command"]
    full_rendered = render_history(full_window, prompt.name, tokenizer=tokenizer, max_tokens=history_message_tokens)
    full_history_tokens = tokens["total"] - tokens["history"] + _history_tokens(full_rendered, tokenizer)
    return Context(
        agent=prompt.name,
        also_sees=tuple(also_sees),
        history=tuple(history),
        messages=messages,
        tools=tools,
        tokens=tokens,
        full_history_tokens=full_history_tokens,
        meta={
            "message_trimmed": current != labelled,
            "optional_tools": offer_optional,
            "team_tools": offer_team,
            # The caller's section texts as sent: the call record keeps them (hub.context.record).
            "texts": {"facts": facts_block, "lessons": lessons, "awareness": awareness, "digest": digest},
        },
    )

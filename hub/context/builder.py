"""The context builder: exactly what one agent is sent for one message. Pure: no I/O.

The scoping rules (DESIGN.md):
1. take the scope's last ``window`` messages first, then keep those tagged for the agent
   or for an agent in ``also_sees`` (filtering first would hand every agent a full window);
2. add the last ``tail`` messages whatever their tag; time order, no duplicates;
3. the facts block goes into every call; 4. everything older is left to ``search_memory``
(and, compacted, to the scope's digest section when one is given).
Chat commands (``via == "command"``) count towards the window but are never sent.
Every section is counted with exact tokens.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scopehub.hub.context.tokens import MESSAGE_OVERHEAD, Tokenizer
from scopehub.memory import Message

__all__ = ["SECTIONS", "AgentPrompt", "Context", "build_context", "render_history", "select_history"]

SECTIONS = ("persona", "rules", "tools", "facts", "awareness", "digest", "history", "message")


@dataclass(frozen=True, slots=True)
class AgentPrompt:
    """The fixed part of an agent's calls: persona, shared rules, tool schemas."""

    name: str
    persona: str
    rules: str = ""
    tools: tuple[dict[str, Any], ...] = ()


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
            if message.sender and message.scope.startswith("group:"):
                text = f"{message.sender}: {text}"
            rendered.append({"role": "user", "content": text})
    return rendered


def _history_tokens(rendered: Sequence[dict[str, Any]], tokenizer: Tokenizer) -> int:
    return sum(tokenizer.count(item["content"]) + MESSAGE_OVERHEAD for item in rendered)


def build_context(
    prompt: AgentPrompt,
    recent: Sequence[Message],
    message_text: str,
    *,
    tokenizer: Tokenizer,
    also_sees: Sequence[str] = (),
    facts_block: str = "",
    awareness: str = "",
    digest: str = "",
    window: int = 40,
    tail: int = 4,
    message_tokens: int = 4000,
    history_message_tokens: int = 1000,
) -> Context:
    """Build one agent call.

    ``recent`` is the scope's messages before the current one, oldest first (at least
    ``window`` of them when there are that many); ``message_text`` is the current message.
    """
    history = select_history(recent, prompt.name, also_sees, window=window, tail=tail)
    rendered = render_history(history, prompt.name, tokenizer=tokenizer, max_tokens=history_message_tokens)
    current = tokenizer.truncate(message_text, message_tokens)
    system = prompt.persona
    if prompt.rules:
        system += "\n\n" + prompt.rules
    if facts_block:
        system += "\n\n" + facts_block
    if awareness:
        system += "\n\n" + awareness
    if digest:
        # After awareness, before history: it changes only when the digest is compacted
        # again, so the prefix up to it stays cacheable between compactions.
        system += "\n\n" + digest
    messages = [{"role": "system", "content": system}, *rendered, {"role": "user", "content": current}]
    tools = list(prompt.tools)
    tokens = {
        # The system message's framing is counted with the persona.
        "persona": tokenizer.count(prompt.persona) + MESSAGE_OVERHEAD,
        "rules": tokenizer.count(prompt.rules),
        "tools": tokenizer.count(json.dumps(tools, separators=(",", ":"))) if tools else 0,
        "facts": tokenizer.count(facts_block),
        "awareness": tokenizer.count(awareness),
        "digest": tokenizer.count(digest),
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
        meta={"message_trimmed": current != message_text},
    )

"""One call's context, section by section, for the call page.

A call recorded by this release keeps what it sent (``extra["sent"]``, see
:mod:`scopehub.hub.context.record`; a section text the same scope's earlier call kept is a
reference to that call, followed here and checked by its sha256): the page shows that, rebuilt by the pure context
builder from the record and the stored history, and says whether the result is byte for
byte what was sent (its digest matches the recorded one). A call recorded before that
keeps only its token counts: the page rebuilds the history from the stored routes with
the current window settings, and says that the facts, lessons, awareness and digest texts
were not kept.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scopehub.hub.console import queries
from scopehub.hub.context import SECTIONS, AgentPrompt, Context, build_context
from scopehub.hub.context.record import replay_sent, text_digest
from scopehub.hub.context.tokens import Tokenizer
from scopehub.hub.settings import Settings
from scopehub.memory import MemoryStore, Message

__all__ = ["CallView", "HistoryItem", "SectionView", "call_view", "section_views"]

# How the page names the state of what it shows.
RECORDED = "recorded"  # rebuilt from the call record and identical to what was sent
CHANGED = "changed"  # rebuilt from the call record, but something changed since (said what)
REBUILT = "rebuilt"  # an older record without texts: history rebuilt, the other texts unknown
NO_CONTEXT = "none"  # a hub call (router, extractor) or an agent no longer installed


@dataclass(frozen=True, slots=True)
class HistoryItem:
    """One history message as the agent got it, with the stored message it came from."""

    message_id: int
    role: str
    text: str


@dataclass(frozen=True, slots=True)
class SectionView:
    """A section of the call: its recorded tokens, its text (None: not kept) and history items."""

    name: str
    tokens: int
    text: str | None
    tokens_now: int | None = None  # counted again on the text shown, when that differs
    items: tuple[HistoryItem, ...] = ()


@dataclass(slots=True)
class CallView:
    """What the call page shows."""

    call: dict[str, Any]
    message: Message | None
    state: str
    notes: list[str] = field(default_factory=list)
    sections: list[SectionView] = field(default_factory=list)
    # The scope's window before the message that the scoping rules left out of the history
    # (other agents' messages): what the agent did not see, one click away.
    left_out: list[Message] = field(default_factory=list)

    @property
    def tokens(self) -> dict[str, int]:
        return {s.name: s.tokens for s in self.sections} or {name: int(self.call.get(name) or 0) for name in SECTIONS}

    @property
    def full_history_parts(self) -> dict[str, int]:
        """The counterfactual call's sections: the same, with the whole window as history."""
        tokens = {name: int(self.call.get(name) or 0) for name in SECTIONS}
        rest = sum(tokens.values()) - tokens["history"]
        return {**tokens, "history": max(0, int(self.call.get("full_history_tokens") or 0) - rest)}


def section_views(
    call: dict[str, Any], context: Context | None, prompt: AgentPrompt, kept: dict[str, str] | None, missing: Sequence[str] = ()
) -> list[SectionView]:
    """The nine sections with recorded tokens and the text shown (``kept`` None: texts were not recorded)."""
    views: list[SectionView] = []
    for name in SECTIONS:
        recorded = int(call.get(name) or 0)
        now = context.tokens.get(name) if context is not None else None
        items: tuple[HistoryItem, ...] = ()
        text: str | None
        if name == "persona":
            text = prompt.persona
        elif name == "rules":
            text = prompt.rules
        elif name == "tools":
            text = json.dumps(context.tools, indent=2, ensure_ascii=False) if context is not None and context.tools else ""
        elif name in ("facts", "lessons", "awareness", "digest"):
            if kept is None or name in missing:
                text = "" if recorded == 0 else None
            else:
                text = kept.get(name, "")
        elif name == "history":
            text = ""
            if context is not None:
                # Provider messages after the system ones and before the current message.
                rendered = [m for m in context.messages if m["role"] != "system"][:-1]
                items = tuple(
                    HistoryItem(message.id, item["role"], item["content"])
                    for message, item in zip(context.history, rendered, strict=True)
                )
        else:  # message
            text = context.messages[-1]["content"] if context is not None else None
        views.append(SectionView(name, recorded, text, now if now is not None and now != recorded else None, items))
    return views


def _resolve_sections(store: MemoryStore, scope: str, sections: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Section texts of a record, references to an earlier call's copy followed; and the names not found."""
    texts: dict[str, str] = {}
    missing: list[str] = []
    for name, value in sections.items():
        if isinstance(value, str):
            texts[name] = value
            continue
        held = None
        if isinstance(value, dict) and isinstance(value.get("same_as"), int):
            holder = queries.call_of(store, scope, value["same_as"])  # the same scope only
            sent = holder["extra"].get("sent") if holder and isinstance(holder["extra"], dict) else None
            held = sent.get("sections", {}).get(name) if isinstance(sent, dict) else None
        if isinstance(held, str) and text_digest(held) == value.get("sha"):
            texts[name] = held
        else:
            missing.append(name)
    return texts, missing


def _left_out(
    store: MemoryStore, settings: Settings, scope: str, message: Message, sent: Sequence[int], window: Sequence[Message] | None = None
) -> list[Message]:
    """The window's messages before ``message`` that were not in the history sent."""
    recent = window if window is not None else store.window(scope, settings.window, up_to=message.id - 1)
    shown = set(sent)
    return [m for m in recent if m.id not in shown]


def call_view(
    store: MemoryStore,
    settings: Settings,
    call: dict[str, Any],
    prompts: dict[str, AgentPrompt],
    tokenizer: Tokenizer,
) -> CallView:
    """What agent ``call["agent"]`` was sent for its message, as exactly as the record allows."""
    scope = call["scope"]
    message = store.get(scope, call["message_id"]) if call.get("message_id") is not None else None
    view = CallView(call=call, message=message, state=NO_CONTEXT)
    if call.get("via") in ("router", "extractor"):
        view.notes.append(f"A model call of the hub itself ({call['via']}): it has no agent context and no full-history counterfactual.")
        return view
    prompt = prompts.get(call["agent"])
    if prompt is None:
        view.notes.append(f"The agent {call['agent']!r} is not installed here: its prompt cannot be shown.")
        return view
    if message is None:
        view.notes.append("The message of this call is no longer stored.")
        return view
    sent = call["extra"].get("sent") if isinstance(call.get("extra"), dict) else None
    if isinstance(sent, dict) and "sha" in sent:
        ids = [int(i) for i in sent.get("history", [])]
        history = [m for m in (store.get(scope, i) for i in ids) if m is not None]
        texts, missing = _resolve_sections(store, scope, sent.get("sections", {}))
        context, checks = replay_sent({**sent, "sections": texts}, prompt, history, message, tokenizer=tokenizer, also_sees=call["also_sees"])
        view.sections = section_views(call, context, prompt, texts, missing)
        view.left_out = _left_out(store, settings, scope, message, ids)
        if checks["identical"]:
            view.state = RECORDED
            view.notes.append("Exactly what was sent: rebuilt from the call record and the stored messages, byte-identical (sha256 matches).")
        else:
            view.state = CHANGED
            view.notes.append("Rebuilt from the call record, but it is not byte-identical to what was sent:")
            if not checks["stable"]:
                view.notes.append("the agent's persona, rules or tools changed since this call (the current ones are shown);")
            if not checks["history_complete"]:
                view.notes.append(f"{len(ids) - len(history)} history message(s) are no longer stored;")
            if missing:
                view.notes.append(f"the {', '.join(missing)} text(s) were kept by an earlier call that is gone;")
            if checks["stable"] and checks["history_complete"] and not missing:
                view.notes.append("a history message or the current message was edited since this call.")
        return view
    # An older record: token counts only. The history follows from the stored routes.
    recent = store.window(scope, settings.window, up_to=message.id - 1)
    context = build_context(
        prompt,
        recent,
        message.text,
        tokenizer=tokenizer,
        also_sees=call["also_sees"],
        window=settings.window,
        tail=settings.tail,
        message_tokens=settings.message_tokens,
        scope=scope,
        sender=message.sender,
    )
    view.sections = section_views(call, context, prompt, None)
    view.left_out = _left_out(store, settings, scope, message, [m.id for m in context.history], recent)
    view.state = REBUILT
    view.notes.append(
        "Rebuilt: this call was recorded before call records kept what they sent. The history is rebuilt from the"
        " stored routes with the current window settings; the facts, lessons, awareness and digest texts were not kept"
        " (their recorded token counts are shown)."
    )
    return view

"""What a call record keeps of the context it sent, so an operator can see it again exactly.

Token counts alone cannot answer "what exactly was agent X sent?": by the time someone
asks, the facts changed, the awareness cursors moved on and the digest was compacted
again. So each call record keeps (``CallRecord.extra["sent"]``):

- the text of the sections the caller supplied (facts, lessons, awareness, digest), which
  cannot be rebuilt later;
- the ids of the history messages (their text is in the store already), the current
  message's text when the router rewrote it, the trim limit, whether ``search_memory``
  was offered;
- a digest (sha256) of the provider messages and tool schemas as sent, and one of the
  stable prefix (persona, rules, tools).

The facts block, an agent's lessons and the digest repeat from call to call: with
:class:`SentSections` a record refers to the earlier call of the same scope that holds an
identical text (``{"same_as": <call id>, "sha": <its first 16 hex digits>}``) instead of repeating it, so the
records cost a few hundred bytes a call rather than kilobytes.

:func:`replay_sent` rebuilds the call with the pure context builder from that record and
the stored messages; comparing its digest with the recorded one says whether what is
shown is byte-identical to what was sent (an edited message or a changed agent prompt
shows up as a difference, never silently).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from scopehub.hub.context.builder import (
    EXTRA_SECTIONS,
    AgentPrompt,
    Context,
    build_context,
    stable_prefix,
)
from scopehub.hub.context.tokens import Tokenizer
from scopehub.memory import Message

__all__ = ["SENT_VERSION", "SentSections", "replay_sent", "sent_digest", "sent_record", "text_digest"]

SENT_VERSION = 1


def sent_digest(context: Context) -> str:
    """sha256 of the provider messages and tool schemas of a call, as sent."""
    blob = json.dumps({"messages": context.messages, "tools": context.tools}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def text_digest(text: str) -> str:
    """The first 64 bits of one section text's sha256, in hex: how a reference is checked."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# A reference costs about this many characters: shorter texts are kept as they are.
_REFERENCE_CHARS = 60


class SentSections:
    """Which call of this process kept each section text, so that later records refer to it.

    In memory and bounded (least recently used first out): after a restart, or once a text
    is forgotten here, the next record keeps the text again. A reference names a call of
    the same scope and carries the text's sha256, so a reader can check what it finds
    (a scope erased since, and its call ids reused, shows as a mismatch, never as wrong text).
    """

    def __init__(self, limit: int = 20_000) -> None:
        self._holders: OrderedDict[tuple[str, str, str], int] = OrderedDict()
        self._limit = limit

    def compact(self, scope: str, record: dict[str, Any]) -> dict[str, Any]:
        """``record`` with each section text kept by an earlier call replaced by a reference to it."""
        sections: dict[str, Any] = {}
        for name, text in record.get("sections", {}).items():
            digest = text_digest(text)
            holder = self._holders.get((scope, name, digest)) if len(text) > _REFERENCE_CHARS else None
            sections[name] = {"same_as": holder, "sha": digest} if holder is not None else text
        return {**record, "sections": sections}

    def remember(self, scope: str, record: dict[str, Any], call_id: int) -> None:
        """Note that call ``call_id`` (of ``scope``) keeps the texts ``record`` holds in full."""
        for name, value in record.get("sections", {}).items():
            if isinstance(value, str):
                key = (scope, name, text_digest(value))
                self._holders[key] = call_id
                self._holders.move_to_end(key)
        while len(self._holders) > self._limit:
            self._holders.popitem(last=False)


def _stable_digest(context: Context) -> str:
    return hashlib.sha256(stable_prefix(context).encode("utf-8")).hexdigest()


def sent_record(context: Context, *, text: str, stored_text: str, message_tokens: int) -> dict[str, Any]:
    """The JSON-ready record of what ``context`` sent, for ``CallRecord.extra["sent"]``.

    ``text`` is the current message as the agent got it (before the sender label and the
    trim), ``stored_text`` the stored message's text: the text is kept only when they differ.
    """
    texts = context.meta.get("texts", {})
    record: dict[str, Any] = {
        "v": SENT_VERSION,
        "sections": {name: texts[name] for name in EXTRA_SECTIONS if texts.get(name)},
        "history": [m.id for m in context.history],
        "optional_tools": bool(context.meta.get("optional_tools")),
        "message_tokens": int(message_tokens),
        "sha": sent_digest(context),
        "stable_sha": _stable_digest(context),
    }
    if text != stored_text:
        record["text"] = text
    return record


def replay_sent(
    record: dict[str, Any],
    prompt: AgentPrompt,
    history: Sequence[Message],
    message: Message,
    *,
    tokenizer: Tokenizer,
    also_sees: Sequence[str] = (),
) -> tuple[Context, dict[str, bool]]:
    """Rebuild a recorded call with the pure builder; returns it and what matches the record.

    ``history`` are the stored messages of ``record["history"]`` in order, ``message`` the
    call's current message; section references (``same_as``) must be resolved to their
    texts first. The flags: ``identical`` (the whole call, byte for byte),
    ``stable`` (persona, rules and tools unchanged since), ``history_complete`` (every
    history message is still stored).
    """
    sections = record.get("sections", {})
    # Every message is kept by select_history when the window and the tail are the history itself.
    size = len(history)
    context = build_context(
        prompt,
        list(history),
        record.get("text", message.text),
        tokenizer=tokenizer,
        also_sees=also_sees,
        facts_block=sections.get("facts", ""),
        lessons=sections.get("lessons", ""),
        awareness=sections.get("awareness", ""),
        digest=sections.get("digest", ""),
        window=size,
        tail=size,
        message_tokens=int(record.get("message_tokens", 4000)),
        offer_optional=bool(record.get("optional_tools")),
        scope=message.scope,
        sender=message.sender,
    )
    return context, {
        "identical": sent_digest(context) == record.get("sha"),
        "stable": _stable_digest(context) == record.get("stable_sha"),
        "history_complete": size == len(record.get("history", [])),
    }

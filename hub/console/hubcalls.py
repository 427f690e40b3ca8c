"""The hub's own model calls, for their pages: the LLM router's and the fact extractor's.

- A router call's record keeps the messages it was sent, its raw answer, the route it gave
  (or nothing: why is in the call's error) and the local route it was asked to refine.
- An extractor call's record keeps the variable part of its prompt (the rules are the
  same text every call: kept by their digest, shown from the code when it matches), its
  raw answer, the facts it proposed, the ones refused as not in the person's own words,
  and each reconciliation decision (added, updated, invalidated, kept as is, and why).

Records from before this release keep only tokens: the page says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scopehub.hub.context.record import text_digest
from scopehub.hub.facts.extraction import EXTRACTOR_PROMPT

__all__ = ["HubCallView", "ProposedFact", "hub_call_view"]


@dataclass(frozen=True, slots=True)
class ProposedFact:
    """A fact the extractor proposed, and what became of it."""

    text: str
    key: str | None
    op: str
    outcome: str  # "refused", or the decision taken
    reason: str
    targets: tuple[int, ...] = ()


@dataclass(slots=True)
class HubCallView:
    """What a router or extractor call page shows."""

    kind: str  # "router" or "extractor"
    prompt: list[dict[str, str]] = field(default_factory=list)  # role, content
    prompt_note: str = ""
    answer: str | None = None
    route: dict[str, Any] | None = None
    local: dict[str, Any] | None = None
    proposed: list[ProposedFact] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    own_sentences: bool = False
    recorded: bool = True  # False: a record from before prompts and answers were kept


def _router(view: HubCallView, extra: dict[str, Any]) -> None:
    view.prompt = [m for m in extra.get("prompt") or () if isinstance(m, dict)]
    view.route = extra.get("route") if isinstance(extra.get("route"), dict) else None
    view.local = extra.get("local") if isinstance(extra.get("local"), dict) else None


def _extractor(view: HubCallView, extra: dict[str, Any]) -> None:
    prompt = extra.get("prompt") or {}
    if text_digest(EXTRACTOR_PROMPT) == prompt.get("system_sha"):
        view.prompt_note = "The extractor's rules as sent (the text of this release matches the recorded digest)."
        system = EXTRACTOR_PROMPT
    else:
        view.prompt_note = "The extractor's rules changed since this call: its rules are not shown, only the part that varies."
        system = ""
    view.prompt = [m for m in ({"role": "system", "content": system}, {"role": "user", "content": prompt.get("user", "")}) if m["content"]]
    refused = {(r.get("text"), r.get("key")): r for r in extra.get("refused") or () if isinstance(r, dict)}
    decisions = [d for d in extra.get("decisions") or () if isinstance(d, dict)]
    view.decisions = decisions
    view.own_sentences = bool(extra.get("own_sentences"))
    by_text = {(d.get("text"), d.get("key")): d for d in decisions}
    for item in extra.get("proposed") or ():
        if not isinstance(item, dict):
            continue
        text, key = str(item.get("text", "")), item.get("key")
        if (text, key) in refused:
            view.proposed.append(ProposedFact(text, key, str(item.get("op", "add")), "refused", str(refused[(text, key)].get("reason", ""))))
            continue
        decision = by_text.get((text, key)) or next((d for d in decisions if key and d.get("key") == key), None)
        if decision is None:
            view.proposed.append(ProposedFact(text, key, str(item.get("op", "add")), "no decision", "merged with another proposal or dropped"))
        else:
            view.proposed.append(
                ProposedFact(text, key, str(item.get("op", "add")), str(decision.get("op")), str(decision.get("reason", "")), tuple(decision.get("targets") or ()))
            )


def hub_call_view(call: dict[str, Any]) -> HubCallView:
    """The router's or the extractor's call, as its record allows."""
    extra = call.get("extra") or {}
    view = HubCallView(kind=str(call.get("via")), answer=extra.get("answer"))
    view.recorded = "prompt" in extra
    if view.recorded:
        (_router if view.kind == "router" else _extractor)(view, extra)
    return view

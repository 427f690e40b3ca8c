"""A scope's memory: facts and their history, notes, emails and drafts, tasks, reminders,
events, claims, channels, each agent's lessons, goals and plans, the digest (or why there
is none), knowledge fragments and the Maildir backlog."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from scopehub.hub.console.web import Console
from scopehub.hub.settings import Settings, maildir_root
from scopehub.memory import (
    Digest,
    MemoryStore,
    active_claims,
    agent_memory,
    channel_stats,
    fact_history,
    get_digest,
    list_knowledge,
    list_reminders,
    list_tasks,
    list_vault_items,
    messages_after,
    read_channel,
    recent_events,
    summarize_event,
)

__all__ = ["VAULT_KINDS", "digest_status", "routes"]

VAULT_KINDS = (("note", "Notes"), ("email", "Emails"), ("draft", "Reply drafts"))
VAULT_LIMIT = 200


@dataclass(frozen=True, slots=True)
class DigestStatus:
    """Why a scope has no digest yet (or when its next compaction is due)."""

    exists: bool
    lines: tuple[str, ...]


def digest_status(store: MemoryStore, settings: Settings, scope: str, digest: Digest | None) -> DigestStatus:
    """What the page says about the digest: that none exists and why, and how the last compaction failed."""
    exists = digest is not None and digest.version > 0
    lines: list[str] = []
    if settings.digest_every <= 0 or settings.digest_tokens <= 0:
        lines.append("The digest is turned off (HUB_DIGEST_EVERY or HUB_DIGEST_TOKENS is 0).")
    elif not exists:
        left = max(0, messages_after(store, scope, 0) - settings.window)
        if left < settings.digest_every:
            lines.append(
                f"No digest yet: the first compaction runs once {settings.digest_every} messages have left the"
                f" {settings.window}-message window; {left} have so far."
            )
        else:
            lines.append("No digest yet: a compaction is due and runs after the next reply.")
    stats = digest.stats if digest is not None else {}
    if stats.get("failed"):
        reason = stats.get("last_failure") or "no reason recorded"
        lines.append(f"The last compaction failed ({int(stats['failed'])} failed so far): {reason}.")
        if stats.get("retry_after"):
            lines.append(
                f"The next attempt waits until {settings.digest_every} more messages have left the window after message"
                f" #{int(stats['retry_after'])}."
            )
    return DigestStatus(exists, tuple(lines))


def routes(console: Console) -> list[Route]:
    store, settings = console.store, console.settings

    def memory_page(request: Request) -> Response:
        scope = console.scope_of(request)
        facts = fact_history(store, scope)
        root = maildir_root(settings)
        backlog: list[Any] = []
        if root.exists():
            from scopehub.hub.transports.maildir.status import backlog as maildir_backlog

            backlog = [row for row in maildir_backlog(root, outbox=False) if row.scope == scope]
        memories = [agent_memory(store, scope, name) for name in sorted(console.prompts)]
        channels = {name: read_channel(store, scope, name, limit=10) for name in sorted(channel_stats(store, scope))}
        events = recent_events(store, scope, limit=50)
        digest = get_digest(store, scope)
        return console.page(
            request,
            "memory.html",
            scope=scope,
            current=[f for f in facts if f.invalid_at is None],
            older=[f for f in facts if f.invalid_at is not None],
            vault=[(kind, title, list_vault_items(store, scope, kind, limit=VAULT_LIMIT)) for kind, title in VAULT_KINDS],
            tasks=list_tasks(store, scope, include_done=True, limit=200),
            reminders=list_reminders(store, scope, include_inactive=True, limit=200),
            events=[(e, summarize_event(e)) for e in reversed(events)],
            claims=active_claims(store, scope),
            channels=channels,
            memories=[m for m in memories if m.lessons or m.strengths or m.weaknesses or m.goals or m.plans],
            digest=digest if digest is not None and digest.version > 0 else None,
            digest_status=digest_status(store, settings, scope, digest),
            knowledge=list_knowledge(store, scope, limit=200),
            backlog=backlog,
            maildir=str(root) if root.exists() else None,
            done=console.notice(request),
        )

    return [Route("/scopes/{scope:scope}/memory", memory_page)]

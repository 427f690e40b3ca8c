"""``agents-hub digest show|compact``, ``agents-hub reflect`` and ``agents-hub knowledge list``:
a thin click layer over :mod:`scopehub.hub.digest`. Mounted by :mod:`scopehub.hub.cli`.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import click

from scopehub.hub.cli.options import (
    echo_json,
    hub_of,
    json_option,
    scope_option,
    settings_of,
    store_of,
)
from scopehub.memory import digest_usage, get_digest, list_knowledge, messages_after, parse_ts

if TYPE_CHECKING:
    from scopehub.hub.digest import DigestKeeper, ReflectReport

__all__ = ["digest_group", "knowledge_group", "reflect_command"]


def _iso(ts: float | None) -> str | None:
    return None if not ts else datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds")


@click.group("digest")
def digest_group() -> None:
    """The digest of a scope's older history that every agent call gets."""


@digest_group.command("show")
@scope_option()
@json_option
@click.pass_context
def show_command(ctx: click.Context, scope: str, as_json: bool) -> None:
    """The digest's lines with their source message ids, its age and the paths calls took."""
    from scopehub.hub.digest import DigestKeeper, render_digest

    settings = settings_of(ctx)
    store = store_of(ctx, must_exist=True)
    keeper = DigestKeeper(store, settings)
    digest = get_digest(store, scope)
    usage = digest_usage(store, scope)
    made = digest is not None and digest.version > 0
    age = max(0, messages_after(store, scope, digest.upto_id) - settings.window) if made and digest else None
    section = render_digest(digest.lines, keeper.tokenizer, settings.digest_tokens, keeper.zone) if digest else ""
    if as_json:
        echo_json(
            {
                "scope": scope,
                "version": digest.version if digest else 0,
                "kind": digest.kind if made and digest else None,
                "mode": digest.mode if made and digest else None,
                "made": _iso(digest.made) if digest else None,
                "upto_id": digest.upto_id if digest else 0,
                "covered": digest.covered if digest else 0,
                "age": age,
                "lines": [
                    {"text": line.text, "who": line.who, "date": _iso(line.ts), "sources": list(line.sources)}
                    for line in (digest.lines if digest else ())
                ],
                "section": section,
                "section_tokens": keeper.tokenizer.count(section),
                "usage": usage,
                "last_failure": (digest.stats.get("last_failure") if digest else None),
                "broken": digest.broken if digest else "",
            }
        )
        return
    if digest is not None and digest.broken:
        click.echo(
            f"the stored digest of {scope} is broken ({digest.broken}); it is never shown to an agent and is rebuilt"
            f" from the messages at the next compaction (now: agents-hub digest compact --scope {scope} --force)"
        )
    elif not made or digest is None:
        click.echo(f"no digest for {scope} yet (it is made once {settings.digest_every} messages have left the {settings.window}-message window)")
    else:
        click.echo(
            f"digest of {scope}: version {digest.version} ({digest.kind}, {digest.mode}), made {_iso(digest.made)},"
            f" covers {digest.covered:,} messages up to #{digest.upto_id}; age {age} messages"
        )
        for line in sorted(digest.lines, key=lambda item: (item.ts, item.sources)):
            who = f"{line.who}: " if line.who else ""
            sources = ", ".join(f"#{i}" for i in line.sources)
            click.echo(f"  [{sources}] {(_iso(line.ts) or '')[:10]} {who}{line.text}")
        click.echo(f"section: {keeper.tokenizer.count(section)} tokens (budget {settings.digest_tokens})")
    click.echo(_paths_line(usage))
    if digest is not None and digest.stats.get("last_failure"):
        click.echo(f"last failure (the digest above stayed or stood in): {digest.stats['last_failure']}")


def _paths_line(usage: dict[str, Any]) -> str:
    paths = ", ".join(f"{name} {count}" for name, count in usage["paths"].items())
    compactions = ", ".join(f"{name} {count}" for name, count in usage["compactions"].items())
    return (
        f"calls: {paths}; digest tokens sent {usage['tokens']:,}\n"
        f"compactions: {compactions}, failed {usage['failed']}; model calls {usage['model_calls']}"
        f" ({usage['prompt_tokens']:,} prompt + {usage['completion_tokens']:,} completion tokens)"
    )


@digest_group.command("compact")
@scope_option()
@click.option("--force", is_flag=True, help="compact now even if not due (an existing digest is rebuilt from its sources)")
@json_option
@click.pass_context
def compact_command(ctx: click.Context, scope: str, force: bool, as_json: bool) -> None:
    """Compact the scope's digest now, as the hub does after a reply (with the configured mode)."""
    hub = hub_of(ctx, must_exist=True)
    keeper = hub.deps.digest
    if keeper is None:
        raise click.ClickException("the digest is not configured")
    report = asyncio.run(cast("DigestKeeper", keeper).compact(scope, hub.holder, force=force))
    if as_json:
        echo_json(asdict(report))
    else:
        click.echo(f"{report.outcome}" + (f" ({report.kind}), version {report.version}, {report.lines} lines" if report.outcome == "compacted" else ""))
        if report.reason:
            click.echo(f"reason: {report.reason}")
    if report.outcome == "failed":
        ctx.exit(1)  # scripts see that the cached digest was kept


@click.command("reflect")
@scope_option()
@click.option("--now", "now_text", default=None, help="reflect as of this time (unix seconds or ISO 8601; default: now)")
@json_option
@click.pass_context
def reflect_command(ctx: click.Context, scope: str, now_text: str | None, as_json: bool) -> None:
    """Distill the scope's messages and events older than HUB_REFLECT_AFTER_DAYS into knowledge fragments."""
    hub = hub_of(ctx, must_exist=True)
    reflector = hub.deps.reflector
    if reflector is None:
        raise click.ClickException("reflection is not configured")
    try:
        now = parse_ts(now_text) if now_text else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--now") from None
    report = cast("ReflectReport", asyncio.run(reflector.reflect(scope, hub.holder, now=now)))
    if as_json:
        echo_json(asdict(report))
    else:
        click.echo(
            f"{report.outcome}: {report.fragments} fragments from {report.episodes} episodes"
            f" ({report.messages} messages, {report.events} events)"
        )
        if report.reason:
            click.echo(f"reason: {report.reason}")
    if report.outcome == "failed":
        ctx.exit(1)  # what was reflected before the failure is kept; the next run resumes there


@click.group("knowledge")
def knowledge_group() -> None:
    """Knowledge fragments reflection distilled from older messages (search finds them)."""


@knowledge_group.command("list")
@scope_option()
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1), help="fragments to show, newest first")
@json_option
@click.pass_context
def knowledge_list_command(ctx: click.Context, scope: str, limit: int, as_json: bool) -> None:
    """List the scope's knowledge fragments with their importance and sources."""
    fragments = list_knowledge(store_of(ctx, must_exist=True), scope, limit=limit)
    if as_json:
        echo_json(
            [
                {
                    "id": f.id,
                    "text": f.text,
                    "importance": f.importance,
                    "messages": list(f.messages),
                    "events": list(f.events),
                    "date": _iso(f.ts),
                    "mode": f.mode,
                }
                for f in fragments
            ]
        )
        return
    if not fragments:
        click.echo(f"no knowledge fragments for {scope} (agents-hub reflect --scope {scope})")
    for f in fragments:
        sources = ", ".join([*(f"#{i}" for i in f.messages), *(f"event {i}" for i in f.events)])
        click.echo(f"#{f.id} [{f.importance:.2f}] {f.text}  ({sources})")

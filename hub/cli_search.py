"""``agents-hub search``: the archive search from the command line."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import click

from scopehub.memory import Store

from .settings import load_settings

__all__ = ["search_command"]

METHODS = ("hybrid", "bm25", "fuzzy", "semantic", "hybrid_semantic")


@click.command("search")
@click.argument("query")
@click.option("--scope", "-s", required=True, help="user:<id> or group:<id>")
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(1, 1000), help="how many results")
@click.option("--method", type=click.Choice(METHODS), default="hybrid", show_default=True, help="ranking method")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.pass_context
def search_command(ctx: click.Context, query: str, scope: str, k: int, method: str, as_json: bool) -> None:
    """Search a scope's archive: messages, notes and emails (any text is a valid query)."""
    root = ctx.find_root().obj or {}
    settings = load_settings(**({"db": root["db"]} if root.get("db") else {}))
    with Store(Path(settings.db)) as store:
        hits = store.search(scope, query, k=k, method=method, half_life_days=settings.search_half_life_days)
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "id": hit.id,
                        "score": round(hit.score, 6),
                        "text": hit.text,
                        "agent": hit.agent,
                        "ts": datetime.fromtimestamp(hit.ts, tz=UTC).isoformat(),
                    }
                    for hit in hits
                ],
                ensure_ascii=False,
                indent=2,
            )
        )
        return
    if not hits:
        click.echo("nothing found")
    for hit in hits:
        when = datetime.fromtimestamp(hit.ts, tz=UTC).strftime("%Y-%m-%d %H:%M")
        click.echo(f"#{hit.id:<8} {hit.score:7.4f}  {when}  [{hit.agent or hit.kind}]  {hit.snippet}")

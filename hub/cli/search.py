"""``agents-hub search``: the archive search from the command line."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click

from scopehub.hub.cli.options import json_option, scope_option, settings_of, store_of
from scopehub.memory import SearchHit, Store, get_vault_item

__all__ = ["label_of", "search_command"]

METHODS = ("hybrid", "bm25", "fuzzy", "semantic", "hybrid_semantic")


@click.command("search")
@click.argument("query")
@scope_option()
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(1, 1000), help="how many results")
@click.option("--method", type=click.Choice(METHODS), default="hybrid", show_default=True, help="ranking method")
@json_option
@click.pass_context
def search_command(ctx: click.Context, query: str, scope: str, k: int, method: str, as_json: bool) -> None:
    """Search a scope's archive: messages, notes and emails (any text is a valid query)."""
    settings = settings_of(ctx)
    store = store_of(ctx, must_exist=True)
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
                        "kind": hit.kind,
                        "label": label_of(store, scope, hit),
                        "importance": hit.importance,
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
        click.echo(f"#{hit.id:<8} {hit.score:7.4f}  {when}  [{label_of(store, scope, hit)}]  {hit.snippet}")


def label_of(store: Store, scope: str, hit: SearchHit) -> str:
    """What a hit is, for people: the agent of a message (or user), a knowledge fragment with
    its importance, else the vault item's own kind (note, email, draft)."""
    if hit.importance is not None:
        return f"knowledge {hit.importance:.2f}"
    if hit.kind != "vault":
        return hit.agent or "user"
    item = get_vault_item(store, scope, hit.id)
    return item.kind if item is not None else "vault"

"""The two archive search commands the CLI mounts: ``agents-hub eval search`` and ``agents-hub bench search``.

The library functions live by what they do: the LoCoMo evaluation in :mod:`.search_locomo`,
the benchmark in :mod:`.search_bench`; both are importable from here as before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from scopehub.memory import (
    SEARCH_METHODS,
    Embedder,
    LiteLLMEmbedder,
    StoreError,
)

from . import _report
from .search_bench import bench_search, source_texts
from .search_locomo import backend_name, evaluate_locomo, format_locomo_table

__all__ = [
    "backend_name",
    "bench_search",
    "evaluate_locomo",
    "format_locomo_table",
    "format_side_by_side",
    "search_bench_command",
    "search_eval_command",
    "source_texts",
]


def _embedder_from(model: str | None, api_base: str | None) -> Embedder | None:
    return LiteLLMEmbedder(model, api_base=api_base) if model else None


_DB_HELP = (
    "Database to run in: a SQLite path or a postgresql:// URL (repeat to compare backends"
    " side by side)."
)


@click.command("search")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["locomo"]),
    default="locomo",
    show_default=True,
    help="Dataset format.",
)
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the figures here as JSON.",
)
@click.option(
    "--method",
    "methods",
    multiple=True,
    type=click.Choice(SEARCH_METHODS),
    help="Method to evaluate (repeatable). Default: bm25, fuzzy, hybrid, plus semantic ones with an embedder.",
)
@click.option(
    "--embed-model", envvar="HUB_EMBED_MODEL", help="litellm embedding model for semantic methods."
)
@click.option(
    "--embed-api-base", envvar="HUB_EMBED_API_BASE", help="API base URL for the embedding model."
)
@click.option("--folds", default=0, show_default=True, help="K folds of the conversations: mean ± sd and min–max of each figure")
@click.option(
    "--nested",
    is_flag=True,
    help="With --folds K: choose the search settings (eval/search_cv.py's grid) on K-1 folds, score the held-out one (SQLite, hybrid).",
)
@click.option(
    "--db",
    "dbs",
    multiple=True,
    help=_DB_HELP + " Its group:locomo-* scopes are erased first. Default: a SQLite database in memory.",
)
@_report.report_option
def search_eval_command(
    fmt: str,
    path: Path,
    json_out: Path | None,
    methods: tuple[str, ...],
    embed_model: str | None,
    embed_api_base: str | None,
    folds: int,
    nested: bool,
    dbs: tuple[str, ...],
) -> None:
    """Recall of LoCoMo evidence turns by archive search, per method (recall@k, hit@k, latency)."""
    if nested:
        from scopehub.eval.search_cv import format_nested, nested_locomo

        if dbs or methods or embed_model:
            raise click.UsageError("--nested runs hybrid on a SQLite store in memory: drop --db, --method, --embed-model")
        try:
            found = nested_locomo(path, folds=folds)
        except (ValueError, OSError, StoreError) as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(format_nested(found))
        if json_out is not None:
            json_out.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
            click.echo(f"wrote {json_out}")
        return found
    embedder = _embedder_from(embed_model, embed_api_base)
    if not methods:
        methods = ("bm25", "fuzzy", "hybrid") + (
            ("semantic", "hybrid_semantic") if embedder else ()
        )
    results: list[dict[str, Any]] = []
    for db in dbs or (None,):
        try:
            result = evaluate_locomo(path, methods=methods, embedder=embedder, folds=folds, db=db)
        except (ValueError, OSError, StoreError) as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(format_locomo_table(result))
        click.echo("")
        results.append(result)
    if len(results) > 1:
        click.echo(format_side_by_side(results))
    data: Any = results[0] if len(results) == 1 else {"backends": results}
    if json_out is not None:
        json_out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        click.echo(f"wrote {json_out}")
    return data


def format_side_by_side(results: Sequence[dict[str, Any]]) -> str:
    """hit@10 (or the largest hit@k) and latency of each method, one column pair per database."""
    methods = list(dict.fromkeys(m for r in results for m in r.get("methods", {})))
    first = next(iter(results[0].get("methods", {}).values()), {})
    hit = max((c for c in first if c.startswith("hit@")), key=lambda c: int(c[4:]), default="hit@10")
    headers = ["method"]
    for r in results:
        headers += [f"{r.get('backend', '?')} {hit}", f"{r.get('backend', '?')} p50/p95 ms"]
    rows = []
    for method in methods:
        cells: list[str] = [method]
        for r in results:
            row = r.get("methods", {}).get(method, {})
            cells += [f"{row.get(hit, 0.0):.3f}", f"{row.get('p50_ms', 0.0):.1f} / {row.get('p95_ms', 0.0):.1f}"]
        rows.append(cells)
    return _report.format_table(headers, rows, title="Side by side:")


@click.command("search")
@click.option(
    "--messages",
    "sizes",
    type=click.IntRange(min=1),
    multiple=True,
    help="Messages in the scope (repeatable; default 100,000).",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the figures here as JSON.",
)
@click.option(
    "--data-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Dataset folder (default: $HUB_DATA_DIR or ../shared/data).",
)
@click.option(
    "--queries", type=click.IntRange(min=1), default=200, show_default=True, help="Timed searches."
)
@click.option(
    "--db",
    "dbs",
    multiple=True,
    help=_DB_HELP + " The database is kept; its bench scope must be empty. Default: a temporary SQLite file.",
)
@_report.report_option
def search_bench_command(
    sizes: tuple[int, ...], json_out: Path | None, data_dir: Path | None, queries: int, dbs: tuple[str, ...]
) -> None:
    """Build a scope of N messages from dataset text and time hybrid archive searches."""

    def report(done: int, total: int) -> None:
        if done and done % 100_000 == 0:
            click.echo(f"  ingested {done:,} of {total:,}", err=True)

    results: list[dict[str, Any]] = []
    try:
        texts, questions = source_texts(data_dir)
    except (ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    sizes = sizes or (100_000,)
    for messages in sizes:
        for db in dbs or (None,):
            try:
                result = bench_search(
                    messages,
                    texts=texts,
                    questions=questions,
                    queries=queries,
                    db_path=db,
                    progress=report,
                    # one scope per size, so one database serves every size
                    scope="group:bench" if len(sizes) == 1 else f"group:bench-{messages}",
                )
            except (ValueError, OSError) as exc:
                raise click.ClickException(str(exc)) from exc
            results.append(result)
    click.echo(
        _report.format_table(
            ["backend", "messages", "ingest msg/s", "p50 ms", "p95 ms", "queries", "first search ms"],
            [
                [r["backend"], r["messages"], f"{r['ingest_per_s']:,.0f}", f"{r['p50_ms']:.1f}", f"{r['p95_ms']:.1f}", r["queries"], f"{r['warmup_ms']:.0f}"]
                for r in results
            ],
            title="Hybrid archive search on a scope of N messages",
        )
    )
    data: Any = results[0] if len(results) == 1 else {"runs": results}
    if json_out is not None:
        json_out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        click.echo(f"wrote {json_out}")
    return data

"""Archive search evaluation (LoCoMo recall of evidence turns) and the search benchmark.

Library functions first (``evaluate_locomo``, ``bench_search``), then the two click
commands the CLI mounts: ``agents-hub eval search`` and ``agents-hub bench search``.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import click

from scopehub.memory import (
    SEARCH_METHODS,
    Embedder,
    LiteLLMEmbedder,
    LogRecord,
    Store,
    StoreError,
    index_embeddings,
    open_store,
    store_location,
)

from . import _report

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

Progress = Callable[[int, int], None]

_LOCOMO_SCOPE = "group:locomo-{}"
_ADVERSARIAL = 5  # LoCoMo category 5: no answer in the conversation, no evidence to find


def _percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))
    return ordered[index]


def backend_name(db: str | Path | None) -> str:
    """``sqlite`` or ``postgresql`` for a ``--db`` value (None: a SQLite database of our own)."""
    if db is None:
        return "sqlite"
    backend, _ = store_location(db)
    return "postgresql" if backend in ("postgresql", "postgres") else backend


def _shown(db: str | Path | None) -> str:
    """The database as it may be printed (a URL's password hidden)."""
    if db is None:
        return "(in memory)"
    from scopehub.memory.postgres import redact_url  # only reached with the extra's URL

    return redact_url(str(db)) if backend_name(db) == "postgresql" else str(db)


def _scope_name(sample_id: str) -> str:
    safe = re.sub(r"\s+", "_", sample_id.strip()) or "conversation"
    return _LOCOMO_SCOPE.format(safe)


def evaluate_locomo(
    path: str | Path,
    *,
    methods: Sequence[str] = ("bm25", "fuzzy", "hybrid"),
    ks: Sequence[int] = (1, 5, 10),
    embedder: Embedder | None = None,
    progress: Progress | None = None,
    half_life_days: float | None = 30.0,
    folds: int = 0,
    db: str | Path | None = None,
) -> dict[str, Any]:
    """Recall@k and hit@k of LoCoMo evidence turns, per search method, with latency.

    ``db``: the database to run in (a SQLite path or a ``postgresql://`` URL); default a
    fresh in-memory SQLite store. Its ``group:locomo-*`` scopes are erased first, so
    every run starts from the dataset alone.

    ``folds`` K > 1 also reports each figure's mean ± sd and min–max over K folds of the
    conversations (conversation number modulo K: leave conversations out; with as many
    folds as conversations, one fold per conversation).

    Each conversation becomes one scope of its turns (``ext_id`` = ``dia_id``) in a fresh
    in-memory store. Every question with evidence counts, except category 5. recall@k is
    the share of a question's evidence turns in the top k, hit@k whether at least one is;
    both are averaged over questions. Searches run "now" = the conversation's last turn.
    """
    from scopehub.eval.loaders import load_locomo  # written alongside; imported when used

    unknown = [m for m in methods if m not in SEARCH_METHODS]
    if unknown:
        raise ValueError(f"unknown search method(s): {', '.join(unknown)}")
    if embedder is None and any(m in ("semantic", "hybrid_semantic") for m in methods):
        raise ValueError("methods 'semantic' and 'hybrid_semantic' need an embedder")
    ks = sorted({int(k) for k in ks if int(k) > 0})
    if not ks:
        raise ValueError("ks must hold at least one positive k")
    top = ks[-1]
    conversations = load_locomo(path)
    malformed = sum(c.malformed_evidence for c in conversations)
    totals = {m: {f"{kind}@{k}": 0.0 for kind in ("recall", "hit") for k in ks} for m in methods}
    by_fold: dict[int, dict[str, dict[str, float]]] = {}
    fold_questions: Counter[int] = Counter()
    latencies: dict[str, list[float]] = {m: [] for m in methods}
    questions = [
        (c, q)
        for c in conversations
        for q in c.questions
        if q.category != _ADVERSARIAL and q.evidence
    ]
    done = 0
    with Store(":memory:") if db is None else open_store(db) as store:
        for number, conversation in enumerate(conversations):
            asked = [q for c, q in questions if c is conversation]
            if not asked:
                continue
            fold = number % folds if folds > 1 else 0
            fold_totals = by_fold.setdefault(fold, {m: dict.fromkeys(totals[m], 0.0) for m in methods})
            fold_questions[fold] += len(asked)
            scope = _scope_name(conversation.sample_id)
            if db is not None:
                store.erase(scope)
            store.import_records(conversation.turns, default_scope=scope)
            dia_of = {
                row[0]: row[1]
                for row in store.query("SELECT id, ext_id FROM messages WHERE scope = ?", (scope,))
            }
            now = max((t.ts for t in conversation.turns), default=None)
            if embedder is not None:
                index_embeddings(store, scope, embedder)
            for question in asked:
                evidence = set(question.evidence)
                for method in methods:
                    started = time.perf_counter()
                    hits = store.search(
                        scope,
                        question.question,
                        top,
                        method=method,
                        now=now,
                        half_life_days=half_life_days,
                        embedder=embedder,
                    )
                    latencies[method].append((time.perf_counter() - started) * 1000.0)
                    found = [dia_of.get(h.id) if h.kind == "message" else None for h in hits]
                    for k in ks:
                        shown = set(found[:k]) & evidence
                        for table in (totals[method], fold_totals[method]):
                            table[f"recall@{k}"] += len(shown) / len(evidence)
                            table[f"hit@{k}"] += 1.0 if shown else 0.0
                done += 1
                if progress is not None:
                    progress(done, len(questions))
    count = len(questions)
    result: dict[str, Any] = {
        "questions": count,
        "malformed_evidence": malformed,
        "backend": backend_name(db),
        "db": _shown(db),
        "methods": {},
    }
    for method in methods:
        row = {
            name: round(value / count, 4) if count else 0.0
            for name, value in totals[method].items()
        }
        row["p50_ms"] = round(_percentile(latencies[method], 0.50), 3)
        row["p95_ms"] = round(_percentile(latencies[method], 0.95), 3)
        result["methods"][method] = row
    if folds > 1:
        from scopehub.eval.routing import spread

        result["fold_questions"] = [fold_questions[fold] for fold in sorted(by_fold) if fold_questions[fold]]
        result["folds"] = {
            method: {
                name: spread([by_fold[fold][method][name] / fold_questions[fold] for fold in sorted(by_fold) if fold_questions[fold]])
                for name in totals[method]
            }
            for method in methods
        }
    return result


def format_locomo_table(result: dict[str, Any]) -> str:
    """A table of an ``evaluate_locomo`` result: recall@k and hit@k, latency, per method."""
    methods = result.get("methods", {})
    columns = [c for c in next(iter(methods.values()), {}) if c.startswith(("recall@", "hit@"))]
    columns += ["p50_ms", "p95_ms"]
    rows = [
        [method, *(f"{row.get(c, 0.0):.1f}" if c.endswith("_ms") else f"{row.get(c, 0.0):.3f}" for c in columns)]
        for method, row in methods.items()
    ]
    title = (
        f"LoCoMo archive search on {result.get('backend', 'sqlite')}: {result.get('questions', 0)} questions"
        f" ({result.get('malformed_evidence', 0)} malformed evidence ids)"
    )
    text = _report.format_table(["method", *columns], rows, title=title)
    folds = result.get("folds")
    if folds:
        from scopehub.eval.routing import format_spread

        first = next(iter(folds.values()))
        shown = [name for name in first if name.startswith("hit@") or name == "recall@10"]
        spread_rows = [
            [method, name, format_spread(figures[name], percent=False)] for method, figures in folds.items() for name in shown
        ]
        count = next(iter(first.values()))["folds"]
        text += "\n\n" + _report.format_table(
            ["method", "figure", "mean ± sd (min–max)"],
            spread_rows,
            title=f"Over {count} folds of the conversations: mean ± sd (min–max) on {result.get('backend', 'sqlite')}",
        )
    return text


# -- benchmark -------------------------------------------------------------------------------


def _default_data_dir() -> Path:
    env = os.environ.get("HUB_DATA_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def source_texts(data_dir: str | Path | None = None) -> tuple[list[str], list[str]]:
    """Utterances (SGD dev, MultiWOZ val, LoCoMo turns) and query seeds (LoCoMo questions).

    Datasets missing from ``data_dir`` are skipped; raises if none is there.
    """
    from scopehub.eval.loaders import load_locomo, load_multiwoz, load_sgd

    root = Path(data_dir) if data_dir is not None else _default_data_dir()
    texts: list[str] = []
    questions: list[str] = []
    sgd = root / "sgd" / "dev"
    if sgd.exists():
        texts.extend(t.text for d in load_sgd(sgd) for t in d.turns if t.text.strip())
    multiwoz = next(
        (
            p
            for p in (root / "multiwoz21" / "val.json.gz", root / "multiwoz21" / "val.json")
            if p.exists()
        ),
        None,
    )
    if multiwoz is not None:
        texts.extend(t.text for d in load_multiwoz(multiwoz) for t in d.turns if t.text.strip())
    locomo_dir = root / "locomo"
    for file in sorted(locomo_dir.glob("*.json*")) if locomo_dir.exists() else ():
        for conversation in load_locomo(file):
            texts.extend(t.text for t in conversation.turns if t.text.strip())
            questions.extend(q.question for q in conversation.questions)
    if not texts:
        raise FileNotFoundError(f"no SGD, MultiWOZ or LoCoMo data under {root}")
    return texts, questions


def _synthetic_messages(texts: Sequence[str], count: int, seed: int) -> Iterator[str]:
    """``count`` messages: the texts once each, then each one extended with half of another.

    The mix keeps the vocabulary and term frequencies of real chat while making every
    message past the first pass distinct (no corpus of exact duplicates).
    """
    rng = random.Random(seed)
    size = len(texts)
    for number in range(count):
        text = texts[number % size]
        if number >= size:
            other = texts[rng.randrange(size)].split()
            text = f"{text} {' '.join(other[: max(1, len(other) // 2)])}"
        yield text


def _typo(word: str, rng: random.Random) -> str:
    if len(word) < 5:
        return word
    at = rng.randrange(1, len(word) - 1)
    kind = rng.randrange(3)
    if kind == 0:  # drop a letter
        return word[:at] + word[at + 1 :]
    if kind == 1:  # swap two letters
        return word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    return word[:at] + rng.choice("aeiourstn") + word[at + 1 :]  # wrong letter


def _bench_queries(
    texts: Sequence[str], questions: Sequence[str], count: int, seed: int
) -> list[str]:
    """Questions and utterance fragments, about one in eight with a typo."""
    rng = random.Random(seed + 1)
    queries: list[str] = []
    for number in range(count):
        if questions and number % 2 == 0:
            query = rng.choice(questions)
        else:
            words = rng.choice(texts).split()
            start = rng.randrange(max(1, len(words) - 3))
            query = " ".join(words[start : start + rng.randint(2, 6)])
        if number % 8 == 3:
            words = query.split()
            longest = max(range(len(words)), key=lambda i: len(words[i]), default=None)
            if longest is not None:
                words[longest] = _typo(words[longest], rng)
                query = " ".join(words)
        queries.append(query)
    return queries


def _copy_messages(store: Any, scope: str, rows: Iterable[tuple[str, str, str, float]], batch: int) -> None:
    """Bulk-load ``(ext_id, role, text, ts)`` rows into a PostgreSQL store with COPY.

    One COPY (and one transaction) per ``batch`` rows: the search index's statement
    triggers then index each batch in one statement, and a batch's transition table
    stays small. The row triggers still give each message its ordered id.
    """
    pending: list[tuple[str, str, str, float]] = []

    def flush() -> None:
        with store.transaction() as conn:
            conn.execute(
                "INSERT INTO scopes(scope, kind, created) VALUES (?, 'group', ?) ON CONFLICT DO NOTHING",
                (scope, time.time()),
            )
            with conn.raw.cursor().copy("COPY messages (scope, ext_id, role, text, ts) FROM STDIN") as copy:
                for ext_id, role, text, ts in pending:
                    copy.write_row((scope, ext_id, role, text, ts))
        pending.clear()

    for row in rows:
        pending.append(row)
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    # What autovacuum does soon after a bulk load (visibility map, hint bits, planner
    # statistics): without it the first searches pay for it and the planner guesses.
    import psycopg

    with psycopg.connect(store.path, autocommit=True) as raw:
        raw.execute("VACUUM (ANALYZE) messages, search_docs, search_terms, search_stats")


def bench_search(
    messages: int,
    *,
    data_dir: str | Path | None = None,
    texts: Sequence[str] | None = None,
    questions: Sequence[str] | None = None,
    queries: int = 200,
    db_path: str | Path | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    scope: str = "group:bench",
) -> dict[str, Any]:
    """Build one scope of ``messages`` messages, then time hybrid searches in it.

    Source text comes from ``texts`` or the datasets under ``data_dir``. ``db_path`` is
    where: a SQLite path or a ``postgresql://`` URL (default a temporary SQLite file);
    ``scope`` must hold no messages there yet, and the database is kept. SQLite is loaded
    through the Store's import, PostgreSQL with COPY. One untimed search first loads the
    typo vocabulary (SQLite), a one-off per process that ``warmup_ms`` reports.
    """
    if messages <= 0:
        raise ValueError("messages must be positive")
    if texts is None:
        texts, found_questions = source_texts(data_dir)
        questions = found_questions if questions is None else questions
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ValueError("no source texts")
    query_list = _bench_queries(texts, list(questions or ()), queries, seed)
    backend = backend_name(db_path)
    with tempfile.TemporaryDirectory(prefix="hub-bench-") as tmp:
        target = db_path if db_path is not None else Path(tmp) / "bench.db"
        try:
            store = open_store(target)
        except StoreError as exc:
            raise ValueError(str(exc)) from exc
        with store:
            if store.count_messages(scope):
                raise ValueError(
                    f"{scope} already has messages in {_shown(db_path)}; the benchmark builds it"
                    " afresh (use another database, or erase the scope)"
                )
            start_ts = 1_700_000_000.0

            def numbered() -> Iterator[tuple[str, str, str, float]]:
                for number, text in enumerate(_synthetic_messages(texts, messages, seed)):
                    if progress is not None and number % 10_000 == 0:
                        progress(number, messages)
                    yield str(number), "user" if number % 2 == 0 else "agent", text, start_ts + 30.0 * number

            started = time.perf_counter()
            if store.dialect.is_sqlite:
                store.import_records(
                    (
                        # scope set here, the import need not copy each record
                        LogRecord(id=ext_id, scope=scope, role=role, text=text, ts=ts)
                        for ext_id, role, text, ts in numbered()
                    ),
                    default_scope=scope,
                    batch_size=5000,
                )
            else:
                _copy_messages(store, scope, numbered(), batch=20_000)
            ingest_s = time.perf_counter() - started
            now = start_ts + 30.0 * messages
            started = time.perf_counter()
            store.search(scope, "restarant booking tomorow", 10, now=now)
            warmup_ms = (time.perf_counter() - started) * 1000.0
            timings: list[float] = []
            for query in query_list:
                started = time.perf_counter()
                store.search(scope, query, 10, now=now)
                timings.append((time.perf_counter() - started) * 1000.0)
    return {
        "backend": backend,
        "messages": messages,
        "ingest_per_s": round(messages / ingest_s, 1),
        "p50_ms": round(_percentile(timings, 0.50), 3),
        "p95_ms": round(_percentile(timings, 0.95), 3),
        "p99_ms": round(_percentile(timings, 0.99), 3),
        "max_ms": round(max(timings, default=0.0), 3),
        "queries": len(timings),
        "warmup_ms": round(warmup_ms, 1),
        "method": "hybrid",
    }


# -- click commands ------------------------------------------------------------------------------


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

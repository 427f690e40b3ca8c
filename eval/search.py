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
    index_embeddings,
)

__all__ = [
    "bench_search",
    "evaluate_locomo",
    "format_locomo_table",
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
) -> dict[str, Any]:
    """Recall@k and hit@k of LoCoMo evidence turns, per search method, with latency.

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
    with Store(":memory:") as store:
        for number, conversation in enumerate(conversations):
            asked = [q for c, q in questions if c is conversation]
            if not asked:
                continue
            fold = number % folds if folds > 1 else 0
            fold_totals = by_fold.setdefault(fold, {m: dict.fromkeys(totals[m], 0.0) for m in methods})
            fold_questions[fold] += len(asked)
            scope = _scope_name(conversation.sample_id)
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
    result: dict[str, Any] = {"questions": count, "malformed_evidence": malformed, "methods": {}}
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

        result["folds"] = {
            method: {
                name: spread([by_fold[fold][method][name] / fold_questions[fold] for fold in sorted(by_fold) if fold_questions[fold]])
                for name in totals[method]
            }
            for method in methods
        }
    return result


def format_locomo_table(result: dict[str, Any]) -> str:
    """A fixed-width table of an ``evaluate_locomo`` result."""
    methods = result.get("methods", {})
    columns = [c for c in next(iter(methods.values()), {}) if c.startswith(("recall@", "hit@"))]
    columns += ["p50_ms", "p95_ms"]
    head = f"{'method':<16}" + "".join(f"{c:>11}" for c in columns)
    lines = [
        f"LoCoMo archive search: {result.get('questions', 0)} questions"
        f" ({result.get('malformed_evidence', 0)} malformed evidence ids)",
        head,
        "-" * len(head),
    ]
    for method, row in methods.items():
        cells = "".join(
            f"{row.get(c, 0.0):>11.1f}" if c.endswith("_ms") else f"{row.get(c, 0.0):>11.3f}"
            for c in columns
        )
        lines.append(f"{method:<16}{cells}")
    folds = result.get("folds")
    if folds:
        from scopehub.eval.routing import format_spread

        first = next(iter(folds.values()))
        shown = [name for name in first if name.startswith("hit@") or name == "recall@10"]
        lines.append("")
        lines.append(f"Over {next(iter(first.values()))['folds']} folds of the conversations: mean ± sd (min–max)")
        for method, figures in folds.items():
            for name in shown:
                lines.append(f"{method:<16}{name:<11}{format_spread(figures[name], percent=False)}")
    return "\n".join(lines)


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
) -> dict[str, Any]:
    """Build one scope of ``messages`` messages through the Store, then time hybrid searches.

    Source text comes from ``texts`` or the datasets under ``data_dir``. The database is a
    temporary file unless ``db_path`` is given (it must not exist yet). One untimed search
    first loads the typo vocabulary, a one-off per process that ``warmup_ms`` reports.
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
    with tempfile.TemporaryDirectory(prefix="hub-bench-") as tmp:
        path = Path(db_path) if db_path is not None else Path(tmp) / "bench.db"
        if path.exists():
            raise FileExistsError(f"{path} exists; the benchmark builds a fresh database")
        scope = "group:bench"
        with Store(path) as store:
            start_ts = 1_700_000_000.0

            def records() -> Iterable[LogRecord]:
                for number, text in enumerate(_synthetic_messages(texts, messages, seed)):
                    if progress is not None and number % 10_000 == 0:
                        progress(number, messages)
                    yield LogRecord(
                        id=str(number),
                        scope=scope,  # set here, the import need not copy each record
                        role="user" if number % 2 == 0 else "agent",
                        text=text,
                        ts=start_ts + 30.0 * number,
                    )

            started = time.perf_counter()
            store.import_records(records(), default_scope=scope, batch_size=5000)
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
def search_eval_command(
    fmt: str,
    path: Path,
    json_out: Path | None,
    methods: tuple[str, ...],
    embed_model: str | None,
    embed_api_base: str | None,
    folds: int,
) -> None:
    """Recall of LoCoMo evidence turns by archive search, per method (recall@k, hit@k, latency)."""
    embedder = _embedder_from(embed_model, embed_api_base)
    if not methods:
        methods = ("bm25", "fuzzy", "hybrid") + (
            ("semantic", "hybrid_semantic") if embedder else ()
        )
    try:
        result = evaluate_locomo(path, methods=methods, embedder=embedder, folds=folds)
    except (ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(format_locomo_table(result))
    if json_out is not None:
        json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        click.echo(f"wrote {json_out}")


@click.command("search")
@click.option(
    "--messages",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="Messages in the scope.",
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
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Keep the database here (must not exist).",
)
def search_bench_command(
    messages: int, json_out: Path | None, data_dir: Path | None, queries: int, db_path: Path | None
) -> None:
    """Build a scope of N messages from dataset text and time hybrid archive searches."""

    def report(done: int, total: int) -> None:
        if done and done % 100_000 == 0:
            click.echo(f"  ingested {done:,} of {total:,}", err=True)

    try:
        result = bench_search(
            messages, data_dir=data_dir, queries=queries, db_path=db_path, progress=report
        )
    except (ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"{result['messages']:,} messages: ingest {result['ingest_per_s']:,.0f}/s;"
        f" hybrid search p50 {result['p50_ms']:.1f} ms, p95 {result['p95_ms']:.1f} ms"
        f" over {result['queries']} queries (first search {result['warmup_ms']:.0f} ms)"
    )
    if json_out is not None:
        json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        click.echo(f"wrote {json_out}")

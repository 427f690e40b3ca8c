"""LoCoMo recall of evidence turns: ``evaluate_locomo`` and its table.

The library half of ``agents-hub eval search`` (the command is in :mod:`.search`);
``search_cv`` scores it under each setting of its grid.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scopehub.memory import (
    SEARCH_METHODS,
    Embedder,
    Store,
    index_embeddings,
    open_store,
    store_location,
)

from . import _report

__all__ = ["backend_name", "evaluate_locomo", "format_locomo_table"]

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

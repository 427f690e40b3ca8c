"""``bench_search``: archive search timed on synthetic scopes built from the public datasets.

The library half of ``agents-hub bench search`` (the command is in :mod:`.search`).
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from scopehub.memory import (
    LogRecord,
    StoreError,
    open_store,
)

from .search_locomo import Progress, _percentile, _shown, backend_name

__all__ = ["bench_search", "source_texts"]


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

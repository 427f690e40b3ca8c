"""Semantic archive search: message embeddings kept per scope, cosine ranking, the litellm embedder.

Tunable constants live in :mod:`._search_base`; ``eval/search_cv.py`` sets them in every search module.
"""

from __future__ import annotations

import array
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass
from ._search_base import Embedder, SearchError
from ._search_scope import _Ranges, _resolve, _scope_ranges


class LiteLLMEmbedder:
    """Embeddings through ``litellm.embedding`` (any provider litellm knows)."""

    def __init__(self, model: str, api_base: str | None = None, **kwargs: Any) -> None:
        self.model = model
        self.api_base = api_base
        self.kwargs = kwargs

    @property
    def name(self) -> str:
        return self.model

    def embed(self, texts: list[str]) -> list[list[float]]:
        import litellm  # heavy and optional on this path: import when used

        response = litellm.embedding(
            model=self.model, input=texts, api_base=self.api_base, **self.kwargs
        )
        rows = sorted(response.data, key=lambda item: item["index"])
        return [list(map(float, row["embedding"])) for row in rows]


# -- embeddings -----------------------------------------------------------------------------------


def _embedder_name(embedder: Embedder) -> str:
    return str(
        getattr(embedder, "name", None)
        or getattr(embedder, "model", None)
        or type(embedder).__name__
    )


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as exc:  # not a declared dependency
        raise SearchError("semantic search needs numpy: pip install numpy") from exc
    return numpy


def index_embeddings(source: Any, scope: str, embedder: Embedder, *, batch_size: int = 64) -> int:
    """Embed the scope's messages and vault documents that have no vector from this embedder yet.

    Returns how many were embedded. Vectors are float32 blobs keyed by document key.
    """
    conn, lock = _resolve(source)
    model = _embedder_name(embedder)
    with lock:
        ranges = _scope_ranges(conn, scope, None)
        if ranges is None:
            return 0
        lo, hi = ranges.parts[0]
        missing = conn.execute(
            "SELECT f.rowid, f.body FROM search_fts f WHERE f.rowid BETWEEN ? AND ?"
            " AND NOT EXISTS (SELECT 1 FROM search_vectors v WHERE v.doc = f.rowid AND v.model = ?)",
            (lo, hi, model),
        ).fetchall()
    done = 0
    for start in range(0, len(missing), batch_size):
        chunk = missing[start : start + batch_size]
        vectors = embedder.embed([body for _, body in chunk])
        if len(vectors) != len(chunk):
            raise SearchError(f"embedder returned {len(vectors)} vectors for {len(chunk)} texts")
        rows = [
            (key, model, array.array("f", vec).tobytes())
            for (key, _), vec in zip(chunk, vectors, strict=True)
        ]
        with lock, _write(conn):
            # A document erased while we were embedding must not come back as a vector.
            conn.executemany(
                "INSERT OR REPLACE INTO search_vectors(doc, model, vec)"
                " SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM search_fts WHERE rowid = ?)",
                [(*row, row[0]) for row in rows],
            )
        done += len(rows)
    return done


@contextmanager
def _write(conn: sqlite3.Connection) -> Iterator[None]:
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _semantic(
    conn: sqlite3.Connection, ranges: _Ranges, query: str, embedder: Embedder, limit: int
) -> list[int]:
    """Document keys by cosine similarity to the query (brute force over the scope)."""
    np = _numpy()
    model = _embedder_name(embedder)
    keys: list[int] = []
    blobs: list[bytes] = []
    for lo, hi in ranges.parts:
        for key, blob in conn.execute(
            "SELECT doc, vec FROM search_vectors WHERE doc BETWEEN ? AND ? AND model = ?",
            (lo, hi, model),
        ):
            keys.append(key)
            blobs.append(blob)
    if not keys or not query.strip():
        return []
    qvec = np.asarray(embedder.embed([query])[0], dtype=np.float32)
    dim = qvec.shape[0]
    usable = [i for i, blob in enumerate(blobs) if len(blob) == 4 * dim]
    if not usable:
        return []
    matrix = np.frombuffer(b"".join(blobs[i] for i in usable), dtype=np.float32).reshape(
        len(usable), dim
    )
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(qvec) or 1.0)
    sims = matrix @ qvec / np.where(norms == 0, 1.0, norms)
    top = np.argsort(-sims)[:limit]
    return [keys[usable[int(i)]] for i in top]

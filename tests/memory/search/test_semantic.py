"""Embeddings in archive search (stored, erased, fused, optional), exact matches for symbols, commands never returned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scopehub.memory import (
    Embedder,
    LiteLLMEmbedder,
    SearchError,
    Store,
    index_embeddings,
)
from tests.memory.search.helpers import HAS_NUMPY, add, add_vault, ids, on_both_backends

# -- embeddings -----------------------------------------------------------------------------------


class LetterEmbedder:
    """A tiny deterministic embedder: letter counts (a-z)."""

    name = "letters"

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [[float(t.lower().count(chr(97 + i))) for i in range(26)] for t in texts]


def test_index_embeddings_stores_vectors_and_erase_removes_them(tmp_path: Path) -> None:
    with Store(tmp_path / "e.db") as store:
        mids = [add(store, "user:1", text) for text in ("zzz zebra", "aaa apple", "mmm melon")]
        add(store, "user:2", "other scope")
        embedder = LetterEmbedder()
        assert index_embeddings(store, "user:1", embedder) == 3
        assert index_embeddings(store, "user:1", embedder) == 0  # nothing new
        add(store, "user:1", "kiwi")
        assert index_embeddings(store, "user:1", embedder) == 1
        assert store.query("SELECT count(*) FROM search_vectors")[0][0] == 4
        with store.transaction() as conn:
            conn.execute("DELETE FROM messages WHERE id = ?", (mids[0],))
        assert store.query("SELECT count(*) FROM search_vectors")[0][0] == 3
        store.erase("user:1")
        assert store.query("SELECT count(*) FROM search_vectors")[0][0] == 0


@pytest.mark.skipif(HAS_NUMPY, reason="numpy is installed")
def test_semantic_search_without_numpy_says_so(store: Store) -> None:
    add(store, "user:1", "zebra")
    index_embeddings(store, "user:1", LetterEmbedder())
    with pytest.raises(SearchError, match="numpy"):
        store.search("user:1", "zebra", method="semantic", embedder=LetterEmbedder())


@pytest.mark.skipif(not HAS_NUMPY, reason="numpy is not installed")
def test_semantic_list_joins_the_fusion(store: Store) -> None:
    zebra = add(store, "user:1", "zzzz")
    add(store, "user:1", "aaaa")
    embedder = LetterEmbedder()
    index_embeddings(store, "user:1", embedder)
    assert ids(store.search("user:1", "zz", method="semantic", embedder=embedder))[0] == zebra
    assert zebra in ids(store.search("user:1", "zz", method="hybrid_semantic", embedder=embedder))


def test_without_an_embedder_nothing_semantic_happens(store: Store) -> None:
    mid = add(store, "user:1", "plain words")
    assert ids(store.search("user:1", "plain")) == [mid]
    assert store.query("SELECT count(*) FROM search_vectors")[0][0] == 0


def test_litellm_embedder_calls_litellm_embedding(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    seen: dict[str, Any] = {}

    def embedding(**kwargs: Any) -> Any:
        seen.update(kwargs)
        data = [
            {"index": i, "embedding": [float(len(t)), 1.0]} for i, t in enumerate(kwargs["input"])
        ]
        return types.SimpleNamespace(data=list(reversed(data)))

    monkeypatch.setitem(sys.modules, "litellm", types.SimpleNamespace(embedding=embedding))
    embedder = LiteLLMEmbedder("openai/text-embedding-3-small", api_base="http://127.0.0.1:9")
    assert isinstance(embedder, Embedder)
    assert embedder.embed(["ab", "abcd"]) == [[2.0, 1.0], [4.0, 1.0]]
    assert seen["model"] == "openai/text-embedding-3-small"
    assert seen["api_base"] == "http://127.0.0.1:9"


@on_both_backends
def test_emoji_and_symbols_are_found_by_exact_match(store: Store) -> None:
    party = add(store, "user:1", "we won the match 🎉🎉")
    euro = add(store, "user:1", "the hall costs 300 €")
    add(store, "user:1", "nothing to celebrate here")
    add(store, "user:2", "🎉 in another scope")
    vault = add_vault(store, "user:1", "Party ✨", "bring snacks")
    for method in ("hybrid", "bm25", "fuzzy"):
        assert ids(store.search("user:1", "🎉", method=method)) == [party], method
    assert ids(store.search("user:1", "€")) == [euro]
    assert [(h.kind, h.id) for h in store.search("user:1", "✨")] == [("vault", vault)]
    assert ids(store.search("user:1", "match 🎉"))[0] == party  # words and symbols together
    assert store.search("user:1", "🍕") == []
    assert ids(store.search("user:1", "🎉", before_id=party)) == []


@on_both_backends
def test_chat_commands_are_never_search_results(store: Store) -> None:
    command = add(store, "user:1", "/search milk")
    store.set_route(command, "hub", (), "command")
    message = add(store, "user:1", "buy milk on the way home")
    assert ids(store.search("user:1", "milk")) == [message]
    assert command not in ids(store.search("user:1", "search"))

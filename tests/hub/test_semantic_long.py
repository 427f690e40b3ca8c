"""A long message is routed by its start: the embedder is sent a bounded prefix, never the paste."""

from __future__ import annotations

import pytest

from scopehub.hub.routing import LocalClassifier, route
from scopehub.hub.routing.semantic import EMBED_CHARS, build_semantic_scorer
from tests.hub.test_semantic import PROFILES, ConceptEmbedder

pytest.importorskip("numpy")


def _router() -> tuple[LocalClassifier, ConceptEmbedder]:
    embedder = ConceptEmbedder()
    scorer = build_semantic_scorer(PROFILES, embedder)
    embedder.calls.clear()  # the examples' batch
    # No gate: every message is embedded (the words would decide this one alone).
    return LocalClassifier(PROFILES, semantic=scorer, semantic_gate=None), embedder


def test_a_huge_paste_is_embedded_by_its_first_characters_and_still_routed():
    classifier, embedder = _router()
    # A taxi request, then 100,000 characters of pasted log: the request decides.
    text = "book a chauffeur to the airport " + "lorem ipsum dolor " * 5600
    decision = route(text, classifier=classifier)
    sent = [t for batch in embedder.calls for t in batch]
    assert sent == [text[:EMBED_CHARS]]
    assert decision.agent == "taxi"


def test_a_message_within_the_bound_is_embedded_whole():
    classifier, embedder = _router()
    text = "book a chauffeur for tonight " + "x" * (EMBED_CHARS - 40)
    route(text, classifier=classifier)
    assert [t for batch in embedder.calls for t in batch] == [text]

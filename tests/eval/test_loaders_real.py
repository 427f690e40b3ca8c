"""Dataset loaders on the real public files under HUB_DATA_DIR (skipped, saying why, where they are absent)."""

from __future__ import annotations

from collections import Counter

import pytest

from scopehub.eval.loaders import (
    DatasetFormatError,
    Dialogue,
    clinc_domains,
    load_clinc,
    load_locomo,
    load_multiwoz,
    load_sgd,
    load_sgd_schema,
)
from tests.conftest import data_path

# --------------------------------------------------------------------------- real files


@pytest.fixture(scope="module")
def multiwoz() -> list[Dialogue]:
    return load_multiwoz(data_path("multiwoz21", "val.json.gz"))


@pytest.fixture(scope="module")
def sgd() -> list[Dialogue]:
    return load_sgd(data_path("sgd", "dev"))


def test_real_multiwoz(multiwoz: list[Dialogue]) -> None:
    assert len(multiwoz) == 999
    turns = [t for d in multiwoz for t in d.turns]
    assert len(turns) == 14_730
    assert len({t.id for t in turns}) == len(turns)
    agents = Counter(a for t in turns for a in t.agents)
    assert set(agents) <= {
        "attraction",
        "hospital",
        "hotel",
        "police",
        "restaurant",
        "taxi",
        "train",
    }
    assert {"attraction", "hotel", "restaurant", "taxi", "train"} <= set(agents)
    first = multiwoz[0].turns[0]
    assert first.role == "user" and first.agents and first.slots
    assert all(s.domain in first.agents for s in first.slots)
    assert any(t.role == "user" and any(s.domain == "taxi" for s in t.slots) for t in turns)


def test_real_sgd(sgd: list[Dialogue]) -> None:
    assert len(sgd) == 2098
    turns = [t for d in sgd for t in d.turns]
    assert len(turns) == 38_768
    assert len({t.id for t in turns}) == len(turns)
    agents = {a for t in turns for a in t.agents}
    assert "restaurants" in agents and "hotels" in agents and len(agents) == 16  # 17 services
    multi = [t for t in turns if t.role == "user" and len(t.agents) > 1]
    assert multi and all(len(set(t.agents)) == len(t.agents) for t in multi)
    assert any(t.role == "user" and t.slots for t in turns)
    schema = load_sgd_schema(data_path("sgd", "dev"))
    assert set(schema) == agents
    assert all(0 < len(text.split()) <= 100 for text in schema.values())


def test_real_locomo() -> None:
    conversations = load_locomo(data_path("locomo", "locomo10-dev.json"))
    assert len(conversations) == 5
    assert sum(len(c.questions) for c in conversations) == 999
    assert sum(c.malformed_evidence for c in conversations) > 0
    for conversation in conversations:
        ids = [t.id for t in conversation.turns]
        assert len(ids) == len(set(ids))
        assert [t.ts for t in conversation.turns] == sorted(t.ts for t in conversation.turns)
        assert all(q.category in {1, 2, 3, 4, 5} for q in conversation.questions)
        found = sum(e in set(ids) for q in conversation.questions for e in q.evidence)
        assert found >= 0.99 * sum(len(q.evidence) for q in conversation.questions)


def test_real_clinc() -> None:
    path = data_path("clinc150", "data_dev.json")
    assert len(clinc_domains(path.parent)) == 10
    train = load_clinc(path, "train")
    assert len(train) == 15_000
    assert len({agent for _, agent in train}) == 10
    assert {agent for _, agent in load_clinc(path, "oos_val")} == {None}
    with pytest.raises(DatasetFormatError, match="available splits"):
        load_clinc(path, "test")

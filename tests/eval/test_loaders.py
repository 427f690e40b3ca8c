"""Dataset loaders: tiny hand-made slices (plain and gzip), then sanity checks on the real files."""

from __future__ import annotations

import gzip
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from scopehub.eval.loaders import (
    DatasetFormatError,
    Dialogue,
    Turn,
    agent_name,
    clinc_domains,
    load_clinc,
    load_jsonl,
    load_locomo,
    load_multiwoz,
    load_sgd,
    load_sgd_schema,
    to_records,
)
from scopehub.memory import write_chatlog
from tests.conftest import data_path


def write_json(directory: Path, name: str, data: Any, gz: bool) -> Path:
    """Write ``data`` as ``name`` (plain) or ``name.gz`` (gzip); return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data)
    if gz:
        path = directory / f"{name}.gz"
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
        return path
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def slots_of(turn: Turn) -> set[tuple[str, str, str]]:
    return {(s.domain, s.name, s.value) for s in turn.slots}


# --------------------------------------------------------------------------- agent names


@pytest.mark.parametrize(
    ("domain", "agent"),
    [
        ("Restaurant", "restaurant"),
        ("restaurant", "restaurant"),
        ("Restaurants_1", "restaurants"),
        ("RentalCars_12", "rentalcars"),
        ("general", "general"),
        ("", "general"),
        (" Taxi ", "taxi"),
    ],
)
def test_agent_name(domain: str, agent: str) -> None:
    assert agent_name(domain) == agent


# --------------------------------------------------------------------------- MultiWOZ

MULTIWOZ = {
    "PMUL0001.json": {
        "goal": {},
        "log": [
            {
                "text": "I need a hotel in the east.",
                "dialog_act": {
                    "Hotel-Inform": [["Area", "east"]],
                    "Hotel-Request": [["Price", "?"]],
                },
            },
            {"text": "How many people?", "dialog_act": {"Booking-Request": [["People", "?"]]}},
            {"text": "There are 3 of us.", "dialog_act": {}},
            {"text": "Booked, reference AB12.", "dialog_act": {"Booking-Book": [["Ref", "AB12"]]}},
            {
                "text": "Thanks. I also need a taxi to the hotel.",
                "dialog_act": {
                    "general-thank": [["none", "none"]],
                    "Taxi-Inform": [["Dest", "acorn guest house"]],
                },
            },
            {"text": "Anything else?", "dialog_act": {"general-reqmore": [["none", "none"]]}},
        ],
    },
    "SNG0002": {
        "log": [
            {"text": "hello", "metadata": {}},  # dialog_act missing
            {"text": "Hi, how can I help?", "dialog_act": "No Annotation"},
        ]
    },
}


@pytest.mark.parametrize("gz", [False, True])
def test_multiwoz_slice(tmp_path: Path, gz: bool) -> None:
    dialogues = load_multiwoz(write_json(tmp_path, "val.json", MULTIWOZ, gz))
    assert [d.id for d in dialogues] == ["PMUL0001.json", "SNG0002"]
    turns = dialogues[0].turns
    assert [t.role for t in turns] == ["user", "agent"] * 3
    assert turns[0].id == "PMUL0001.json:0"
    assert turns[0].agents == ("hotel",)
    assert slots_of(turns[0]) == {("hotel", "Area", "east")}  # "?" is a request, not a value
    assert turns[1].agents == ("hotel",)  # booking step: inherits the user turn's agents
    assert turns[2].agents == ()  # no annotated domain
    # A booking after an unannotated user turn belongs to the dialogue's domain.
    assert turns[3].agents == ("hotel",)
    assert slots_of(turns[3]) == {("hotel", "Ref", "AB12")}
    assert turns[4].agents == ("taxi",)
    assert slots_of(turns[4]) == {("taxi", "Dest", "acorn guest house")}
    assert turns[5].agents == ("taxi",)  # general act only: previous user turn's agents
    unannotated = dialogues[1].turns
    assert [(t.role, t.agents, t.slots) for t in unannotated] == [
        ("user", (), ()),
        ("agent", (), ()),
    ]


def test_multiwoz_finds_the_gzip_twin(tmp_path: Path) -> None:
    write_json(tmp_path, "val.json", MULTIWOZ, gz=True)
    assert len(load_multiwoz(tmp_path / "val.json")) == 2


@pytest.mark.parametrize(
    "data", [[{"dialogue_id": "1_0001", "turns": []}], {"PMUL1": {"goal": {}}}, "text"]
)
def test_multiwoz_wrong_format(tmp_path: Path, data: Any) -> None:
    path = write_json(tmp_path, "bad.json", data, gz=False)
    with pytest.raises(DatasetFormatError, match=r"bad\.json") as info:
        load_multiwoz(path)
    assert "expected" in str(info.value)


def test_not_json_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "val.json.gz"
    path.write_bytes(gzip.compress(b"{not json"))
    with pytest.raises(DatasetFormatError, match=r"val\.json\.gz: expected JSON"):
        load_multiwoz(path)


# --------------------------------------------------------------------------- SGD


def sgd_frame(
    service: str, actions: list[tuple[str, str, list[str]]], **extra: Any
) -> dict[str, Any]:
    acts = [{"act": a, "slot": s, "values": v, "canonical_values": v} for a, s, v in actions]
    return {"service": service, "actions": acts, "slots": extra.pop("slots", []), **extra}


SGD_1 = [
    {
        "dialogue_id": "1_00000",
        "services": ["Restaurants_1", "Hotels_2"],
        "turns": [
            {
                "speaker": "USER",
                "utterance": "Book a table for 2 in San Jose.",
                "frames": [
                    sgd_frame(
                        "Restaurants_1",
                        [
                            ("INFORM", "number_of_seats", ["2"]),
                            ("INFORM_INTENT", "intent", ["Reserve"]),
                        ],
                        slots=[{"slot": "city", "start": 22, "exclusive_end": 30}],
                        state={
                            "active_intent": "Reserve",
                            "requested_slots": [],
                            "slot_values": {"number_of_seats": ["2"], "city": ["San Jose"]},
                        },
                    )
                ],
            },
            {
                "speaker": "SYSTEM",
                "utterance": "Booked at Sino.",
                "frames": [
                    sgd_frame(
                        "Restaurants_1", [("NOTIFY_SUCCESS", "", []), ("INFORM", "name", ["Sino"])]
                    )
                ],
            },
            {
                "speaker": "USER",
                "utterance": "Thanks. Now find me a hotel there for 2.",
                "frames": [
                    sgd_frame(
                        "Restaurants_1",
                        [("THANK_YOU", "", [])],
                        state={
                            "active_intent": "Reserve",
                            "requested_slots": [],
                            "slot_values": {"number_of_seats": ["2"], "city": ["San Jose"]},
                        },
                    ),
                    sgd_frame(
                        "Hotels_2",
                        [("INFORM_INTENT", "intent", ["SearchHotel"])],
                        state={
                            "active_intent": "SearchHotel",
                            "requested_slots": [],
                            "slot_values": {"location": ["San Jose"], "guests": ["2"]},
                        },
                    ),
                ],
            },
            {"speaker": "SYSTEM", "utterance": "Let me check.", "frames": []},
        ],
    }
]
SGD_2 = [
    {
        "dialogue_id": "2_00000",
        "services": ["Restaurants_2"],
        "turns": [
            {
                "speaker": "USER",
                "utterance": "yes, at 7pm",
                "frames": [
                    sgd_frame(
                        "Restaurants_2",
                        [("AFFIRM", "", []), ("INFORM", "time", ["7pm"])],
                        state={
                            "active_intent": "Reserve",
                            "requested_slots": [],
                            "slot_values": {"time": ["7pm"]},
                        },
                    )
                ],
            }
        ],
    }
]
SCHEMA = [
    {
        "service_name": "Restaurants_1",
        "description": "A leading provider for restaurant search and reservations",
        "slots": [{"name": "party_size", "description": "Number of seats to reserve at the restaurant"}],
        "intents": [
            {"name": "ReserveRestaurant", "description": "Reserve a table at a restaurant"},
            {
                "name": "FindRestaurants",
                "description": "Find a restaurant of a particular cuisine in a city",
            },
        ],
    },
    {
        "service_name": "Restaurants_2",
        "description": "A popular restaurant search and reservation service",
        "slots": [],
        "intents": [
            {"name": "ReserveRestaurant", "description": "Reserve a table at a restaurant"}
        ],
    },
    {
        "service_name": "Hotels_2",
        "description": " ".join(["word"] * 120),  # over the budget on its own
        "slots": [],
        "intents": [{"name": "SearchHotel", "description": "Find a hotel"}],
    },
]


@pytest.mark.parametrize("gz", [False, True])
def test_sgd_slice(tmp_path: Path, gz: bool) -> None:
    split = tmp_path / "dev"
    write_json(split, "dialogues_001.json", SGD_1, gz)
    write_json(split, "dialogues_002.json", SGD_2, not gz)  # mixed compression in one split
    write_json(split, "schema.json", SCHEMA, gz)
    dialogues = load_sgd(split)
    assert [d.id for d in dialogues] == ["1_00000", "2_00000"]
    first = dialogues[0].turns
    assert [t.id for t in first] == ["1_00000:0", "1_00000:1", "1_00000:2", "1_00000:3"]
    assert [t.role for t in first] == ["user", "agent", "user", "agent"]
    assert first[0].agents == ("restaurants",)
    assert slots_of(first[0]) == {
        ("restaurants", "number_of_seats", "2"),
        ("restaurants", "city", "San Jose"),
    }
    assert slots_of(first[1]) == {("restaurants", "name", "Sino")}
    # Several frames: several agents, the service the user turns to first.
    assert first[2].agents == ("hotels", "restaurants")
    # State values already known are not repeated; new ones are.
    assert slots_of(first[2]) == {("hotels", "location", "San Jose"), ("hotels", "guests", "2")}
    assert first[3].agents == ("hotels", "restaurants")  # no frame: the user turn's agents
    assert slots_of(dialogues[1].turns[0]) == {("restaurants", "time", "7pm")}
    assert [d.id for d in load_sgd(next(split.glob("dialogues_002*")))] == ["2_00000"]


def test_sgd_prefers_one_file_per_stem(tmp_path: Path) -> None:
    write_json(tmp_path, "dialogues_001.json", SGD_1, gz=False)
    write_json(tmp_path, "dialogues_001.json", SGD_1, gz=True)
    assert len(load_sgd(tmp_path)) == 1


def test_sgd_errors(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    with pytest.raises(
        DatasetFormatError, match=r"dialogues_\*\.json\[\.gz\].*subdirectories: dev"
    ):
        load_sgd(tmp_path)
    bad = write_json(tmp_path / "x", "dialogues_001.json", MULTIWOZ, gz=False)
    with pytest.raises(DatasetFormatError, match=r"dialogues_001\.json: expected SGD"):
        load_sgd(bad)
    with pytest.raises(DatasetFormatError, match=r"schema\.json"):
        load_sgd_schema(tmp_path / "dev")


@pytest.mark.parametrize("gz", [False, True])
def test_sgd_schema_slice(tmp_path: Path, gz: bool) -> None:
    path = write_json(tmp_path, "schema.json", SCHEMA, gz)
    for source in (tmp_path, path):
        schema = load_sgd_schema(source)
        assert set(schema) == {"restaurants", "hotels"}
        restaurants = schema["restaurants"]
        assert "leading provider" in restaurants and "popular restaurant" in restaurants
        assert restaurants.count("Reserve a table at a restaurant") == 1
        assert "particular cuisine" in restaurants
        # What the agent asks for describes it too: a description-only agent is found by it.
        assert "Number of seats to reserve" in restaurants
        assert all(len(text.split()) <= 100 for text in schema.values())


# --------------------------------------------------------------------------- CLINC150

CLINC = {
    "train": [["how much is in my account", "balance"], ["what is the weather", "weather"]],
    "val": [["freeze my account", "freeze_account"]],
    "oos_train": [["play some jazz on vinyl", "oos"]],
    "oos_val": [{"text": "a show on broadway", "intent": "oos"}],
}
DOMAINS = {"banking": ["balance", "freeze_account"], "utility": ["weather"]}


@pytest.mark.parametrize("gz", [False, True])
def test_clinc_slice(tmp_path: Path, gz: bool) -> None:
    data = write_json(tmp_path, "data_dev.json", CLINC, gz)
    write_json(tmp_path, "domains.json", DOMAINS, gz)
    assert load_clinc(data, "train") == [
        ("how much is in my account", "banking"),
        ("what is the weather", "utility"),
    ]
    assert load_clinc(data, "val") == [("freeze my account", "banking")]
    assert load_clinc(data, "oos_train") == [("play some jazz on vinyl", None)]
    assert load_clinc(data, "oos_val") == [("a show on broadway", None)]
    assert clinc_domains(tmp_path) == DOMAINS
    with pytest.raises(
        DatasetFormatError,
        match="no split 'test'; available splits: oos_train, oos_val, train, val",
    ):
        load_clinc(data, "test")


def test_clinc_domains_elsewhere_and_errors(tmp_path: Path) -> None:
    data = write_json(tmp_path / "data", "data_full.json", CLINC, gz=False)
    with pytest.raises(DatasetFormatError, match=r"domains\.json\[\.gz\] beside it"):
        load_clinc(data, "train")
    domains = write_json(tmp_path / "meta", "domains.json", DOMAINS, gz=True)
    assert len(load_clinc(data, "train", domains_path=domains)) == 2
    partial = write_json(tmp_path / "meta", "partial.json", {"banking": ["balance"]}, gz=False)
    with pytest.raises(DatasetFormatError, match="intent 'weather' is in no domain"):
        load_clinc(data, "train", domains_path=partial)
    with pytest.raises(DatasetFormatError, match="mapping each domain"):
        clinc_domains(write_json(tmp_path, "domains.json", ["banking"], gz=False))


# --------------------------------------------------------------------------- chat logs

CHATLOG = [
    {
        "id": "m1",
        "role": "user",
        "text": "book a table",
        "ts": 1,
        "scope": "user:1",
        "agent": "restaurant",
    },
    {
        "id": "m2",
        "role": "assistant",
        "text": "done",
        "ts": 2,
        "scope": "user:1",
        "agent": "restaurant",
    },
    {"id": "n1", "role": "user", "text": "hi", "ts": 3},
    {
        "id": "m3",
        "role": "user",
        "text": "taxi there",
        "ts": 4,
        "scope": "user:1",
        "agent": "taxi",
        "also_sees": ["restaurant"],
        "needs": ["m2"],
    },
]


@pytest.mark.parametrize("gz", [False, True])
def test_jsonl_slice(tmp_path: Path, gz: bool) -> None:
    text = "".join(json.dumps(line) + "\n" for line in CHATLOG)
    path = tmp_path / ("chat.jsonl.gz" if gz else "chat.jsonl")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    dialogues = load_jsonl(path)
    assert [d.id for d in dialogues] == ["user:1", "chat"]
    scoped = dialogues[0].turns
    assert [t.id for t in scoped] == ["m1", "m2", "m3"]
    assert [t.role for t in scoped] == ["user", "agent", "user"]
    assert scoped[2] == Turn(
        "m3", "user", "taxi there", ("taxi",), needs=("m2",), also_sees=("restaurant",), ts=4.0
    )  # the log's timestamps time the prompt-cache model of eval tokens
    assert dialogues[1].turns == (Turn("n1", "user", "hi", (), ts=3.0),)


def test_jsonl_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(CHATLOG[0]) + "\n[1, 2]\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"chat\.jsonl: expected a JSONL chat log: line 2"):
        load_jsonl(path)


def test_to_records_chains_dialogues(tmp_path: Path) -> None:
    first = Dialogue(
        "a", (Turn("a:0", "user", "hotel please", ("hotel",)), Turn("a:1", "agent", "ok", ()))
    )
    second = Dialogue(
        "b", (Turn("b:0", "user", "taxi", ("taxi", "hotel"), also_sees=("hotel",), needs=("a:0",)),)
    )
    records = to_records([first, second], "user:7", start_ts=1000.0)
    assert [r.id for r in records] == ["a:0", "a:1", "b:0"]
    assert [r.ts for r in records] == [1000.0, 1030.0, 1060.0]
    assert [r.agent for r in records] == ["hotel", None, "taxi"]
    assert [r.role for r in records] == ["user", "agent", "user"]
    assert {r.scope for r in records} == {"user:7"}
    assert records[2].also_sees == ("hotel",) and records[2].needs == ("a:0",)
    # Round trip through the canonical log.
    buffer = io.StringIO()
    write_chatlog(records, buffer)
    path = tmp_path / "log.jsonl"
    path.write_text(buffer.getvalue(), encoding="utf-8")
    (loaded,) = load_jsonl(path)
    assert loaded.id == "user:7"
    assert [t.agents for t in loaded.turns] == [("hotel",), (), ("taxi",)]
    assert loaded.turns[2].needs == ("a:0",)


# --------------------------------------------------------------------------- LoCoMo

LOCOMO = [
    {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bob!"},
                {
                    "speaker": "Bob",
                    "dia_id": "D1:2",
                    "text": "Look at this",
                    "blip_caption": "a photo of a dog",
                },
                {"speaker": "Ann", "dia_id": "D1:3", "text": "Cute."},
            ],
            # session 2 is missing; session 3 has no date_time; 4 has a date but no turns
            "session_3": [{"speaker": "Bob", "dia_id": "D3:1", "text": "Back again."}],
            "session_4_date_time": "10:37 am on 27 June, 2023",
        },
        "qa": [
            {
                "question": "When did Ann say hi?",
                "answer": "8 May 2023",
                "evidence": ["D1:1"],
                "category": 2,
            },
            {
                "question": "What year?",
                "answer": 2023,
                "evidence": ["D1:2; D3:1", "D"],
                "category": 1,
            },
            {
                "question": "Spaced?",
                "answer": "x",
                "evidence": ["D1: 3", "D:3:1", "D1:3"],
                "category": 4,
            },
            {"question": "Adversarial?", "adversarial_answer": "no", "evidence": [], "category": 5},
        ],
        "event_summary": {},
    }
]


@pytest.mark.parametrize("gz", [False, True])
def test_locomo_slice(tmp_path: Path, gz: bool) -> None:
    (conversation,) = load_locomo(write_json(tmp_path, "locomo.json", LOCOMO, gz))
    assert conversation.sample_id == "conv-1"
    turns = conversation.turns
    assert [t.id for t in turns] == ["D1:1", "D1:2", "D1:3", "D3:1"]
    assert [t.sender for t in turns] == ["Ann", "Bob", "Ann", "Bob"]
    assert {t.role for t in turns} == {"user"}
    assert turns[1].text == "Look at this [image: a photo of a dog]"
    assert turns[0].ts == 1683554160.0  # 2023-05-08 13:56 UTC
    assert turns[1].ts - turns[0].ts == 60.0
    assert turns[3].ts > turns[2].ts  # undated session: after the previous one
    questions = conversation.questions
    assert questions[0].evidence == ("D1:1",) and questions[0].category == 2
    assert questions[1].answer == "2023"
    assert questions[1].evidence == ("D1:2", "D3:1")
    assert questions[2].evidence == ("D1:3", "D3:1")
    assert questions[3].answer == "" and questions[3].category == 5
    # "D1:2; D3:1" split, "D" skipped, "D1: 3" and "D:3:1" repaired.
    assert conversation.malformed_evidence == 4


def test_locomo_wrong_format(tmp_path: Path) -> None:
    path = write_json(tmp_path, "locomo.json", [{"sample_id": "x", "qa": []}], gz=False)
    with pytest.raises(DatasetFormatError, match=r"locomo\.json: conversation #0: expected"):
        load_locomo(path)


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

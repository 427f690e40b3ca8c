"""Dataset loaders on small hand-made files: agent names, MultiWOZ and SGD."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from scopehub.eval.loaders import (
    DatasetFormatError,
    agent_name,
    load_multiwoz,
    load_sgd,
    load_sgd_schema,
)
from tests.eval.loader_helpers import slots_of, write_json

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

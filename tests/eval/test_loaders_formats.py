"""Dataset loaders on small hand-made files: CLINC150, chat logs (JSONL) and LoCoMo."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from scopehub.eval.loaders import (
    DatasetFormatError,
    Dialogue,
    Turn,
    clinc_domains,
    load_clinc,
    load_jsonl,
    load_locomo,
    to_records,
)
from scopehub.memory import write_chatlog
from tests.eval.loader_helpers import write_json

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

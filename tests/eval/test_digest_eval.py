"""The digest evaluation: what the agent is sent without search, against recent turns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from scopehub.eval.digest import digest_eval_command, evaluate_digest
from scopehub.hub.models.testing import FunctionModel
from tests.conftest import data_path

FILLER = [
    "Haha, that sounds fun!",
    "Totally, I know what you mean.",
    "Sure thing, talk soon!",
    "Yeah, it was a nice day.",
]


def locomo_file(tmp_path: Path) -> Path:
    """One conversation: a salient early turn, then chatter, over three sessions."""
    session_1 = [{"speaker": "Alice", "dia_id": "D1:1", "text": "I adopted a golden retriever named Biscuit from the Portland shelter."}]
    session_1 += [{"speaker": "Bob" if n % 2 else "Alice", "dia_id": f"D1:{n + 2}", "text": FILLER[n % 4]} for n in range(40)]
    session_2 = [{"speaker": "Bob" if n % 2 else "Alice", "dia_id": f"D2:{n + 1}", "text": FILLER[n % 4]} for n in range(40)]
    session_3 = [{"speaker": "Bob" if n % 2 else "Alice", "dia_id": f"D3:{n + 1}", "text": FILLER[n % 4]} for n in range(40)]
    conversation: dict[str, Any] = {
        "speaker_a": "Alice",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": session_1,
        "session_2_date_time": "2:00 pm on 20 May, 2023",
        "session_2": session_2,
        "session_3_date_time": "3:00 pm on 2 June, 2023",
        "session_3": session_3,
    }
    qa = [
        {"question": "What is the name of Alice's dog?", "answer": "Biscuit", "evidence": ["D1:1"], "category": 4},
        {"question": "What did Bob say last?", "answer": "talk soon", "evidence": ["D3:40"], "category": 4},
        {"question": "Who is Carol?", "answer": "", "evidence": [], "category": 5},
    ]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([{"sample_id": "conv-1", "conversation": conversation, "qa": qa}]))
    return path


def test_the_digest_keeps_an_old_salient_turn_the_recent_baseline_cannot(tmp_path):
    result = evaluate_digest(locomo_file(tmp_path))
    rows = result["conditions"]
    assert result["questions"] == 2  # the adversarial one has no evidence
    assert rows["window"]["evidence_hit"] == 0.5  # only the last turn is in the window
    assert rows["window+recent"]["evidence_hit"] == 0.5
    assert rows["window+digest"]["evidence_hit"] == 1.0 and rows["window+digest"]["answer_found"] == 1.0
    # Compared at the same cost: the baseline is filled to the digest's tokens.
    digest_cost = rows["window+digest"]["tokens_per_call"] - rows["window"]["tokens_per_call"]
    recent_cost = rows["window+recent"]["tokens_per_call"] - rows["window"]["tokens_per_call"]
    assert 0 < recent_cost <= digest_cost <= result["settings"]["digest_tokens"]
    assert result["compactions"]["full"] == 1 and result["compactions"]["incremental"] >= 1


def test_a_model_digest_is_replayed_through_the_same_keeper(tmp_path):
    def compact(messages: list[dict[str, Any]], tools: Any) -> str:
        shown = [line for line in messages[-1]["content"].splitlines() if line.startswith("#")]
        biscuit = [line.split(" ", 1)[0][1:] for line in shown if "Biscuit" in line]
        previous = [line for line in messages[-1]["content"].splitlines() if "Biscuit" in line and line.startswith("- ")]
        if biscuit or previous:
            sources = [int(biscuit[0])] if biscuit else json.loads(previous[0].rsplit("sources ", 1)[1])
            return json.dumps({"lines": [{"text": "Alice adopted a golden retriever named Biscuit.", "sources": sources}]})
        return json.dumps({"lines": []})

    result = evaluate_digest(locomo_file(tmp_path), model=FunctionModel(compact))
    assert result["mode"] == "model"
    assert result["conditions"]["window+digest"]["evidence_hit"] == 1.0


def test_the_judge_asks_with_and_without_the_digest(tmp_path):
    def answer(messages: list[dict[str, Any]], tools: Any) -> str:
        return "Biscuit" if "Biscuit" in messages[0]["content"] else "unknown"

    judge = evaluate_digest(locomo_file(tmp_path), judge_model=FunctionModel(answer))["judge"]
    assert judge["asked"] == 2 and judge["window"] == 0.0 and judge["window+digest"] == 0.5


def test_eval_digest_command_prints_the_table_and_json(tmp_path):
    out = tmp_path / "figures.json"
    result = CliRunner().invoke(digest_eval_command, ["--format", "locomo", str(locomo_file(tmp_path)), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "window + digest" in result.output and "window + recent turns (baseline)" in result.output
    assert json.loads(out.read_text())["questions"] == 2


def test_on_locomo_the_digest_beats_recent_turns_at_the_same_cost():
    path = data_path("locomo", "locomo10-dev.json")
    rows = evaluate_digest(path, limit=1)["conditions"]
    assert rows["window+digest"]["evidence_hit"] > rows["window+recent"]["evidence_hit"]
    # The gold answer's words are a noisier signal on one conversation; it must at least beat the window alone.
    assert rows["window+digest"]["answer_found"] >= rows["window"]["answer_found"]

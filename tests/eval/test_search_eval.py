"""The LoCoMo search evaluation and the search benchmark, on tiny hand-made data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from scopehub.eval.search import (
    bench_search,
    evaluate_locomo,
    search_bench_command,
    search_eval_command,
)
from scopehub.memory import NewMessage, SearchHit, Store

SESSION_1 = [
    ("Alice", "D1:1", "I adopted a puppy named Biscuit last week!"),
    ("Bob", "D1:2", "Congratulations! What breed is Biscuit?"),
    ("Alice", "D1:3", "A golden retriever, very fluffy and friendly."),
    ("Bob", "D1:4", "I started learning the violin recently."),
    ("Alice", "D1:5", "That's great, music keeps the mind sharp."),
]
SESSION_2 = [
    ("Bob", "D2:1", "My violin teacher lives in Vienna."),
    ("Alice", "D2:2", "Vienna is lovely in spring, enjoy the lessons."),
]
QUESTIONS = [
    {
        "question": "What is the name of Alice's puppy?",
        "answer": "Biscuit",
        "evidence": ["D1:1"],
        "category": 1,
    },
    {
        "question": "Which instrument does Bob learn and where does his teacher live?",
        "answer": "violin, Vienna",
        "evidence": ["D1:4", "D2:1"],
        "category": 1,
    },
    {"question": "What colour is Bob's car?", "answer": "", "evidence": [], "category": 5},
    {
        "question": "What breed is the puppy?",
        "answer": "golden retriever",
        "evidence": ["D1:3; D1:1"],
        "category": 4,
    },
    {"question": "What did Alice cook?", "answer": "nothing", "evidence": ["D9:99"], "category": 4},
    {"question": "When did they talk?", "answer": "May", "evidence": [], "category": 2},
]


def locomo_file(tmp_path: Path) -> Path:
    conversation: dict[str, Any] = {
        "speaker_a": "Alice",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": s, "dia_id": d, "text": t} for s, d, t in SESSION_1],
        "session_2_date_time": "10:00 am on 20 May, 2023",
        "session_2": [{"speaker": s, "dia_id": d, "text": t} for s, d, t in SESSION_2],
    }
    path = tmp_path / "locomo" / "tiny.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps([{"sample_id": "conv-a", "conversation": conversation, "qa": QUESTIONS}])
    )
    return path


def test_recall_and_hit_arithmetic_with_a_scripted_ranking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rankings = {
        "What is the name of Alice's puppy?": ["D1:2", "D1:1"],
        "Which instrument does Bob learn and where does his teacher live?": [
            "D1:4",
            "D1:2",
            "D1:3",
            "D1:5",
            "D2:2",
            "D2:1",
        ],
        "What breed is the puppy?": ["D1:3"],
        "What did Alice cook?": ["D1:1", "D1:2"],
    }
    asked: list[tuple[str, str]] = []

    def scripted(
        self: Store, scope: str, query: str, k: int = 10, **kwargs: Any
    ) -> list[SearchHit]:
        asked.append((scope, query))
        hits = []
        for ext in rankings[query][:k]:
            message = self.find_ext(scope, ext)
            assert message is not None
            hits.append(
                SearchHit(message.id, "message", 1.0, message.text, message.text, None, message.ts)
            )
        return hits

    monkeypatch.setattr(Store, "search", scripted)
    result = evaluate_locomo(locomo_file(tmp_path), methods=("bm25",))
    assert result["questions"] == 4  # category 5 and evidence-less questions are left out
    assert result["malformed_evidence"] == 1  # "D1:3; D1:1", split into two ids
    assert {scope for scope, _ in asked} == {"group:locomo-conv-a"}
    row = result["methods"]["bm25"]
    # Per question (recall@1, recall@5, recall@10) / (hit@1, hit@5, hit@10):
    # puppy (0, 1, 1)/(0, 1, 1); violin (.5, .5, 1)/(1, 1, 1); breed (.5, .5, .5)/(1, 1, 1); cook 0s.
    assert row["recall@1"] == pytest.approx(1.0 / 4)
    assert row["recall@5"] == pytest.approx(2.0 / 4)
    assert row["recall@10"] == pytest.approx(2.5 / 4)
    assert row["hit@1"] == pytest.approx(2 / 4)
    assert row["hit@5"] == pytest.approx(3 / 4)
    assert row["hit@10"] == pytest.approx(3 / 4)
    assert row["p95_ms"] >= row["p50_ms"] >= 0


def test_real_search_on_a_tiny_conversation(tmp_path: Path) -> None:
    result = evaluate_locomo(
        locomo_file(tmp_path), methods=("bm25", "fuzzy", "hybrid"), ks=(1, 5, 10)
    )
    assert set(result["methods"]) == {"bm25", "fuzzy", "hybrid"}
    for row in result["methods"].values():
        assert set(row) == {
            "recall@1",
            "recall@5",
            "recall@10",
            "hit@1",
            "hit@5",
            "hit@10",
            "p50_ms",
            "p95_ms",
        }
        assert row["recall@1"] <= row["recall@5"] <= row["recall@10"] <= 1
        assert row["hit@1"] <= row["hit@5"] <= row["hit@10"] <= 1
        assert row["hit@10"] == pytest.approx(
            3 / 4
        )  # all but the question whose evidence does not exist


def test_semantic_methods_need_an_embedder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="embedder"):
        evaluate_locomo(locomo_file(tmp_path), methods=("semantic",))
    with pytest.raises(ValueError, match="unknown"):
        evaluate_locomo(locomo_file(tmp_path), methods=("psychic",))


def test_bench_search_builds_the_scope_it_reports_and_runs_its_queries(tmp_path: Path) -> None:
    texts = [
        f"message about topic {word} and more words"
        for word in ("alpha", "bravo", "charlie", "delta", "echo")
    ]
    db = tmp_path / "bench.db"
    result = bench_search(400, texts=texts, questions=["What about alpha?"], queries=12, db_path=db)
    with Store(db) as store:  # what was really imported and searched, not what was asked for
        assert store.count_messages("group:bench") == result["messages"] == 400
        assert store.search("group:bench", "alpha topic", 3)[0].text.startswith("message about topic alpha")
    assert result["queries"] == 12
    assert result["p50_ms"] <= result["p95_ms"] <= result["p99_ms"] <= result["max_ms"]


def test_eval_command_prints_a_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    run = CliRunner().invoke(
        search_eval_command, ["--format", "locomo", str(locomo_file(tmp_path)), "--json", str(out)]
    )
    assert run.exit_code == 0, run.output
    assert "hybrid" in run.output and "hit@10" in run.output
    data = json.loads(out.read_text())
    assert data["questions"] == 4
    assert set(data["methods"]) == {"bm25", "fuzzy", "hybrid"}
    run = CliRunner().invoke(search_eval_command, [str(locomo_file(tmp_path)), "--method", "bm25"])
    assert run.exit_code == 0, run.output
    assert "fuzzy" not in run.output


def test_bench_command_uses_the_data_dir(tmp_path: Path) -> None:
    locomo_file(tmp_path)
    out = tmp_path / "bench.json"
    run = CliRunner().invoke(
        search_bench_command,
        ["--messages", "300", "--queries", "5", "--data-dir", str(tmp_path), "--json", str(out)],
    )
    assert run.exit_code == 0, run.output
    data = json.loads(out.read_text())
    assert {"messages", "ingest_per_s", "p50_ms", "p95_ms"} <= set(data)
    assert data["messages"] == 300


def test_bench_command_reports_missing_data(tmp_path: Path) -> None:
    run = CliRunner().invoke(
        search_bench_command, ["--messages", "10", "--data-dir", str(tmp_path)]
    )
    assert run.exit_code != 0
    assert "no SGD, MultiWOZ or LoCoMo data" in run.output


def test_folds_over_conversations_give_mean_spread_and_range(tmp_path: Path) -> None:
    single = locomo_file(tmp_path)
    # Two copies of the conversation under other ids: three conversations, three folds.
    conversations = json.loads(single.read_text())
    copies = [dict(conversations[0], sample_id=f"conv-{n}") for n in "abc"]
    path = tmp_path / "three.json"
    path.write_text(json.dumps(copies))
    result = evaluate_locomo(path, methods=("bm25",), folds=3)
    figure = result["folds"]["bm25"]["hit@10"]
    assert figure["folds"] == 3 and figure["sd"] == 0.0  # the same conversation three times
    assert figure["mean"] == result["methods"]["bm25"]["hit@10"]
    run = CliRunner().invoke(search_eval_command, [str(path), "--method", "bm25", "--folds", "3"])
    assert run.exit_code == 0, run.output
    assert "Over 3 folds of the conversations" in run.output and "±" in run.output


def test_eval_runs_each_db_and_prints_them_side_by_side(tmp_path: Path, postgres_url: str) -> None:
    out = tmp_path / "both.json"
    lite = tmp_path / "eval.db"
    args = [str(locomo_file(tmp_path)), "--db", str(lite), "--db", postgres_url, "--json", str(out)]
    run = CliRunner().invoke(search_eval_command, args)
    assert run.exit_code == 0, run.output
    assert "Side by side" in run.output and "postgresql hit@10" in run.output
    results = json.loads(out.read_text())["backends"]
    assert [r["backend"] for r in results] == ["sqlite", "postgresql"]
    for result in results:  # all but the question whose evidence does not exist, on both
        assert result["methods"]["hybrid"]["hit@10"] == pytest.approx(3 / 4)
    # A run starts from the dataset alone: what its scopes held before is erased.
    with Store(lite) as store:
        store.append(NewMessage(scope="group:locomo-conv-a", role="user", text="a stray puppy named Biscuit", ts=1.0))
    run = CliRunner().invoke(search_eval_command, args)
    assert run.exit_code == 0, run.output
    with Store(lite) as store:
        assert store.count_messages("group:locomo-conv-a") == len(SESSION_1) + len(SESSION_2)


def test_bench_loads_postgresql_with_copy_and_refuses_a_scope_with_messages(postgres_url: str) -> None:
    texts = [f"message about topic {word} and more words" for word in ("alpha", "bravo", "charlie")]
    result = bench_search(300, texts=texts, questions=["What about alpha?"], queries=5, db_path=postgres_url)
    assert result["backend"] == "postgresql" and result["queries"] == 5
    from scopehub.memory import open_store

    with open_store(postgres_url) as store:
        assert store.count_messages("group:bench") == 300
        assert store.search("group:bench", "alpha topic", 3)[0].text.startswith("message about topic alpha")
    with pytest.raises(ValueError, match="already has messages"):
        bench_search(10, texts=texts, queries=1, db_path=postgres_url)


def test_nested_folds_choose_on_the_others_and_leave_the_search_as_it_was(tmp_path: Path) -> None:
    from scopehub.eval.search_cv import nested_locomo
    from scopehub.memory import _search_base as _search

    path = locomo_file(tmp_path)
    one = json.loads(path.read_text())[0]
    # The second conversation also asks what no turn answers: its folds score lower.
    unanswerable = {"question": "What colour is the sky?", "answer": "", "evidence": ["D1:5"], "category": 1}
    path.write_text(json.dumps([one, {**one, "sample_id": "conv-b", "qa": [*QUESTIONS, unanswerable]}]))
    before = (_search._SENDER_CREDIT, _search.STOPWORDS)
    grid = {"_SENDER_CREDIT": (1.0, 0.0), "framing_stopwords": (True, False)}  # shipped values first
    result = nested_locomo(path, folds=2, grid=grid)
    assert before == (_search._SENDER_CREDIT, _search.STOPWORDS)
    assert len(result["runs"]) == 4 and result["nested"]["folds"] == 2
    by_label = {run["label"]: run for run in result["runs"]}
    # Each held-out figure is the chosen setting's own figure on that fold.
    for fold, label in enumerate(result["chosen"]):
        assert result["nested"]["values"][fold] == by_label[label]["folds"][fold]
    assert result["nested"]["values"][0] > result["nested"]["values"][1]


def test_nested_refuses_other_databases(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        search_eval_command, [str(locomo_file(tmp_path)), "--folds", "2", "--nested", "--db", str(tmp_path / "x.db")]
    )
    assert result.exit_code != 0 and "--nested runs hybrid" in result.output

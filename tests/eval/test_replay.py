"""Token replay: every mode on a hand-made chat with known answers, reference detection,
the judge against a function model, and the ``eval tokens`` command."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from scopehub.eval.judge import exact_match, judge_messages, run_judge
from scopehub.eval.loaders import Dialogue, Slot, Turn
from scopehub.eval.replay import (
    MODES,
    CachingTokenizer,
    JudgeItem,
    Reference,
    domain_agent,
    find_references,
    normalize_value,
    replay,
)
from scopehub.hub.cli import cli
from scopehub.hub.context import AgentPrompt
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.routing import AgentProfile, LocalClassifier


class WordTokenizer:
    """One token per whitespace-separated word: hand-countable."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())

    def truncate(self, text: str, max_tokens: int) -> str:
        return " ".join(text.split()[:max_tokens])


def user(index: int, agent: str, text: str, *, slots: tuple[Slot, ...] = (), also: tuple[str, ...] = ()) -> Turn:
    return Turn(f"d:{index}", "user", text, (agent,), slots, also_sees=also)


def reply(index: int, agent: str, text: str) -> Turn:
    return Turn(f"d:{index}", "agent", text, (agent,))


# The chat. Word counts (+3 framing per message): t0 6, t1 6 (8 when shown to another
# agent as "[hotel agent] ..."), t2 5, t3 5 (7 labelled), t4 6, t5 6 (8 labelled), t6 5.
CHAT = Dialogue(
    "d",
    (
        user(0, "hotel", "book grand hotel"),
        reply(1, "hotel", "grand hotel booked"),
        user(2, "taxi", "need taxi"),
        reply(3, "taxi", "where to"),
        user(4, "taxi", "take me there", slots=(Slot("taxi", "dest", "grand hotel"),), also=("hotel",)),
        reply(5, "taxi", "on its way"),
        user(6, "hotel", "and breakfast"),
    ),
)
PROFILES = [
    AgentProfile("general", "small talk", ("hi there",)),
    AgentProfile("hotel", "hotel rooms and bookings", ("book a hotel room", "I need a place to stay")),
    AgentProfile("taxi", "taxis and cabs", ("I need a taxi", "book me a cab")),
]
CLASSIFIER = LocalClassifier(PROFILES)
# Persona "x" costs 1 + 3 framing; no rules, tools or facts.
PROMPTS = {name: AgentPrompt(name=name, persona="x") for name in ("general", "hotel", "taxi")}


def run_chat(**options: Any) -> dict[str, Any]:
    result = replay(
        [CHAT],
        prompts=PROMPTS,
        classifier_for=lambda _: CLASSIFIER,
        tokenizer=WordTokenizer(),
        routes="gold",
        window=4,
        tail=1,
        **options,
    )
    return result.summary()


def test_every_mode_on_a_hand_made_chat() -> None:
    report = run_chat()
    assert report["calls"] == 4
    assert report["references"] == 1
    modes = report["modes"]
    assert set(modes) == set(MODES)
    # History tokens per call, by hand (calls at t0, t2, t4, t6; window 4, tail 1):
    # full 0+14+24+26, scoped_no_also 0+8+10+8, scoped 0+8+24+8 (t4 reads hotel),
    # filter_first 0+8+24+20 (t6: hotel's t0, t1 from beyond the window, plus the tail),
    # oracle 0+8+19+8 (t4: the sources t0, t1 and the tail t3).
    expected_history = {"full": 64, "scoped_no_also": 26, "scoped": 40, "filter_first": 52, "oracle": 35}
    fixed_and_messages = 10 + 9 + 10 + 9
    other_agent = {"full": 8, "scoped_no_also": 2, "scoped": 4, "filter_first": 4, "oracle": 4}
    recall = {"full": 1.0, "scoped_no_also": 0.0, "scoped": 1.0, "filter_first": 1.0, "oracle": 1.0}
    for mode, history in expected_history.items():
        figures = modes[mode]
        # Per-call figures are rounded to 0.1 token in the report.
        assert figures["history_tokens_per_call"] == pytest.approx(history / 4, abs=0.051), mode
        assert figures["request_tokens_per_call"] == pytest.approx((history + fixed_and_messages) / 4, abs=0.051), mode
        assert figures["other_agent_messages_per_call"] == other_agent[mode] / 4, mode
        assert figures["reference_recall"] == recall[mode], mode
        assert figures["history_saving"] == pytest.approx(1 - history / 64, abs=1e-4), mode
        assert figures["request_saving"] == pytest.approx(1 - (history + 38) / (64 + 38), abs=1e-4), mode
    assert report["router_tokens_per_message"] == 0
    assert report["router"]["router_tokens_per_message"] == 0
    assert report["fixed_tokens_per_call"] == 4


def test_with_a_window_as_long_as_the_chat_filtering_first_selects_what_scoping_selects() -> None:
    # Nothing lies beyond a 40-message window here, so filter-then-window and
    # window-then-filter agree; the full window still carries more than either.
    result = replay(
        [CHAT], prompts=PROMPTS, classifier_for=lambda _: CLASSIFIER, tokenizer=WordTokenizer(), routes="gold", window=40, tail=1
    ).summary()
    history = {mode: figures["history_tokens_per_call"] for mode, figures in result["modes"].items()}
    assert history["filter_first"] == history["scoped"] < history["full"]
    assert history["scoped_no_also"] < history["scoped"]  # t4 reads hotel's messages only with also_sees
    assert result["modes"]["full"]["reference_recall"] == result["modes"]["scoped"]["reference_recall"] == 1.0


def test_gold_turn_without_label_stays_with_the_current_agent() -> None:
    chat = Dialogue(
        "g",
        (
            Turn("g:0", "user", "hello there", ()),
            reply(1, "general", "hi"),
            user(2, "taxi", "need taxi"),
            reply(3, "taxi", "where to"),
            Turn("g:4", "user", "thanks", ()),
        ),
    )
    result = replay([chat], prompts=PROMPTS, classifier_for=lambda _: CLASSIFIER, tokenizer=WordTokenizer(), routes="gold")
    assert result.calls == 3
    assert result.labelled == 1 and result.agreed == 1  # only the labelled turn is scored


def test_predicted_routes_use_the_router_and_chain_dialogues() -> None:
    second = Dialogue("e", tuple(Turn(f"e:{t.id.split(':')[1]}", t.role, t.text, t.agents, t.slots, also_sees=t.also_sees) for t in CHAT.turns))
    chats: list[int] = []

    def classifier_for(number: int) -> LocalClassifier:
        chats.append(number)
        return CLASSIFIER

    result = replay([CHAT, second], prompts=PROMPTS, classifier_for=classifier_for, tokenizer=WordTokenizer(), chain=2)
    assert chats == [0]  # two dialogues chained into one chat
    assert result.calls == 8
    assert sum(result.by_via.values()) == 8
    assert result.labelled == 8
    assert result.agreed >= 6  # "book grand hotel", "need taxi" and follow-ups go where they belong


def test_caching_tokenizer_counts_once() -> None:
    calls: list[str] = []

    class Counting(WordTokenizer):
        def count(self, text: str) -> int:
            calls.append(text)
            return super().count(text)

    cached = CachingTokenizer(Counting())
    assert cached.count("a b c") == 3 and cached.count("a b c") == 3
    assert calls == ["a b c"]
    assert cached.truncate("a b c", 2) == "a b"
    assert cached.truncate("a b", 5) == "a b"


# --------------------------------------------------------------------------- references


def test_normalize_value() -> None:
    assert normalize_value("Pizza Hut, Fen-Ditton!") == "pizza hut fen ditton"
    assert normalize_value("a party of four at 19:45") == "a party of 4 at 19 45"


def test_reference_detection_rules() -> None:
    turns = [
        user(0, "restaurant", "a table at pizza hut on friday", slots=(Slot("restaurant", "name", "pizza hut"),)),
        reply(1, "restaurant", "booked pizza hut for 4 people in the centre , yes"),
        user(
            2,
            "taxi",
            "a taxi there for four , leaving from the center",
            slots=(
                Slot("taxi", "dest", "pizza hut"),  # a reference (sources t0, t1)
                Slot("taxi", "dest", "Pizza Hut"),  # the same value again: counted once
                Slot("taxi", "people", "4"),  # "four" is in its own words
                Slot("taxi", "depart", "centre"),  # "center": said, spelt differently
                Slot("taxi", "parking", "yes"),  # uninformative
                Slot("taxi", "day", "friday"),  # a reference (source t0)
                Slot("taxi", "time", "7"),  # bare small number: never a reference
            ),
        ),
    ]
    found, beyond = find_references(turns)
    assert beyond == 0
    assert list(found) == [2]
    refs = {ref.value: ref for ref in found[2]}
    assert set(refs) == {"pizza hut", "friday"}
    assert refs["pizza hut"].sources == ("d:0", "d:1")
    assert refs["friday"].sources == ("d:0",)
    assert refs["pizza hut"].raw_value == "pizza hut"


def test_same_domain_and_beyond_window_are_not_references() -> None:
    turns = [
        user(0, "hotel", "the acorn guest house please"),
        reply(1, "hotel", "acorn guest house it is"),
        user(2, "hotel", "book it", slots=(Slot("hotel", "name", "acorn guest house"),)),  # same domain
        *[reply(3 + i, "general", "filler") for i in range(3)],
        user(6, "taxi", "take me there", slots=(Slot("taxi", "dest", "acorn guest house"),)),
    ]
    found, beyond = find_references(turns, window=3)
    assert found == {}
    assert beyond == 1  # hotel's messages hold it, but only beyond the last 3 messages
    found, beyond = find_references(turns, window=10)
    assert [ref.value for ref in found[6]] == ["acorn guest house"] and beyond == 0


def test_jsonl_needs_are_references() -> None:
    turns = [
        Turn("m1", "user", "here is an email: deadline friday", ("inbox",)),
        Turn("m2", "agent", "saved", ("inbox",)),
        Turn("m3", "user", "put that deadline on my tasks", ("tasks",), needs=("m1", "m9")),
    ]
    found, beyond = find_references(turns)
    assert [(ref.value, ref.slot, ref.sources) for ref in found[2]] == [("m1", "needs", ("m1",))]
    assert beyond == 1  # m9 is not in the chat


# --------------------------------------------------------------------------- agents


def test_domain_agent_is_shaped_like_a_real_agent() -> None:
    from scopehub.hub.context import fixed_tokens, get_tokenizer
    from scopehub.hub.context.prompt import agent_prompt

    spec = domain_agent("restaurant", "Find and book restaurants.")
    prompt = agent_prompt(spec)
    names = [tool["function"]["name"] for tool in prompt.offered(True)]
    assert names == ["find_restaurant", "book_restaurant", "cancel_restaurant", "search_memory"]
    fixed = sum(fixed_tokens(prompt, get_tokenizer()).values())
    assert 200 < fixed <= 800  # our fixed prompts stay under 800 tokens


# --------------------------------------------------------------------------- judge


def answer_from_context(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """A model that knows only its context: it names a venue when one is in it."""
    seen = " ".join(str(m["content"]).lower() for m in messages[:-1])
    return "Grand Hotel" if "grand hotel" in seen else "unknown"


def test_judge_scores_scoped_and_full_side_by_side() -> None:
    result = replay(
        [CHAT],
        prompts=PROMPTS,
        classifier_for=lambda _: CLASSIFIER,
        tokenizer=WordTokenizer(),
        routes="gold",
        window=4,
        tail=1,
        judge_limit=10,
    )
    assert len(result.judge_items) == 1
    item = result.judge_items[0]
    hidden = JudgeItem(item.reference, item.agent, [m for m in item.scoped if "grand" not in str(m["content"]) or m is item.scoped[-1]], item.full)
    model = FunctionModel(answer_from_context)
    report = run_judge([item, hidden], model)
    assert report["asked"] == 2
    assert (report["scoped_correct"], report["full_correct"]) == (1, 2)
    assert report["scoped_accuracy"] == 0.5 and report["full_accuracy"] == 1.0
    assert len(model.calls) == 4
    question = model.calls[0].messages[-1]["content"]
    assert question.startswith("take me there") and "dest" in question


def test_judge_skips_needs_references_and_matches_exactly() -> None:
    needs = JudgeItem(Reference("m3", "m1", "needs", "tasks", ("m1",), "m1"), "tasks", [{"role": "user", "content": "x"}], [])
    report = run_judge([needs], FunctionModel(lambda messages, tools: "m1"))
    assert (report["asked"], report["skipped"]) == (0, 1)
    assert exact_match("The Grand Hotel.", "grand hotel") == (False, True)
    assert exact_match(" grand  hotel ", "Grand Hotel") == (True, True)
    asked = judge_messages([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], "dest")
    assert asked[-1]["content"].startswith("hi") and "dest" in asked[-1]["content"]


# --------------------------------------------------------------------------- the command

MULTIWOZ = {
    "D1": {
        "log": [
            {"text": "I need a cheap hotel in the north .", "dialog_act": {"Hotel-Inform": [["Price", "cheap"], ["Area", "north"]]}},
            {"text": "The acorn guest house is cheap . Book it ?", "dialog_act": {"Hotel-Inform": [["Name", "acorn guest house"]]}},
            {"text": "Yes , for friday please .", "dialog_act": {"Hotel-Inform": [["Day", "friday"]]}},
            {"text": "Booked .", "dialog_act": {"Booking-Book": [["Ref", "X1"]]}},
        ]
    },
    "D2": {
        "log": [
            {"text": "I also need a taxi to the hotel .", "dialog_act": {"Taxi-Inform": [["Dest", "acorn guest house"]]}},
            {"text": "When do you want to leave ?", "dialog_act": {"Taxi-Request": [["Leave", "?"]]}},
            {"text": "At 17:00 , thanks .", "dialog_act": {"Taxi-Inform": [["Leave", "17:00"]]}},
            {"text": "Your taxi is booked .", "dialog_act": {"Taxi-Inform": [["Car", "red skoda"]]}},
        ]
    },
}


def write_multiwoz(directory: Path) -> Path:
    path = directory / "val.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(MULTIWOZ, handle)
    return path


def test_tokens_command_writes_the_documented_json(tmp_path: Path) -> None:
    data = write_multiwoz(tmp_path)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(cli, ["eval", "tokens", "--format", "multiwoz", str(data), "--chain", "2", "--routes", "gold", "--json", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["calls"] == 4
    assert report["references"] == 1  # "a taxi to the hotel": the hotel's name lives in hotel's messages
    assert set(report["modes"]) == set(MODES)
    for figures in report["modes"].values():
        assert {"history_tokens_per_call", "request_tokens_per_call", "other_agent_messages_per_call", "reference_recall", "history_saving", "request_saving"} <= set(figures)
    assert report["router"]["router_tokens_per_message"] == 0
    assert report["dataset"]["chain"] == 2
    assert "scoped" in result.output and "filter first" in result.output


def test_tokens_command_on_a_jsonl_log_uses_needs(tmp_path: Path) -> None:
    log = tmp_path / "chat.jsonl"
    lines = [
        {"id": "1", "role": "user", "text": "here is an email from Ram: report due Friday", "ts": 1, "scope": "user:1", "agent": "inbox"},
        {"id": "2", "role": "agent", "text": "Saved Ram's email.", "ts": 2, "scope": "user:1", "agent": "inbox"},
        {"id": "3", "role": "user", "text": "hi, how are you", "ts": 3, "scope": "user:1", "agent": "general"},
        {"id": "4", "role": "agent", "text": "Fine!", "ts": 4, "scope": "user:1", "agent": "general"},
        {"id": "5", "role": "user", "text": "put the deadline from that email on my tasks", "ts": 5, "scope": "user:1", "agent": "tasks", "needs": ["1"], "also_sees": ["inbox"]},
        {"id": "6", "role": "agent", "text": "Added: report, due Friday.", "ts": 6, "scope": "user:1", "agent": "tasks"},
    ]
    log.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    out = tmp_path / "out.json"
    result = CliRunner().invoke(cli, ["eval", "tokens", "--format", "jsonl", str(log), "--routes", "gold", "--tail", "2", "--json", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert (report["calls"], report["references"]) == (3, 1)
    assert report["modes"]["scoped"]["reference_recall"] == 1.0
    assert report["modes"]["scoped_no_also"]["reference_recall"] == 0.0


def test_judge_without_a_model_is_a_clear_error(tmp_path: Path) -> None:
    data = write_multiwoz(tmp_path)
    result = CliRunner().invoke(cli, ["eval", "tokens", "--format", "multiwoz", str(data), "--judge", "--quiet"])
    assert result.exit_code != 0
    assert "HUB_MODEL" in result.output


def test_plots_are_written_or_skipped(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    data = write_multiwoz(tmp_path)
    result = CliRunner().invoke(cli, ["eval", "tokens", "--format", "multiwoz", str(data), "--plots", str(tmp_path / "plots"), "--quiet"])
    assert result.exit_code == 0, result.output
    png = tmp_path / "plots" / "tokens_by_mode.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tokens_folds_split_the_chats_and_pool_to_the_whole(tmp_path: Path) -> None:
    data = write_multiwoz(tmp_path)
    whole, parts = tmp_path / "whole.json", tmp_path / "parts.json"
    base = ["eval", "tokens", "--format", "multiwoz", str(data), "--chain", "1", "--routes", "gold", "--quiet", "--json"]
    assert CliRunner().invoke(cli, [*base, str(whole)]).exit_code == 0
    result = CliRunner().invoke(cli, [*base, str(parts), "--folds", "2"])
    assert result.exit_code == 0, result.output
    pooled, folded = json.loads(whole.read_text()), json.loads(parts.read_text())
    # The parts together are the whole replay.
    assert folded["calls"] == pooled["calls"] and folded["modes"] == pooled["modes"]
    saving = folded["folds"]["scoped_history_saving"]
    assert saving["folds"] == 2 and saving["min"] <= saving["mean"] <= saving["max"]
    assert "Cross-validation: 2 disjoint parts" in result.output

"""Awareness in the replay: events from dataset acts carry their values, a value only
another agent's act holds is recalled through the block, the block is counted and within
budget, and the cursor shows news once (collaborators' latest again)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from scopehub.eval.awareness_replay import AwarenessReplay, act_events
from scopehub.eval.loaders import Act, Dialogue, Slot, Turn, load_multiwoz, load_sgd
from scopehub.eval.replay import replay
from scopehub.eval.simulate import load_pool, simulate
from scopehub.hub.cli import cli
from scopehub.hub.context import AgentPrompt
from scopehub.hub.orchestrator import AWARENESS_CONTEXT, AWARENESS_EARLIER, AWARENESS_EVENTS
from scopehub.hub.routing import AgentProfile, LocalClassifier
from scopehub.memory import (
    Store,
    advance_cursor,
    count_unconsumed,
    cursor_of,
    emit_event,
    latest_events,
    unconsumed_events,
)
from tests.eval.test_replay import WordTokenizer

# --------------------------------------------------------------------------- events from acts

MULTIWOZ = {
    "W1": {
        "log": [
            {"text": "A cheap hotel in the north please .", "dialog_act": {"Hotel-Inform": [["Price", "cheap"], ["Area", "north"]]}},
            {
                "text": "The acorn guest house is in the north . Book it ?",
                "dialog_act": {
                    "Hotel-Inform": [["Name", "acorn guest house"], ["Area", "north"]],
                    "Hotel-Request": [["Day", "?"]],
                    "general-reqmore": [["none", "none"]],
                },
            },
            {"text": "Yes , friday .", "dialog_act": {"Hotel-Inform": [["Day", "friday"]]}},
            {"text": "Booked , reference X1 .", "dialog_act": {"Booking-Book": [["Ref", "X1"]]}},
        ]
    }
}

SGD = [
    {
        "dialogue_id": "1_00000",
        "services": ["Restaurants_1"],
        "turns": [
            {
                "speaker": "USER",
                "utterance": "Find me a restaurant in San Jose.",
                "frames": [{"service": "Restaurants_1", "slots": [], "actions": [{"act": "INFORM_INTENT", "slot": "intent", "values": ["FindRestaurants"]}]}],
            },
            {
                "speaker": "SYSTEM",
                "utterance": "How about Sino? It is in San Jose.",
                "frames": [
                    {
                        "service": "Restaurants_1",
                        "slots": [],
                        "actions": [
                            {"act": "OFFER", "slot": "restaurant_name", "values": ["Sino"]},
                            {"act": "OFFER", "slot": "city", "values": ["San Jose"]},
                            {"act": "OFFER_INTENT", "slot": "intent", "values": ["ReserveRestaurant"]},
                            {"act": "NOTIFY_SUCCESS", "slot": "", "values": []},
                        ],
                    }
                ],
            },
        ],
    }
]


def test_multiwoz_system_acts_become_events_with_their_values(tmp_path: Path) -> None:
    path = tmp_path / "val.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(MULTIWOZ, handle)
    turns = load_multiwoz(path)[0].turns
    assert turns[0].acts == ()  # user turns keep no acts
    events = act_events(turns[1].acts, agent="hotel", scope="user:1", ts=0.0, first_id=1)
    # The request (no value) and general-reqmore emit nothing.
    assert [(e.agent, e.type, e.payload) for e in events] == [
        ("hotel", "dialogue.act", {"domain": "hotel", "act": "inform", "slots": [["Name", "acorn guest house"], ["Area", "north"]]})
    ]
    assert events[0].summary() == 'hotel: inform name "acorn guest house", area north'
    # A Booking act is the booking of the turn's domain.
    booked = act_events(turns[3].acts, agent="hotel", scope="user:1", ts=0.0, first_id=2)
    assert [e.summary() for e in booked] == ["hotel: book ref X1"]


def test_sgd_system_actions_become_events_with_their_values(tmp_path: Path) -> None:
    path = tmp_path / "dialogues_001.json"
    path.write_text(json.dumps(SGD))
    system = load_sgd(path)[0].turns[1]
    events = act_events(system.acts, agent="restaurants", scope="user:1", ts=0.0, first_id=1)
    # One event per act; intents and value-less actions (NOTIFY_SUCCESS) emit nothing.
    assert [e.payload for e in events] == [
        {"domain": "restaurants", "act": "offer", "slots": [["restaurant_name", "Sino"], ["city", "San Jose"]]}
    ]
    assert events[0].summary() == 'restaurants: offer restaurant name Sino, city "San Jose"'


# --------------------------------------------------------------------------- the replay

# Gold routes. The hotel's name is only in the hotel agent's reply and act; small talk
# pushes that reply out of the tail before the taxi agent's first call refers to it.
CHAT = Dialogue(
    "c",
    (
        Turn("c:0", "user", "cheap hotel north", ("hotel",)),
        Turn("c:1", "agent", "acorn guest house is free", ("hotel",), acts=(Act("hotel", "inform", (("Name", "acorn guest house"),)),)),
        Turn("c:2", "user", "thanks a lot", ("general",)),
        Turn("c:3", "agent", "you are welcome", ("general",)),
        Turn("c:4", "user", "nice weather", ("general",)),
        Turn("c:5", "agent", "indeed it is", ("general",)),
        Turn("c:6", "user", "a cab to my lodging", ("taxi",), (Slot("taxi", "dest", "acorn guest house"),)),
        Turn("c:7", "agent", "when", ("taxi",)),
        Turn("c:8", "user", "at five", ("taxi",)),
    ),
)
PROMPTS = {name: AgentPrompt(name=name, persona="x") for name in ("general", "hotel", "taxi")}
CLASSIFIER = LocalClassifier(
    [
        AgentProfile("general", "small talk", ("hi there",)),
        AgentProfile("hotel", "hotel rooms", ("book a hotel room",)),
        AgentProfile("taxi", "taxis", ("I need a taxi",)),
    ]
)


def run(chat: Dialogue = CHAT, **options: Any) -> dict[str, Any]:
    options = {"window": 40, "tail": 4, **options}
    return replay([chat], prompts=PROMPTS, classifier_for=lambda _: CLASSIFIER, tokenizer=WordTokenizer(), routes="gold", **options).summary()


def test_a_value_only_in_another_agents_act_is_recalled_through_awareness() -> None:
    report = run()
    assert report["references"] == 1
    modes = report["modes"]
    assert modes["scoped_no_also"]["reference_recall"] == 0.0  # the hotel's reply is out of the taxi's history
    assert modes["scoped_awareness"]["reference_recall"] == 1.0  # ...but its act is in the taxi's block
    assert modes["awareness_no_also"]["reference_recall"] == 1.0
    # Without a block (budget 0) nothing is recalled that way.
    off = run(awareness_budget=0)["modes"]
    assert off["scoped_awareness"]["reference_recall"] == 0.0
    assert off["scoped_awareness"]["awareness_tokens_per_call"] == 0.0


def test_awareness_tokens_are_counted_and_within_budget() -> None:
    report = run()
    modes = report["modes"]
    calls = report["calls"]
    # Blocks on two calls: general's first (just after the hotel's act) and the taxi's first.
    aware = modes["scoped_awareness"]["awareness_tokens_per_call"]
    assert aware > 0
    assert modes["awareness_no_also"]["awareness_tokens_per_call"] == aware
    for mode in ("full", "scoped", "scoped_no_also", "filter_first", "oracle"):
        assert modes[mode]["awareness_tokens_per_call"] == 0.0
    # The block is part of the request, on top of the same history.
    assert modes["scoped_awareness"]["history_tokens_per_call"] == modes["scoped"]["history_tokens_per_call"]
    # (plus, on the calls with a block, the framing of the system message that carries it)
    extra = modes["scoped_awareness"]["request_tokens_per_call"] - modes["scoped"]["request_tokens_per_call"]
    assert aware - 0.11 <= extra <= aware + 3
    full = modes["full"]["history_tokens_per_call"]
    assert modes["scoped_awareness"]["history_awareness_saving"] == pytest.approx(
        1 - (modes["scoped"]["history_tokens_per_call"] + aware) / full, abs=2e-3
    )
    assert report["awareness"]["events"] == 1
    # One block: the taxi's, header (7 words) + one line ("2 min ago"). General's first call
    # has the hotel's reply among its last messages: the act is not repeated in a block.
    assert aware * calls == 18
    # A tight budget holds on every call: at 17 words the taxi's block does not fit
    # (nothing is shown rather than a cut line), so the reference is lost.
    tight = run(awareness_budget=17)["modes"]["scoped_awareness"]
    assert tight["awareness_tokens_per_call"] == 0.0
    assert tight["reference_recall"] == 0.0


def test_budget_bounds_every_block_shows_the_newest_first_and_counts_the_rest() -> None:
    tokenizer = WordTokenizer()
    aware = AwarenessReplay("user:1", agents=PROMPTS, tokenizer=tokenizer, budget=30)
    for number in range(6):
        aware.emit([Act("hotel", "inform", (("Name", f"hotel number {number}"),))], agent="hotel", ts=0.0)
    shown = aware.block("taxi", now=60.0)
    assert tokenizer.count(shown.text) <= 30
    lines = shown.text.splitlines()[1:]
    listed = [line.rsplit(" ", 1)[-1] for line in lines[:-1]]
    # The newest first; the older ones counted in one line, not listed.
    assert listed == [f'{n}"' for n in range(5, 5 - len(listed), -1)] and len(listed) >= 1
    assert lines[-1] == f"- … and {6 - len(listed)} more not shown (/events lists them)"
    assert shown.passed_over == 6 - len(listed) and shown.consumed_upto == 6
    aware.record("taxi", shown)
    assert aware.block("taxi", now=60.0).text == ""  # counted is consumed: nothing is shown again


def test_news_is_shown_once_and_collaborators_latest_again() -> None:
    tokenizer = WordTokenizer()
    act = [Act("hotel", "inform", (("Name", "acorn guest house"),))]
    news = AwarenessReplay("user:1", agents=PROMPTS, tokenizer=tokenizer, view="interests")
    news.emit(act, agent="hotel", ts=0.0)
    first = news.block("taxi", now=30.0)
    assert "acorn guest house" in first.text
    assert news.block("taxi", now=30.0).text == first.text  # not recorded yet (a failed call): shown again
    news.record("taxi", first)
    assert news.block("taxi", now=60.0).text == ""  # consumed: not shown again
    assert "acorn guest house" in news.block("general", now=60.0).text  # other agents have their own cursor
    assert news.block("hotel", now=60.0).text == ""  # nobody is told what it did itself
    # A collaborator's latest events are shown on every call, consumed or not...
    both = AwarenessReplay("user:1", agents=PROMPTS, tokenizer=tokenizer, view="both")
    both.emit(act, agent="hotel", ts=0.0)
    both.record("taxi", both.block("taxi", now=30.0))
    assert "acorn guest house" in both.block("taxi", now=60.0).text
    # ...while they are among the newest few and within the horizon.
    for number in range(AWARENESS_CONTEXT):
        both.emit([Act("hotel", "inform", (("Phone", f"0{number}"),))], agent="hotel", ts=10.0)
    assert "acorn guest house" not in both.block("taxi", now=60.0).text
    late = AwarenessReplay("user:1", agents=PROMPTS, tokenizer=tokenizer, view="collaborators")
    late.emit(act, agent="hotel", ts=0.0)
    assert "acorn guest house" in late.block("taxi", now=3600.0).text
    assert late.block("taxi", now=7 * 3600.0).text == ""


@pytest.mark.parametrize("view", ["interests", "collaborators", "both"])
def test_the_replay_selects_what_the_store_selects(view: str) -> None:
    """The in-memory selection equals the hub's store queries on the same events."""
    tokenizer = WordTokenizer()
    aware = AwarenessReplay("user:1", agents=PROMPTS, tokenizer=tokenizer, view=view, budget=20)
    store = Store(":memory:")
    # Who answers in turn; each answer emits two acts (the budget shows about one line).
    plan = ["hotel", "taxi", "hotel", "hotel", "general", "hotel", "taxi", "general", "taxi"]
    for number, agent in enumerate(plan):
        now = number * 60.0
        for reader in ("hotel", "taxi", "general"):
            expected = unconsumed_events(store, "user:1", reader, interests=aware.view.interests, limit=20, newest=True)
            assert [e.id for e in aware.unconsumed(reader)] == [e.id for e in expected]
            collaborators = aware.collaborators(reader)
            latest = latest_events(store, "user:1", agents=collaborators, limit=AWARENESS_CONTEXT, for_agent=reader) if collaborators else []
            assert [e.id for e in aware.collaborator_events(reader, now)] == [e.id for e in latest]
            # Earlier events (already consumed, caused within the window) as the hub reads them.
            since, cursor = max(1, number - 3), cursor_of(store, "user:1", reader)
            meant = latest_events(store, "user:1", types=aware.view.interests, limit=AWARENESS_EARLIER, for_agent=reader) if aware.view.interests else []
            assert [e.id for e in aware.earlier(reader, since)] == [
                e.id for e in meant if e.id <= cursor and e.message_id is not None and e.message_id >= since
            ]
        shown = aware.block(agent, now)  # the call...
        aware.record(agent, shown)  # ...is recorded: both cursors move
        if shown.consumed_upto:
            advance_cursor(store, "user:1", agent, shown.consumed_upto)
        acts = [Act("hotel", "inform", (("Name", f"place {number}"),)), Act("hotel", "book", (("Ref", f"R{number}"),))]
        for event in aware.emit(acts, agent=agent, ts=now + 30.0, message_id=number + 1):
            stored = emit_event(store, "user:1", agent, event.type, event.payload, message_id=number + 1, now=now + 30.0)
            assert stored.id == event.id
    for agent in ("hotel", "taxi", "general"):
        assert aware.cursors.get(agent, 0) == cursor_of(store, "user:1", agent)
    assert any(aware.cursors.values()) == bool(aware.view.interests)  # only news moves a cursor
    store.close()


def test_tokens_command_reports_the_awareness_modes(tmp_path: Path) -> None:
    from tests.eval.test_replay import write_multiwoz

    data = write_multiwoz(tmp_path)
    out = tmp_path / "out.json"
    args = ["eval", "tokens", "--format", "multiwoz", str(data), "--chain", "2", "--routes", "gold", "--json", str(out), "--quiet"]
    result = CliRunner().invoke(cli, [*args, "--awareness-view", "both", "--awareness-tokens", "60"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["awareness"]["view"] == "both" and report["awareness"]["budget"] == 60
    for mode in ("scoped_awareness", "awareness_no_also"):
        assert 0 < report["modes"][mode]["awareness_tokens_per_call"] <= 60
    assert "scoped + awareness" in result.output and "history+awareness saving" in result.output


def test_simulation_reports_the_awareness_cost(tmp_path: Path) -> None:
    from tests.eval.test_replay import write_multiwoz

    pool = load_pool(write_multiwoz(tmp_path), acts=True)
    assert pool[0][2] == (Act("hotel", "inform", (("Name", "acorn guest house"),)),)
    with_acts = simulate(pool, agents=3, turns=60, tokenizer=WordTokenizer())
    assert with_acts.awareness_tokens > 0
    assert with_acts.awareness_saving < with_acts.saving
    # Without annotated acts there are no events and no cost; a budget of 0 turns it off.
    assert simulate([p[:2] for p in pool], agents=3, turns=60, tokenizer=WordTokenizer()).awareness_tokens == 0
    assert simulate(pool, agents=3, turns=60, tokenizer=WordTokenizer(), awareness_budget=0).awareness_tokens == 0
    out = tmp_path / "sim.json"
    result = CliRunner().invoke(cli, ["eval", "simulate", "--agents", "3", "--turns", "60", "--data", str(write_multiwoz(tmp_path)), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["awareness_tokens_per_call"] > 0
    assert "awareness" in result.output


def test_a_long_backlog_is_read_newest_first_as_the_store_reads_it() -> None:
    aware = AwarenessReplay("user:1", agents=PROMPTS, tokenizer=WordTokenizer())
    store = Store(":memory:")
    for number in range(AWARENESS_EVENTS + 5):
        for event in aware.emit([Act("hotel", "inform", (("Name", f"place {number}"),))], agent="hotel", ts=0.0):
            emit_event(store, "user:1", "hotel", event.type, event.payload, now=0.0)
    interests = aware.view.interests
    expected = [e.id for e in unconsumed_events(store, "user:1", "taxi", interests=interests, limit=AWARENESS_EVENTS, newest=True)]
    assert [e.id for e in aware.unconsumed("taxi")] == expected == list(range(6, AWARENESS_EVENTS + 6))
    assert aware.older_unconsumed("taxi") == count_unconsumed(store, "user:1", "taxi", interests=interests, up_to=expected[0] - 1) == 5
    store.close()


# --------------------------------------------------------------------------- folds


def test_folds_pool_back_to_the_whole_replay(tmp_path: Path) -> None:
    from scopehub.eval.awareness_folds import cross_validate, pool
    from scopehub.eval.replay import CachingTokenizer, prepare
    from tests.eval.test_replay import write_multiwoz

    prepared = prepare("multiwoz", str(write_multiwoz(tmp_path)), chain=1)
    tokenizer = CachingTokenizer(WordTokenizer())
    runs = cross_validate(prepared, folds=2, configs=[("interests", 150)], tokenizer=tokenizer, routes="predicted", chain=1)
    whole = replay(
        prepared.dialogues, prompts=prepared.prompts, classifier_for=prepared.classifier_for, tokenizer=tokenizer,
        routes="predicted", chain=1, default_also_sees=prepared.default_also_sees,
    )
    assert [r.calls for r in runs["interests@150"]] == [3, 1]
    pooled = pool(runs["interests@150"]).summary()
    assert pooled["modes"] == whole.summary()["modes"]
    assert pooled["awareness"] == whole.summary()["awareness"]


def test_the_configuration_is_chosen_by_the_targets_then_recall() -> None:
    from scopehub.eval.awareness_folds import FoldFigures, choose

    def figures(recall: float, saving: float, awareness: float) -> FoldFigures:
        return FoldFigures(recall, saving, awareness, None, None, 10, 100)

    candidates = {
        "cheap": figures(0.95, 0.55, 20.0),
        "better": figures(0.97, 0.52, 40.0),
        "best_but_costly": figures(0.99, 0.45, 70.0),
        "same_recall_more_tokens": figures(0.97, 0.51, 60.0),
    }
    assert choose(candidates, min_saving=0.5, max_awareness=80) == "better"
    assert choose(candidates, min_saving=0.6, max_awareness=80) == "cheap"  # none meets: the best saving


def test_awareness_command_prints_folds_and_the_held_out_choice(tmp_path: Path) -> None:
    from tests.eval.test_replay import write_multiwoz

    out = tmp_path / "cv.json"
    args = ["eval", "awareness", "--format", "multiwoz", str(write_multiwoz(tmp_path)), "--chain", "1", "--folds", "2"]
    result = CliRunner().invoke(cli, [*args, "--views", "interests,both", "--budgets", "40,150", "--json", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert set(report["configs"]) == {"interests@40", "interests@150", "both@40", "both@150"}
    assert len(report["cross_validated"]["per_fold"]) == 2
    assert "held-out fold" in result.output
    bad = CliRunner().invoke(cli, [*args, "--views", "everything"])
    assert bad.exit_code != 0 and "--views" in bad.output


def test_each_chat_keeps_the_router_of_its_place_in_the_whole_run() -> None:
    """Cross-fitting survives the folds: no chat is routed by a router trained on it."""
    from scopehub.eval.awareness_folds import cross_validate
    from scopehub.eval.replay import Prepared

    asked: list[int] = []

    def classifier_for(number: int) -> LocalClassifier:
        asked.append(number)
        return CLASSIFIER

    chats = [Dialogue(f"d{n}", tuple(Turn(f"d{n}:{t.id}", t.role, t.text, t.agents, t.slots, acts=t.acts) for t in CHAT.turns)) for n in range(5)]
    prepared = Prepared(chats, PROMPTS, classifier_for, {}, sorted(PROMPTS))
    cross_validate(prepared, folds=2, configs=[("interests", 150)], tokenizer=WordTokenizer(), routes="predicted", chain=1)
    assert asked == [0, 2, 4, 1, 3]


# The taxi agent is told the hotel's name once; later its own reply names the place again
# ("from the acorn guest house?"), and the person's answer refers to it.
TALKED_ABOUT = Dialogue(
    "t",
    (
        Turn("t:0", "user", "cheap hotel north", ("hotel",)),
        Turn("t:1", "agent", "acorn guest house is free", ("hotel",), acts=(Act("hotel", "inform", (("Name", "acorn guest house"), ("Area", "north"))),)),
        Turn("t:2", "user", "thanks a lot", ("general",)),
        Turn("t:3", "agent", "you are welcome", ("general",)),
        Turn("t:4", "user", "i need a cab", ("taxi",)),
        Turn("t:5", "agent", "where to", ("taxi",)),
        Turn("t:6", "user", "nice weather", ("general",)),
        Turn("t:7", "agent", "indeed it is", ("general",)),
        Turn("t:8", "user", "to the station", ("taxi",)),
        Turn("t:9", "agent", "from the north", ("taxi",)),
        Turn("t:10", "user", "yes at five", ("taxi",), (Slot("taxi", "depart", "acorn guest house"),)),
    ),
)


def test_an_act_already_shown_comes_back_while_the_talk_names_it() -> None:
    report = run(TALKED_ABOUT)
    assert report["references"] == 1
    modes = report["modes"]
    assert modes["scoped"]["reference_recall"] == 0.0  # the hotel's reply is out of the taxi's history
    # The taxi consumed the act at "i need a cab"; its own last reply names the area the
    # act named, so the act is back in the block when the person answers. (Had the reply
    # named the house, the taxi's own history would hold the value: no reference.)
    assert modes["scoped_awareness"]["reference_recall"] == 1.0


def test_folds_pool_to_the_whole_replay_awareness_included() -> None:
    from scopehub.eval.cache import preset
    from scopehub.eval.replay import fold_figures, merge_results, replay_folds

    options: dict[str, Any] = {"prompts": PROMPTS, "tokenizer": WordTokenizer(), "routes": "gold", "window": 40, "tail": 4}
    options["cache_model"] = preset("openai", min_prefix=0)
    chats = [CHAT, TALKED_ABOUT]
    whole = replay(chats, classifier_for=lambda _: CLASSIFIER, chain=1, **options).summary()
    parts = replay_folds(chats, folds=2, chain=1, classifier_for=lambda _: CLASSIFIER, **options)
    pooled = merge_results(parts).summary()
    assert whole["modes"]["scoped_awareness"]["awareness_tokens_per_call"] > 0
    for key in ("modes", "awareness", "search_memory", "cache", "calls", "references"):
        assert pooled[key] == whole[key], key
    spread = fold_figures(parts)
    assert spread["scoped_awareness_reference_recall"]["values"] == [1.0, 1.0]
    assert spread["awareness_tokens_per_call"]["folds"] == 2

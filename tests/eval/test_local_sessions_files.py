"""The sessions files of ``eval local`` (frozen, dev and blind): their shape, and what a bad one is told.

Only the shape is asserted, never a message's wording: the frozen file is a test set.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from collections import Counter

import pytest
from click.testing import CliRunner

from scopehub.eval import local_checks
from scopehub.eval.local import (
    BLIND_PATH,
    DEV_PATH,
    EXPECT_KEYS,
    FROZEN_PATH,
    INTENTS,
    SESSION_FILES,
    TUNE2_HELD_PATH,
    TUNE2_PATH,
    TUNE3_HELD_PATH,
    TUNE3_PATH,
    TUNE4_HELD_PATH,
    TUNE4_PATH,
    TUNE5_HELD_PATH,
    TUNE5_PATH,
    TUNE_HELD_PATH,
    TUNE_PATH,
    frozen_sessions,
)
from scopehub.hub.cli import cli


@pytest.mark.parametrize("path", [FROZEN_PATH, DEV_PATH, BLIND_PATH], ids=["frozen", "dev", "blind"])
def test_each_sessions_file_is_twelve_sessions_of_twelve_known_messages(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    sessions = frozen_sessions(path)  # builds every check; refuses unknown intents and keys
    assert len(sessions) == 12 and [len(steps) for _, steps in sessions] == [12] * 12
    assert len({name for name, _ in sessions}) == 12
    messages = [message for session in data["sessions"] for message in session["messages"]]
    assert {message["intent"] for message in messages} <= INTENTS
    assert set().union(*(message["expect"] for message in messages)) <= EXPECT_KEYS
    assert all(message["text"].strip() for message in messages)


def test_the_frozen_set_asks_for_every_intent_three_times_in_four_languages():
    data = json.loads(FROZEN_PATH.read_text(encoding="utf-8"))
    counts = Counter(message["intent"] for session in data["sessions"] for message in session["messages"])
    assert {intent: counts[intent] for intent in INTENTS if counts[intent] < 3} == {}
    languages = Counter(session["lang"] for session in data["sessions"])
    assert languages["de"] >= 2 and languages["fr"] >= 1 and languages["es"] >= 1
    assert any("+" in lang for lang in languages)  # one session mixes two languages
    assert "never" in data["about"] and "blind" in data["about"]


def test_round_5_sessions_are_two_halves_of_twelve_message_sessions_in_four_languages():
    halves = [json.loads(path.read_text(encoding="utf-8")) for path in (TUNE_PATH, TUNE_HELD_PATH)]
    names = [[session["name"] for session in half["sessions"]] for half in halves]
    assert all(len(n) == 5 for n in names) and not set(names[0]) & set(names[1])
    for path, half in zip((TUNE_PATH, TUNE_HELD_PATH), halves, strict=True):
        assert [len(steps) for _, steps in frozen_sessions(path)] == [12] * 5
        assert {session["lang"] for session in half["sessions"]} == {"en", "de", "fr", "es"}
        counts = Counter(message["intent"] for session in half["sessions"] for message in session["messages"])
        assert all(counts[intent] >= 3 for intent in ("complete_task", "dispatch", "ask_saved", "list_tasks"))
    assert "Held-out" in halves[1]["about"] and "before any tuning" in halves[1]["about"]


def test_round_6_sessions_are_two_halves_of_six_twelve_message_sessions_in_four_languages():
    halves = [json.loads(path.read_text(encoding="utf-8")) for path in (TUNE2_PATH, TUNE2_HELD_PATH)]
    names = [[session["name"] for session in half["sessions"]] for half in halves]
    assert all(len(n) == 6 for n in names) and not set(names[0]) & set(names[1])
    for path in (TUNE2_PATH, TUNE2_HELD_PATH):
        assert [len(steps) for _, steps in frozen_sessions(path)] == [12] * 6
    assert {session["lang"] for half in halves for session in half["sessions"]} == {"en", "de", "fr", "es"}
    assert "Held-out" in halves[1]["about"] and "before any" in halves[1]["about"] and "random.Random(" in halves[1]["about"]


def test_round_7_sessions_are_two_halves_of_five_twelve_message_sessions_in_four_languages():
    halves = [json.loads(path.read_text(encoding="utf-8")) for path in (TUNE3_PATH, TUNE3_HELD_PATH)]
    names = [[session["name"] for session in half["sessions"]] for half in halves]
    assert all(len(n) == 5 for n in names) and not set(names[0]) & set(names[1])
    for path in (TUNE3_PATH, TUNE3_HELD_PATH):
        assert [len(steps) for _, steps in frozen_sessions(path)] == [12] * 5
    languages = Counter(session["lang"] for half in halves for session in half["sessions"])
    assert languages == {"en": 6, "de": 2, "fr": 1, "es": 1}
    assert "Held-out" in halves[1]["about"] and "before any" in halves[1]["about"] and "random.seed(711)" in halves[1]["about"]


def test_round_8_sessions_are_two_halves_of_five_twelve_message_sessions_in_four_languages():
    halves = [json.loads(path.read_text(encoding="utf-8")) for path in (TUNE4_PATH, TUNE4_HELD_PATH)]
    names = [[session["name"] for session in half["sessions"]] for half in halves]
    assert all(len(n) == 5 for n in names) and not set(names[0]) & set(names[1])
    for path in (TUNE4_PATH, TUNE4_HELD_PATH):
        assert [len(steps) for _, steps in frozen_sessions(path)] == [12] * 5
    languages = Counter(session["lang"] for half in halves for session in half["sessions"])
    assert languages == {"en": 6, "de": 2, "fr": 1, "es": 1}
    assert "Held-out" in halves[1]["about"] and "before any" in halves[1]["about"] and "random.seed(812)" in halves[1]["about"]


def test_round_9_sessions_are_two_halves_of_five_twelve_message_sessions_in_four_languages():
    halves = [json.loads(path.read_text(encoding="utf-8")) for path in (TUNE5_PATH, TUNE5_HELD_PATH)]
    names = [[session["name"] for session in half["sessions"]] for half in halves]
    assert all(len(n) == 5 for n in names) and not set(names[0]) & set(names[1])
    for path in (TUNE5_PATH, TUNE5_HELD_PATH):
        assert [len(steps) for _, steps in frozen_sessions(path)] == [12] * 5
    languages = Counter(session["lang"] for half in halves for session in half["sessions"])
    assert languages == {"en": 6, "de": 2, "fr": 1, "es": 1}
    assert "Held-out" in halves[1]["about"] and "before any" in halves[1]["about"] and "random.seed(913)" in halves[1]["about"]


def test_expect_keys_are_the_ones_check_of_reads():
    source = inspect.getsource(local_checks.check_of) + inspect.getsource(local_checks._row_where)
    read = set(re.findall(r'expect(?:\.get\(|\[)"(\w+)"', source)) | set(re.findall(r'"(\w+)" in expect', source))
    assert read == EXPECT_KEYS


def _one_session_file(tmp_path, intent="add_task", expect=None):
    message = {"text": "add milk", "intent": intent, "expect": expect or {"new": "tasks", "words": ["milk"]}}
    path = tmp_path / "sessions.json"
    path.write_text(json.dumps({"about": "", "sessions": [{"name": "one", "lang": "en", "messages": [message]}]}), encoding="utf-8")
    return path


def test_a_file_with_an_unknown_intent_or_a_misspelt_key_is_refused_by_name(tmp_path):
    assert len(frozen_sessions(_one_session_file(tmp_path))) == 1
    with pytest.raises(ValueError, match=r"session 'one', message 1: unknown intent 'add_tsk'"):
        frozen_sessions(_one_session_file(tmp_path, intent="add_tsk"))
    with pytest.raises(ValueError, match=r"session 'one', message 1: unknown expect key 'word'"):
        frozen_sessions(_one_session_file(tmp_path, expect={"new": "tasks", "word": ["milk"]}))


@pytest.mark.parametrize("which", ["frozen", "dev", "tune", "tune-held", "tune2", "tune2-held", "tune3", "tune3-held", "tune4", "tune4-held", "tune5", "tune5-held", "tune6", "tune6-held"])
def test_eval_local_takes_frozen_and_dev(monkeypatch, which):
    assert SESSION_FILES[which].exists()
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    result = CliRunner().invoke(cli, ["eval", "local", "--sessions", which])
    assert result.exit_code == 2
    assert "needs the embedded model" in result.stderr  # past the option's check, at the model's
    help_text = " ".join(CliRunner().invoke(cli, ["eval", "local", "--help"]).output.split())
    assert "seen while tuning; a development set" in help_text

"""``agents-hub eval lessons``: the scripted replay's figures, and that they come out of the real hub."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from scopehub.eval.lessons import LESSON, run_lessons_replay
from scopehub.hub.cli import cli


def test_one_piece_of_feedback_ends_the_mistake_and_only_the_tasks_agent_pays_for_it() -> None:
    *learning, baseline = run_lessons_replay(days=4)
    for result in learning:
        assert (result.mode, result.exchanges_until_lesson, result.mistakes) == (result.mode, 2, 1)
        assert result.lessons_tokens_per_tasks_call[0] == 0 and 0 < result.lessons_tokens_after <= 120
        assert result.other_calls == 12 and result.other_lessons_tokens == 0
        assert result.lesson_model_calls == 1 and LESSON in result.section
    assert [r.mode for r in learning] == ["reaction", "command", "correction"]
    # Lessons off: the same feedback is learnt, but never reaches the agent, so the mistake repeats.
    assert not baseline.lessons_on and baseline.mistakes == 4 and baseline.exchanges_until_lesson is None


def test_without_a_lesson_model_the_feedback_is_kept_verbatim() -> None:
    reaction, command, _ = run_lessons_replay(["reaction", "command"], days=3, lesson_model=False)
    assert reaction.lesson_model_calls == 0 and "reacted 👎" in reaction.section
    assert reaction.exchanges_until_lesson == 2 and reaction.mistakes == 3  # a bare 👎 says what was wrong, not what is right
    assert command.mistakes == 1 and "no, I meant the work list" in command.section


def test_the_command_prints_the_figures_and_json() -> None:
    result = CliRunner().invoke(cli, ["eval", "lessons", "--days", "3", "--mode", "command"])
    assert result.exit_code == 0, result.output
    assert re.search(r"^command +on +2 exchanges +1/3 ", result.output, re.MULTILINE), result.output
    assert "[failure, high] " + LESSON in result.output
    data = json.loads(CliRunner().invoke(cli, ["eval", "lessons", "--days", "3", "--mode", "command", "--json"]).stdout)
    assert [(d["mode"], d["lessons_on"], d["mistakes"], d["other_lessons_tokens"]) for d in data] == [
        ("command", True, 1, 0),
        ("command", False, 3, 0),
    ]

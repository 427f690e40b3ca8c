"""Agents learn from the person: /feedback and corrections become lessons for the agent
that answered, sent to its calls only, within HUB_LESSONS_TOKENS; talk channels reach
their members as new lines in the awareness block; everything fails open and is erased.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from scopehub.agents import AgentRegistry, AgentSpec, Channel, ToolContext, team
from scopehub.hub import Deps, Hub, Inbound, Reply, load_settings
from scopehub.hub.cli import cli
from scopehub.hub.context.lessons import LESSONS_HEADER
from scopehub.hub.errors import ModelUnavailable
from scopehub.hub.lessons import LESSON_PROMPT, LessonKeeper
from scopehub.hub.models import ModelResponse, ToolCall
from scopehub.hub.models.testing import FunctionModel, ScriptedModel
from scopehub.memory import (
    Store,
    add_goal,
    add_lesson,
    add_plan,
    advance_channel_cursor,
    lessons_of,
    pending_feedback,
    pin_channel_message,
    post_to_channel,
    react_to_channel_message,
    read_channel,
    record_feedback,
    traits_of,
)
from tests.helpers import GENERAL, TASKS

SCOPE = "user:1"
LESSON = "The work list means the tasks tagged work, not the shopping list."


def _system(messages):
    """Every system message of a call: the stable part, then facts, lessons, awareness..."""
    return "\n\n".join(m["content"] for m in messages if m["role"] == "system")


def registry(*extra: AgentSpec) -> AgentRegistry:
    reg = AgentRegistry()
    for spec in (GENERAL.model_copy(update={"team_tool": True}), TASKS, *extra):
        reg.add(spec, "test")
    return reg


def is_lesson_call(messages: list[dict[str, Any]]) -> bool:
    return _system(messages) == LESSON_PROMPT


def lesson_json(lesson: str = LESSON, kind: str = "failure", importance: str = "high", topic: str = "task lists") -> str:
    return json.dumps({"lesson": lesson, "kind": kind, "importance": importance, "topic": topic})


def teaching_model(lesson: Any = lesson_json) -> FunctionModel:
    """Agents answer with the shopping list; the lesson model answers ``lesson()``."""

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if is_lesson_call(messages):
            return lesson() if callable(lesson) else lesson
        return "Shopping list: milk."

    return FunctionModel(answer)


def make_hub(db: Path | str = ":memory:", model: Any = None, *, specs: tuple[AgentSpec, ...] = (), **settings: Any) -> Hub:
    lessons = settings.pop("lessons", None)
    store = Store(db)
    return Hub(
        Deps(store=store, settings=load_settings(db=db, **settings), model=model or teaching_model(), lessons=lessons),
        registry(*specs),
    )


def say(hub: Hub, text: str, scope: str = SCOPE) -> Reply:
    """What the terminal chat does: answer, then learn (after_send) before the next line."""

    async def run() -> Reply:
        reply = await hub.handle(Inbound(scope=scope, text=text, chat="terminal", sender="local"))
        await hub.after_send(reply)
        return reply

    return asyncio.run(run())


def system_of(model: FunctionModel, agent: str) -> list[str]:
    """The system message of every call ``agent`` was sent, in order."""
    return [_system(c.messages) for c in model.calls if _system(c.messages).startswith(f"You are the {agent} agent.")]


# -- feedback becomes a lesson of the agent that answered ---------------------------------------------


def test_feedback_command_teaches_the_agent_that_answered_and_only_it_pays_for_it() -> None:
    model = teaching_model()
    hub = make_hub(model=model)
    assert say(hub, "what is on my todo list").agent == "tasks"
    ack = say(hub, "/feedback no, I meant the work list")
    assert ack.kind == "command" and "tasks agent will learn" in ack.text
    (lesson,) = lessons_of(hub.store, SCOPE, "tasks")
    assert (lesson.text, lesson.kind, lesson.importance, lesson.topic) == (LESSON, "failure", "high", "task list")
    prompt = next(c for c in model.calls if is_lesson_call(c.messages)).messages[1]["content"]
    assert "no, I meant the work list" in prompt and "what is on my todo list" in prompt

    tasks_reply = say(hub, "what is on my todo list")
    general_reply = say(hub, "/general hello")
    tasks_system, general_system = system_of(model, "tasks")[-1], system_of(model, "general")[-1]
    assert LESSON in tasks_system and LESSONS_HEADER in tasks_system
    assert LESSON not in general_system and LESSONS_HEADER not in general_system
    section = tasks_system[tasks_system.index(LESSONS_HEADER) :]
    # The section's own text, plus the separator that joins it to the facts' system message.
    assert 0 < hub.deps.tokenizer.count(section) <= tasks_reply.tokens["lessons"] <= hub.deps.tokenizer.count(section) + 3
    assert general_reply.tokens["lessons"] == 0
    assert tasks_reply.tokens["total"] == sum(v for k, v in tasks_reply.tokens.items() if k != "total")
    # Order for prompt caching: facts, then lessons, then awareness.
    assert tasks_system.index(LESSONS_HEADER) > tasks_system.index("Be brief; plain text.")


def test_a_correction_in_the_next_message_is_feedback_on_the_reply_before_it() -> None:
    model = teaching_model()
    hub = make_hub(model=model)
    say(hub, "what is on my todo list")
    reply = say(hub, "no, I meant the work list")
    assert reply.kind == "agent"  # the correction is answered like any message
    (lesson,) = lessons_of(hub.store, SCOPE, "tasks")
    assert lesson.text == LESSON
    prompt = next(c for c in model.calls if is_lesson_call(c.messages)).messages[1]["content"]
    assert "correcting the reply" in prompt and "Shopping list: milk." in prompt
    # Answers that only look like one ("no, thanks", a polite "no, it's enough"), or a
    # correction with no reply before it, teach nothing.
    hub2 = make_hub(model=teaching_model())
    say(hub2, "no, I meant the work list")
    say(hub2, "what is on my todo list")
    say(hub2, "no, thanks")
    say(hub2, "No, it's enough thanks")
    say(hub2, "no, it is fine")
    assert lessons_of(hub2.store, SCOPE, "tasks") == []


@pytest.mark.parametrize("correction", ["Nein, ich meinte die Arbeitsliste", "Нет, я имел в виду рабочий список"])
def test_a_correction_in_another_language_teaches_the_same_lesson(correction: str) -> None:
    model = teaching_model()
    hub = make_hub(model=model)
    say(hub, "what is on my todo list")
    say(hub, correction)
    (lesson,) = lessons_of(hub.store, SCOPE, "tasks")
    assert lesson.text == LESSON
    prompt = next(c for c in model.calls if is_lesson_call(c.messages)).messages[1]["content"]
    assert correction in prompt and "correcting the reply" in prompt


@pytest.mark.parametrize(
    "lesson_model",
    [
        pytest.param(ScriptedModel(default=ModelUnavailable("the lesson model is down")), id="model-error"),
        pytest.param(ScriptedModel(default="this is not JSON"), id="bad-json"),
        pytest.param(ScriptedModel(default=lesson_json(kind="mistake")), id="invalid-kind"),
        pytest.param(None, id="no-model"),
    ],
)
def test_the_feedback_is_kept_verbatim_as_an_observation_when_the_lesson_model_cannot(lesson_model, caplog) -> None:
    model = teaching_model()
    hub = make_hub(model=model, lessons=None)
    hub.deps.lessons = LessonKeeper(hub.store, lesson_model)
    say(hub, "what is on my todo list")
    with caplog.at_level(logging.WARNING):
        ack = say(hub, "/feedback wrong list, I wanted the work one")
    assert "will learn" in ack.text
    (lesson,) = lessons_of(hub.store, SCOPE, "tasks")
    assert lesson.kind == "observation" and lesson.source == "feedback"
    assert "wrong list, I wanted the work one" in lesson.text and "what is on my todo list" in lesson.text
    assert pending_feedback(hub.store, SCOPE) == []
    if lesson_model is not None:
        assert "lesson model" in caplog.text
    # The verbatim lesson reaches the agent's next call all the same.
    say(hub, "what is on my todo list")
    assert "wrong list, I wanted the work one" in system_of(model, "tasks")[-1]


def test_a_failing_memory_means_no_lessons_section_and_a_log_line_never_a_lost_reply(monkeypatch, caplog) -> None:
    hub = make_hub()
    add_lesson(hub.store, SCOPE, "tasks", LESSON, kind="failure", importance="high")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("lessons table unreadable")

    monkeypatch.setattr("scopehub.hub.orchestrator._sections.agent_memory", broken)
    with caplog.at_level(logging.ERROR):
        reply = say(hub, "what is on my todo list")
    assert reply.kind == "agent" and reply.text == "Shopping list: milk." and reply.tokens["lessons"] == 0
    assert "lessons unavailable" in caplog.text


def test_a_learning_that_crashes_leaves_the_feedback_pending_and_the_next_reply_learns_it() -> None:
    calls = {"n": 0}

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")  # not a model error: the keeper itself failed
        return lesson_json()

    class Crashing(LessonKeeper):
        async def learn(self, feedback):  # type: ignore[override]
            if calls["n"] == 0:
                calls["n"] += 1
                raise RuntimeError("crash while learning")
            return await super().learn(feedback)

    model = teaching_model(flaky)
    hub = make_hub(model=model)
    hub.deps.lessons = Crashing(hub.store, model)
    say(hub, "what is on my todo list")
    say(hub, "/feedback no, I meant the work list")
    assert lessons_of(hub.store, SCOPE, "tasks") == [] and len(pending_feedback(hub.store, SCOPE)) == 1
    say(hub, "/help")  # any next reply learns what is pending
    assert [lesson.text for lesson in lessons_of(hub.store, SCOPE, "tasks")] == [LESSON]


# -- the section: budget, order, traits -------------------------------------------------------------


def test_the_lessons_section_fits_its_budget_high_importance_first() -> None:
    model = teaching_model()
    hub = make_hub(model=model, lessons_tokens=60)
    add_lesson(hub.store, SCOPE, "tasks", "HIGH-OLD: always list work tasks first.", kind="failure", importance="high", now=1)
    for i in range(10):
        add_lesson(hub.store, SCOPE, "tasks", f"LOW-{i}: the person likes short answers.", kind="observation", importance="low", now=10 + i)
    reply = say(hub, "what is on my todo list")
    system = system_of(model, "tasks")[-1]
    assert 0 < reply.tokens["lessons"] <= 60
    assert "HIGH-OLD" in system and "LOW-9" in system and "LOW-0" not in system  # newest low ones fill what is left
    assert system.index("HIGH-OLD") < system.index("LOW-9")


def test_three_failures_of_one_kind_make_a_weakness_three_successes_a_strength() -> None:
    feedback = iter(
        [lesson_json(f"failure {i}", "failure", "medium", "Task lists") for i in range(3)]
        + [lesson_json(f"success {i}", "success", "low", "reminder times") for i in range(3)]
    )
    hub = make_hub(model=teaching_model(lambda: next(feedback)))
    for text in ("wrong", "not what I asked", "bad list", "great", "perfect", "thanks, exactly"):
        say(hub, "what is on my todo list")
        say(hub, f"/feedback {text}")
    traits = {(t.kind, t.topic, t.evidence) for t in traits_of(hub.store, SCOPE, "tasks")}
    assert traits == {("weakness", "task list", 3), ("strength", "reminder time", 3)}
    shown = say(hub, "/agents tasks").text
    assert "Weak at: task list (3 failures)" in shown and "Strong at: reminder time (3 successes)" in shown


# -- channels -------------------------------------------------------------------------------------


def team_call(action: str, **args: Any) -> ModelResponse:
    return ModelResponse(tool_calls=(ToolCall("t1", "team", json.dumps({"action": action, **args})),))


def test_a_post_to_the_team_channel_reaches_every_other_member_once() -> None:
    model = ScriptedModel(
        [team_call("post", text="The person prefers answers in French."), "Noted.", "Liste: lait.", "Liste: lait."]
    )
    hub = make_hub(model=model)
    say(hub, "/general please tell the team I prefer French")
    assert [m.text for m in read_channel(hub.store, SCOPE, "team")] == ["The person prefers answers in French."]
    say(hub, "what is on my todo list")
    say(hub, "what is on my todo list")
    first, second = (_system(c.messages) for c in model.calls[2:4])
    assert "From your channels:" in first and "[team] general" in first and "prefers answers in French" in first
    assert "prefers answers in French" not in second  # the channel cursor moved once the call was recorded
    assert "team" in [t["function"]["name"] for t in model.calls[0].tools]  # general has the tool
    # tasks (no channel of its own) is offered it while it has channel news to answer, then no more.
    assert "team" in [t["function"]["name"] for t in model.calls[2].tools]
    assert "team" not in [t["function"]["name"] for t in model.calls[3].tools]


RESEARCH = AgentSpec(
    name="research",
    description="research: look things up and share findings",
    instructions="Research things.",
    examples=("research the best laptop",),
    keywords=("research",),
    channels=(Channel(name="findings", purpose="What research found", members=("general",)),),
)


def test_a_plugin_agent_declares_its_own_channel_for_its_members_only() -> None:
    model = ScriptedModel(
        [
            team_call("post", channel="findings", text="Laptop X has the best battery."),
            "Posted.",
            "Hi!",  # general
            team_call("post", channel="findings", text="sneaking in"),  # tasks is no member
            "Could not.",
        ]
    )
    hub = make_hub(model=model, specs=(RESEARCH,))
    assert set(hub.channels) == {"team", "findings"} and hub.channels["findings"].members == ("general", "research")
    say(hub, "/research find the best laptop")
    say(hub, "/general hi")
    assert "Laptop X has the best battery" in _system(model.calls[2].messages)
    say(hub, "/tasks post it")
    assert "Laptop X" not in _system(model.calls[3].messages)
    assert "team" not in [t["function"]["name"] for t in model.calls[3].tools]  # no trigger: not offered
    # Called all the same, the tool runs and refuses: tasks is no member of findings.
    assert "not in a channel 'findings'; your channels: team" in model.calls[4].messages[-1]["content"]
    # And the tool itself refuses a channel its agent is no member of.
    ctx = ToolContext(store=hub.store, scope=SCOPE, agent="tasks", extra={"channels": hub.channels})
    with pytest.raises(ValueError, match="not in a channel 'findings'; your channels: team"):
        asyncio.run(team.run(ctx, {"action": "post", "channel": "findings", "text": "sneaking in"}))
    assert [m.agent for m in read_channel(hub.store, SCOPE, "findings")] == ["research"]
    listing = say(hub, "/channels").text
    assert "#findings - What research found (general, research; 1 messages, 0 pinned)" in listing
    assert "#team - Anything the whole team should know (all agents" in listing
    assert "research, " in say(hub, "/channels findings").text


def test_the_team_tool_records_lessons_goals_and_plans_of_its_own_agent() -> None:
    model = ScriptedModel(
        [
            team_call("lesson", text="Greet the person by name.", kind="improvement", importance="high"),
            team_call("goal", text="Learn the person's routines"),
            team_call("plan", text="Ask one question a day"),
            team_call("goal", id=1, kind="active", progress=40),
            "Done.",
        ],
        default="ok",
    )
    hub = make_hub(model=model)
    say(hub, "/general remember how to talk to me")
    shown = say(hub, "/agents general").text
    assert "[improvement, high] Greet the person by name. (its own" in shown
    assert "Goal #1 (active, 40%): Learn the person's routines" in shown and "Plan #1 (active): Ask one question a day" in shown
    say(hub, "/general hi")
    system = _system(model.calls[-1].messages)
    assert "Greet the person by name." in system and "goal #1 (40%)" in system and "plan #1" in system
    assert "learnt nothing" in say(hub, "/agents tasks").text


# -- isolation and erasure ------------------------------------------------------------------------


def test_lessons_and_channels_never_cross_scopes() -> None:
    model = teaching_model()
    hub = make_hub(model=model)
    say(hub, "what is on my todo list")
    say(hub, "/feedback no, I meant the work list")
    post_to_channel(hub.store, SCOPE, "team", "general", "SECRET-TEAM-NOTE")
    say(hub, "what is on my todo list", scope="user:2")
    other = system_of(model, "tasks")[-1]
    assert LESSON not in other and "SECRET-TEAM-NOTE" not in other
    assert lessons_of(hub.store, "user:2", "tasks") == [] and read_channel(hub.store, "user:2", "team") == []
    assert "learnt nothing" in say(hub, "/agents tasks", scope="user:2").text
    say(hub, "/feedback wrong", scope="user:2")  # feedback goes to that scope's own reply
    assert len(lessons_of(hub.store, SCOPE, "tasks")) == 1 and len(lessons_of(hub.store, "user:2", "tasks")) == 1


GONE, KEPT, KEEP = "user:7", "group:8", "KEPTSCOPE"
SECRETS = ("LESSONQUOKKA", "GOALWOMBAT", "PLANAXOLOTL", "CHANNELNARWHAL", "FEEDBACKOCELOT", "TOPICTAPIR")


def fill(store: Store) -> None:
    for scope, tag in ((GONE, ""), (KEPT, KEEP)):
        add_lesson(store, scope, "tasks", f"lesson {SECRETS[0]}{tag}", kind="failure", topic=f"{SECRETS[5]}{tag}")
        add_goal(store, scope, "tasks", f"goal {SECRETS[1]}{tag}")
        add_plan(store, scope, "tasks", f"plan {SECRETS[2]}{tag}")
        note = post_to_channel(store, scope, "team", "general", f"note {SECRETS[3]}{tag}")
        pin_channel_message(store, scope, note.id)
        react_to_channel_message(store, scope, note.id, "tasks", "agree")
        advance_channel_cursor(store, scope, "tasks", note.id)
        record_feedback(store, scope, "tasks", reply_id=None, source="command", signal="negative", text=f"fb {SECRETS[4]}{tag}")
        for _ in range(3):  # a weakness row too
            add_lesson(store, scope, "tasks", f"again {SECRETS[0]}{tag}", kind="failure", topic=f"{SECRETS[5]}{tag}")


TEAM_TABLES = ("channel_messages", "channel_reactions", "channel_cursors", "lessons", "agent_traits", "goals", "plans", "feedback")


def assert_erased(db: Path) -> None:
    from tests.hub.test_erasure import file_bytes

    with Store(db) as store:
        for table in TEAM_TABLES:
            assert store.query(f"SELECT count(*) FROM {table} WHERE scope = ?", (GONE,))[0][0] == 0, table
            assert store.query(f"SELECT count(*) FROM {table} WHERE scope = ?", (KEPT,))[0][0] > 0, table
        assert store.integrity_check() == "ok"
    raw = file_bytes(db)
    for secret in SECRETS:
        assert (secret + KEEP).lower().encode() in raw.lower(), secret  # the kept scope's copy is there ...
        for variant in (secret, secret.lower()):  # (topics are stored in lower case)
            at = raw.find(variant.encode())
            while at != -1:  # ... and only it
                assert raw[at : at + len(variant) + len(KEEP)].lower() == (secret + KEEP).lower().encode(), variant
                at = raw.find(variant.encode(), at + 1)


def test_forget_all_erases_channels_lessons_goals_and_plans_down_to_the_file(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    hub = make_hub(db)
    fill(hub.store)
    reply = say(hub, "/forget all", scope=GONE)
    assert "2 lessons, 1 channel message" in reply.text
    hub.store.close()
    assert_erased(db)


def test_agents_hub_forget_erases_them_too(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    with Store(db) as store:
        fill(store)
    result = CliRunner().invoke(cli, ["--db", str(db), "forget", "--scope", GONE, "--yes", "--json"])
    assert result.exit_code == 0, result.output
    removed = json.loads(result.stdout)["removed"]
    assert removed["lessons"] == 2 and removed["channel_messages"] == 1 and removed["goals"] == 1 and removed["plans"] == 1
    assert_erased(db)


def test_people_read_channels_and_an_agents_memory_from_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    with Store(db) as store:
        note = post_to_channel(store, SCOPE, "team", "general", "The person prefers French.")
        pin_channel_message(store, SCOPE, note.id)
        post_to_channel(store, SCOPE, "team", "tasks", "Noted.", reply_to=note.id)
        add_lesson(store, SCOPE, "tasks", LESSON, kind="failure", importance="high", topic="task lists", source="feedback")
        add_lesson(store, "user:2", "tasks", "OTHER-SCOPE lesson", kind="failure")

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, ["--db", str(db), *args])
        assert result.exit_code == 0, result.output
        return result.stdout

    assert "#team - Anything the whole team should know (all agents; 2 messages, 1 pinned)" in run("channels", "list", "--scope", SCOPE)
    read = run("channels", "read", "team", "--scope", SCOPE)
    assert "general" in read and "(pinned): The person prefers French." in read and "(re #1): Noted." in read
    listing = json.loads(run("channels", "list", "--scope", SCOPE, "--json"))
    assert listing[0]["name"] == "team" and listing[0]["messages"] == 2 and "tasks" in listing[0]["members"]
    shown = run("memory", "show", "--scope", SCOPE, "--agent", "tasks")
    assert f"[failure, high, task list] {LESSON} (from your feedback" in shown and "OTHER-SCOPE" not in shown
    data = json.loads(run("memory", "show", "--scope", SCOPE, "--agent", "tasks", "--json"))
    assert [x["text"] for x in data["lessons"]] == [LESSON]
    assert data["section"].startswith(LESSONS_HEADER) and 0 < data["section_tokens"] <= data["budget"] == 120
    assert json.loads(run("memory", "show", "--scope", SCOPE, "--agent", "notes", "--json"))["section_tokens"] == 0


def test_the_lessons_section_is_read_in_one_batch_and_says_what_the_three_reads_say(tmp_path, monkeypatch) -> None:
    """An agent's memory, its record and its research for every call: one round trip on
    PostgreSQL (they were three), the same section as each read on its own gives."""
    from scopehub.hub.context.awareness import relative_time
    from scopehub.hub.context.lessons import render_lessons
    from scopehub.hub.context.tokens import get_tokenizer
    from scopehub.hub.orchestrator._sections import RECORD_DAYS, RESEARCH_SHOWN, lessons_section
    from scopehub.memory import (
        NewMessage,
        add_knowledge,
        agent_memory,
        emit_event,
        performance_of,
        research_of,
    )

    now = 2_000_000.0
    with Store(tmp_path / "hub.db") as store:
        asked = store.append(NewMessage(scope=SCOPE, role="user", text="what is on my list?", ts=now - 60)).id
        add_lesson(store, SCOPE, "tasks", "List work tasks first.", kind="failure", importance="high", now=now - 50)
        add_goal(store, SCOPE, "tasks", "Keep the list short", now=now - 40)
        record_feedback(store, SCOPE, "tasks", reply_id=None, source="reaction", signal="positive", text="👍", now=now - 30)
        emit_event(store, SCOPE, "tasks", "task.created", {"task_id": 1, "title": "milk"}, now=now - 20)
        add_knowledge(store, SCOPE, "Milk was on the list last week.", importance=0.5, messages=[asked], ts=now - 10, agent="tasks")
        tokenizer = get_tokenizer()
        since = now - RECORD_DAYS * 86400
        alone = render_lessons(
            agent_memory(store, SCOPE, "tasks"), tokenizer=tokenizer, budget=400, performance=performance_of(store, SCOPE, "tasks", since=since),
            record_days=RECORD_DAYS, research=[(k, relative_time(k.ts, now)) for k in research_of(store, SCOPE, "tasks", limit=RESEARCH_SHOWN)],
        )  # fmt: skip
        reads: list[str] = []
        for name in ("query", "query_batch"):
            method = getattr(store, name)
            monkeypatch.setattr(store, name, lambda *args, _m=method, _n=name, **kw: reads.append(_n) or _m(*args, **kw))
        section = lessons_section(store, SCOPE, "tasks", tokenizer=tokenizer, budget=400, now=now)
        assert section == alone and "List work tasks first." in section and "Milk was on the list" in section
        assert reads == ["query_batch"]

"""Faults and hostile input (issue 9): the small versions of ``agents-hub eval faults``.

Nothing lost, nothing duplicated, nothing leaked, nothing crashes: under SIGKILL, many
chats at once beside a second writer, model faults through the real litellm client,
hypothesis-generated text, 100 look-alike scopes, and memory that fails.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from scopehub.eval import faults
from scopehub.hub.cli import cli
from scopehub.hub.facts import BLOCK_HEADER, FactKeeper, forget
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.orchestrator import Hub, Inbound, Reply
from scopehub.hub.runtime import STEP_LIMIT_REPLY
from scopehub.memory import NewMessage, Store


def assert_clean(outcome: faults.Outcome) -> None:
    assert outcome.ok, "\n".join(outcome.notes)


def ask(hub: Hub, text: str, scope: str = "user:1", **kw) -> Reply | None:
    return asyncio.run(hub.handle(Inbound(scope=scope, text=text, **kw)))


# -- crash safety ---------------------------------------------------------------------------------


def test_import_killed_at_random_points_keeps_every_committed_message_once(tmp_path):
    out = faults.crash_import(tmp_path, messages=2000, kills=3, batch=50, seed=1)
    assert_clean(out)
    assert out.details["kills"] == 3 and out.details["complete"]


def test_handling_killed_at_random_points_stores_and_answers_nothing_twice(tmp_path):
    out = faults.crash_handle(tmp_path, messages=300, chats=5, kills=3, seed=1)
    assert_clean(out)
    assert out.details["kills"] >= 2 and out.details["stored"] == 300


def test_a_redelivered_message_is_neither_stored_nor_answered_twice(tmp_path):
    model = faults.echo_model()
    hub = faults.make_hub(Store(tmp_path / "hub.db"), model)
    first = ask(hub, "add buy milk to my tasks", ext_id="42")
    again = ask(hub, "add buy milk to my tasks", ext_id="42")
    assert first is not None and first.text == "re: add buy milk to my tasks"
    assert again is None  # recognised: nothing stored, nothing sent
    assert [(m.role, m.ext_id) for m in hub.store.messages("user:1")] == [("user", "42"), ("agent", None)]
    assert len(model.calls) == 1


# -- concurrency ----------------------------------------------------------------------------------


def test_chats_at_once_keep_their_order_while_another_process_writes(tmp_path):
    out = faults.concurrency(tmp_path, chats=10, per_chat=10, writer_messages=500, seed=1)
    assert_clean(out)
    assert out.details["written_during"] > 0  # the other process really wrote meanwhile


def test_chats_at_once_through_litellm_and_the_fake_server(tmp_path):
    out = faults.concurrency(tmp_path, chats=5, per_chat=5, writer_messages=200, seed=2, use_litellm=True)
    assert_clean(out)


def test_processes_opening_a_new_file_at_once_all_succeed(tmp_path):
    assert_clean(faults.first_open(tmp_path, rounds=3, processes=3))


# -- model faults ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fault_results(tmp_path_factory):
    return faults.model_faults(tmp_path_factory.mktemp("model_faults"))


@pytest.mark.parametrize(
    "name",
    [
        case.name
        for case in faults.fault_cases()
    ],
)
def test_a_model_fault_gives_a_clear_reply_in_bounded_time_and_keeps_the_message(fault_results, name):
    result = fault_results.details[name]
    problems = [note for note in fault_results.notes if note.split(": ", 2)[1:2] == [name]]
    assert result["ok"], problems
    assert result["stored"] and result["seconds"] <= result["bound"]


def test_the_endless_tool_loop_stops_at_the_step_limit(fault_results):
    result = fault_results.details["tool_loop"]
    assert result["agent_requests"] == faults.MAX_STEPS + 1
    assert result["reply"].text == STEP_LIMIT_REPLY


# -- hostile input --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    probe = faults.HostileProbe(tmp_path_factory.mktemp("hostile"), hub_every=4)
    yield probe
    probe.close()


@settings(max_examples=250, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(text=faults.hostile_text(max_huge=20_000))
def test_hostile_text_never_escapes_any_target(probe, text):
    seen = len(probe.events)
    probe.probe(text)
    new = probe.events[seen:]
    assert not new, new[:3]


def test_a_long_unspaced_cjk_message_does_not_break_search_for_other_scopes(tmp_path):
    store = Store(tmp_path / "hub.db")
    store.append(NewMessage(scope="user:1", role="user", text="日本語のテキスト" * 1500))  # one 36 KB token
    store.append(NewMessage(scope="user:2", role="user", text="buy milk"))
    for method in ("fuzzy", "hybrid"):
        assert [hit.text for hit in store.search("user:2", "milk", k=3, method=method)] == ["buy milk"]


def test_forget_with_a_huge_fact_id_finds_nothing(tmp_path):
    assert forget(Store(tmp_path / "hub.db"), "user:1", "#" + "9" * 25) == []


def test_remember_with_only_control_characters_gets_the_usage_text(tmp_path):
    hub = faults.make_hub(Store(tmp_path / "hub.db"), faults.echo_model())
    reply = ask(hub, "/remember \x00\x01")
    assert reply.text.startswith("Usage: /remember")


def test_a_100k_character_message_is_stored_whole_and_trimmed_for_the_model(tmp_path):
    model = faults.echo_model()
    hub = faults.make_hub(Store(tmp_path / "hub.db"), model, message_tokens=500)
    text = "Here is a long paste: " + " ".join(f"word{i} 🙂 שלום \u200b NEAR(a b)" for i in range(5000))
    text = text[:99_991] + " tailmark"
    assert len(text) == 100_000
    reply = ask(hub, text)
    assert hub.store.get(reply.scope, reply.message_id).text == text  # stored whole
    sent = model.calls[0].messages[-1]["content"]
    tokenizer = hub.deps.tokenizer
    assert sent == tokenizer.truncate(text, 500) and tokenizer.count(sent) <= 500 < tokenizer.count(text)
    assert reply.text == "re: " + sent[:200]
    assert any(hit.id == reply.message_id for hit in hub.store.search("user:1", "tailmark", k=3))


def test_the_huge_message_scenario(tmp_path):
    assert_clean(faults.huge_message(tmp_path))


# -- isolation ------------------------------------------------------------------------------------


def test_look_alike_scopes_never_see_or_change_each_others_data(tmp_path):
    out = faults.isolation(tmp_path, scopes=12, seed=3)
    assert_clean(out)
    assert out.tried > 500


def test_a_group_never_sees_a_members_private_facts(tmp_path):
    calls: list[str] = []

    def answer(messages, tools):
        calls.append(json.dumps(messages))
        return "noted"

    hub = faults.make_hub(Store(tmp_path / "hub.db"), FunctionModel(answer), facts=True)
    ask(hub, "/remember my pin is zq8812", scope="user:1")
    ask(hub, "my passport number is zqx77", scope="user:1")
    private_calls = len(calls)
    for text in ("what is my pin?", "/facts", "/search pin passport"):
        reply = ask(hub, text, scope="group:-5", sender="Ann", chat="-5")
        assert "zq" not in reply.text
    assert len(calls) > private_calls and not any("zq" in call for call in calls[private_calls:])
    assert "zq" not in hub.facts_block("group:-5")
    hits = hub.store.search("group:-5", "pin passport zq8812 zqx77", k=10)
    assert not any("zq" in hit.text for hit in hits)


# -- fail-open memory -----------------------------------------------------------------------------


def _search_hub(tmp_path):
    model = faults._search_then_answer()
    return faults.make_hub(Store(tmp_path / "hub.db"), model), model


def test_search_failing_still_answers_and_is_logged(tmp_path, monkeypatch, caplog):
    hub, model = _search_hub(tmp_path)

    def broken(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(hub.store, "search", broken)
    caplog.set_level(logging.INFO, logger="hub")
    reply = ask(hub, "what did I say about milk?")
    assert reply.kind == "agent" and reply.text.startswith("answered")
    tool_results = [m["content"] for m in model.calls[1].messages if m["role"] == "tool"]
    assert tool_results == ["error: search_memory failed: disk I/O error"]  # the agent knows, the person is answered
    assert "tool search_memory failed" in caplog.text
    assert hub.store.get(reply.scope, reply.message_id).text == "what did I say about milk?"


def test_facts_block_failing_answers_without_facts_and_is_logged(tmp_path, caplog):
    model = faults.echo_model()
    hub = faults.make_hub(Store(tmp_path / "hub.db"), model, facts=faults._BrokenFacts())
    reply = ask(hub, "add buy milk to my tasks")
    assert reply.kind == "agent" and reply.text == "re: add buy milk to my tasks"
    assert BLOCK_HEADER not in model.calls[0].messages[0]["content"]
    assert "facts unavailable for user:1" in caplog.text


def test_fact_extraction_failing_never_reaches_the_person_and_is_logged(tmp_path, caplog):
    async def exploding(messages, tools):
        if faults.is_extraction(messages):
            raise RuntimeError("extraction model down")
        return "re: " + faults.last_user_text(messages)

    store = Store(tmp_path / "hub.db")
    hub = faults.make_hub(store, FunctionModel(exploding), facts=FactKeeper(store, model=FunctionModel(exploding)))

    async def talk():
        reply = await hub.handle(Inbound(scope="user:1", text="my email is ann@example.com"))
        await hub.after_send(reply)
        return reply

    reply = asyncio.run(talk())
    assert reply.text == "re: my email is ann@example.com"
    assert "fact extraction failed for user:1" in caplog.text
    broken = faults.make_hub(store, faults.echo_model(), facts=faults._BrokenFacts())
    asyncio.run(broken.after_send(reply))  # a facts service that raises: swallowed
    assert "extractor exploded" in caplog.text


def test_the_fail_open_scenario(tmp_path):
    out = faults.fail_open(tmp_path)
    assert_clean(out)
    assert out.tried == 5


# -- the command ----------------------------------------------------------------------------------


def test_the_faults_command_prints_and_writes_the_report(tmp_path):
    out = tmp_path / "faults.json"
    result = CliRunner().invoke(cli, ["eval", "faults", "--quick", "-k", "fail_open", "--json", str(out), "--workdir", str(tmp_path / "w")])
    assert result.exit_code == 0, result.output
    assert "fail_open" in result.output and "every count but tried is 0" in result.output
    report = json.loads(out.read_text())
    assert set(report) >= {"tried", "lost", "duplicated", "leaked", "crashed", "scenarios"}
    scenario = report["scenarios"]["fail_open"]
    assert set(scenario) == {"tried", "lost", "duplicated", "leaked", "crashed", "seconds", "notes"}
    assert report["tried"] == scenario["tried"] == 5 and report["crashed"] == 0


def test_the_faults_command_exits_1_when_anything_is_lost(tmp_path, monkeypatch):
    def losing(workdir, **kwargs):
        outcome = faults.Outcome("fail_open", tried=1)
        outcome.fail("lost", "a message vanished")
        return outcome

    monkeypatch.setitem(faults._FUNCTIONS, "fail_open", losing)
    result = CliRunner().invoke(cli, ["eval", "faults", "-k", "fail_open", "--workdir", str(tmp_path)])
    assert result.exit_code == 1
    assert "lost: a message vanished" in result.output


def test_events_survive_kills_and_are_never_shown_again_after_commit(tmp_path):
    out = faults.event_cursors(tmp_path, emitters=2, per_emitter=60, consumers=2, kills=3, seed=1)
    assert_clean(out)
    assert out.details["events_committed"] == 120 and out.details["events_lost"] == 0
    assert out.details["emitters_killed"] + out.details["consumers_killed"] == 3


def test_two_hub_processes_never_answer_or_fire_twice(tmp_path):
    out = faults.two_processes(tmp_path, chats=2, per_chat=4, reminders=5)
    assert_clean(out)
    assert (out.details["messages_answered"], out.details["reminders_fired"]) == (8, 5)

"""Faults and hostile input (issue 9): the small versions of ``agents-hub eval faults``.

Nothing lost, nothing duplicated, nothing leaked, nothing crashes: under SIGKILL, many
chats at once beside a second writer, model faults through the real litellm client,
hypothesis-generated text, look-alike scopes, and memory that fails. Each scenario must
also report what it verified, in its own units. The hub's own behaviour is tested once:
redelivery, the step limit and facts across scopes in tests/hub; fail-open memory here,
through the fail_open scenario.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from scopehub.eval import faults
from scopehub.eval.faults.model import behaviour_problems
from scopehub.hub.cli import cli
from scopehub.hub.facts import forget
from scopehub.hub.orchestrator import Hub, Inbound, Reply
from scopehub.hub.orchestrator._sections import Sections
from scopehub.memory import NewMessage, Store

# Child processes, SIGKILLs and a model-fault run of a minute or more on a busy machine.
pytestmark = pytest.mark.timeout(900)


def assert_clean(outcome: faults.Outcome) -> None:
    assert outcome.ok, "\n".join(outcome.notes)


def ask(hub: Hub, text: str, scope: str = "user:1", **kw) -> Reply | None:
    return asyncio.run(hub.handle(Inbound(scope=scope, text=text, **kw)))


# -- crash safety ---------------------------------------------------------------------------------


def test_import_killed_at_random_points_keeps_every_committed_message_once(tmp_path):
    out = faults.crash_import(tmp_path, messages=2000, kills=3, batch=50, seed=1)
    assert_clean(out)
    assert out.details["kills"] == 3 and out.details["complete"]
    assert out.verified == {faults.KILLS_SURVIVED: 3, faults.PRESENT_ONCE: 2000 * out.details["rounds"]}


def test_handling_killed_at_random_points_stores_and_answers_nothing_twice(tmp_path):
    out = faults.crash_handle(tmp_path, messages=300, chats=5, kills=3, seed=1)
    assert_clean(out)
    assert out.details["kills"] >= 2 and out.details["stored"] == 300
    assert out.verified == {faults.KILLS_SURVIVED: out.details["kills"], faults.ANSWERED_ONCE: 300}


# -- concurrency ----------------------------------------------------------------------------------


def assert_writer_rows(db, n: int) -> None:
    """The second process's messages m0..m(n-1) are in the file, each once (read here, not by the scenario)."""
    with Store(db) as store:
        rows = store.query("SELECT ext_id FROM messages WHERE scope = 'user:777777'")
    assert sorted(ext_id for (ext_id,) in rows) == sorted(f"m{i}" for i in range(n))


def test_chats_at_once_keep_their_order_while_another_process_writes(tmp_path):
    out = faults.concurrency(tmp_path, chats=10, per_chat=10, writer_messages=500, seed=1)
    assert_clean(out)
    assert out.details["written_during"] > 0  # the other process really wrote meanwhile
    assert out.verified == {faults.IN_ORDER: 100, faults.WRITER_PRESENT: 500}
    assert_writer_rows(tmp_path / "concurrency.db", 500)


def test_chats_at_once_through_litellm_and_the_fake_server(tmp_path):
    out = faults.concurrency(tmp_path, chats=5, per_chat=5, writer_messages=200, seed=2, use_litellm=True)
    assert_clean(out)
    assert out.verified == {faults.IN_ORDER: 25, faults.WRITER_PRESENT: 200}
    assert_writer_rows(tmp_path / "concurrency_litellm.db", 200)


def test_processes_opening_a_new_file_at_once_all_succeed(tmp_path):
    out = faults.first_open(tmp_path, rounds=3, processes=3)
    assert_clean(out)
    assert out.verified == {faults.FIRST_OPENS: 9}


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
def test_a_model_fault_gives_a_clear_reply_and_keeps_the_message(fault_results, name):
    # What the person got and what was stored; how long it took is the command's figure
    # (``eval faults`` reports each case against its bound), never a test's assertion.
    result = fault_results.details[name]
    assert behaviour_problems(result) == []
    assert result["stored"] and result["reply_stored"]


def test_every_model_fault_is_tried_and_reported_in_its_unit(fault_results):
    assert len(fault_results.details) == len(faults.fault_cases())
    behaved = sum(1 for result in fault_results.details.values() if not behaviour_problems(result) and result["stored"])
    assert behaved == len(faults.fault_cases())
    # Counted as answered only when within its bound too (the scenario's own figure).
    assert set(fault_results.verified) <= {faults.FAULTS_ANSWERED}


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


def test_the_hostile_input_scenario_counts_the_texts_it_tried(tmp_path):
    out = faults.hostile_input(tmp_path, examples=12, hub_every=4)
    assert_clean(out)
    assert out.verified == {faults.HOSTILE_TRIED: 12, faults.HUGE_KEPT: 1}


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


def test_the_huge_message_scenario(tmp_path):
    out = faults.huge_message(tmp_path)
    assert_clean(out)
    assert out.verified == {faults.HUGE_KEPT: 1}


# -- isolation ------------------------------------------------------------------------------------


def test_look_alike_scopes_never_see_or_change_each_others_data(tmp_path):
    out = faults.isolation(tmp_path, scopes=12, seed=3)
    assert_clean(out)
    # every scope against the 11 others; 3 victims a scope, each with a task, a reminder, a note
    assert out.verified == {faults.SCOPE_PAIRS: 12 * 11, faults.ITEMS_UNCHANGED: 12 * 3 * 3}


# -- fail-open memory -----------------------------------------------------------------------------


def test_the_fail_open_scenario(tmp_path):
    # search, /search, the facts block, after_reply and the extraction model failing
    out = faults.fail_open(tmp_path)
    assert_clean(out)
    assert out.verified == {faults.FAILURES_ANSWERED: 5}


def test_a_failure_that_is_swallowed_silently_is_not_counted_as_verified(tmp_path, monkeypatch):
    monkeypatch.setattr(Sections, "facts_block", lambda self, scope: "")  # no facts, and no log of why
    out = faults.fail_open(tmp_path)
    assert out.crashed == 1 and "facts block raising: the failure was not logged" in out.notes[0]
    assert out.verified == {faults.FAILURES_ANSWERED: 4}


# -- the command ----------------------------------------------------------------------------------


def test_the_faults_command_prints_and_writes_the_report(tmp_path):
    out = tmp_path / "faults.json"
    result = CliRunner().invoke(cli, ["eval", "faults", "--quick", "-k", "fail_open", "--json", str(out), "--workdir", str(tmp_path / "w")])
    assert result.exit_code == 0, result.output
    assert "5 failures answered and logged" in result.output
    assert "nothing lost, duplicated, leaked or crashed in 1 scenario(s)" in result.output
    report = json.loads(out.read_text())
    assert set(report) == {"ok", "failed", "seconds", "scenarios"}  # no total across units
    assert (report["ok"], report["failed"]) == (True, [])
    scenario = report["scenarios"]["fail_open"]
    assert set(scenario) == {"verified", "lost", "duplicated", "leaked", "crashed", "seconds", "notes"}
    assert scenario["verified"] == {faults.FAILURES_ANSWERED: 5}
    assert [scenario[count] for count in faults.COUNTS] == [0, 0, 0, 0]


def test_the_faults_command_exits_1_when_anything_is_lost(tmp_path, monkeypatch):
    def losing(workdir, **kwargs):
        outcome = faults.Outcome("fail_open", verified={faults.FAILURES_ANSWERED: 4})
        outcome.fail("lost", "a message vanished")
        return outcome

    monkeypatch.setitem(faults.REGISTRY, "fail_open", faults.Scenario(losing))
    result = CliRunner().invoke(cli, ["eval", "faults", "-k", "fail_open", "--workdir", str(tmp_path)])
    assert result.exit_code == 1
    assert "lost: a message vanished" in result.output and "FAILED: fail_open" in result.output


def test_events_survive_kills_and_are_never_shown_again_after_commit(tmp_path):
    out = faults.event_cursors(tmp_path, emitters=2, per_emitter=60, consumers=2, kills=3, seed=1)
    assert_clean(out)
    assert out.details["events_committed"] == 120 and out.details["events_lost"] == 0
    assert out.details["emitters_killed"] + out.details["consumers_killed"] == 3


def test_two_hub_processes_never_answer_or_fire_twice(tmp_path):
    out = faults.two_processes(tmp_path, chats=2, per_chat=4, reminders=5)
    assert_clean(out)
    assert (out.details["messages_answered"], out.details["reminders_fired"]) == (8, 5)


# -- the coordination layer under contention, faults and a busy scope (issue 28) -----------------
# Each runs on SQLite and on PostgreSQL (the session's embedded server, else SQLite only).


def backends_run(outcome: faults.Outcome) -> set[str]:
    found = {unit.rsplit("(", 1)[1].rstrip(")") for unit in outcome.verified}
    assert found == {"sqlite", "postgresql"}, outcome.notes
    return found


@pytest.fixture
def both_backends(postgres_server, monkeypatch):
    """The scenarios' PostgreSQL databases on the session's server (skips, saying why, without one)."""
    from scopehub.eval.faults import _backends

    monkeypatch.setenv(_backends.POSTGRES_URL_ENV, postgres_server.url)
    monkeypatch.setattr(_backends, "_server", None)
    monkeypatch.setattr(_backends, "_why_not", None)


def test_every_memory_table_failing_in_turn_still_answers_once_and_logs_it(tmp_path, both_backends):
    out = faults.memory_tables(tmp_path, tables=("claims", "events", "cursors", "digests", "lessons"))
    assert_clean(out)
    for backend in backends_run(out):
        assert out.verified[f"messages answered with a memory table failing ({backend})"] == 5
        assert out.verified[f"messages answered once the table is back ({backend})"] == 5
        assert out.verified[f"commands on a failing table without a traceback ({backend})"] == 5 * 6


def test_a_failed_compaction_and_broken_digest_rows_never_leave_the_agents_without_it(tmp_path, both_backends):
    out = faults.digest_rows(tmp_path)
    assert_clean(out)
    for backend in backends_run(out):
        assert out.verified[f"broken digest rows never sent, read by every command, rebuilt ({backend})"] == len(faults.tables.BROKEN_ROWS)


def test_reflection_outlasting_its_ttl_with_three_workers_keeps_each_episode_once(tmp_path, both_backends):
    out = faults.reflection_ttl(tmp_path, scopes=1, episodes=6, ttl=0.3, delay=0.1)
    assert_clean(out)
    for backend in backends_run(out):
        assert out.verified[f"episodes reflected exactly once by three workers ({backend})"] == 6


def test_a_busy_scope_leads_with_the_claim_and_the_newest_item_and_keeps_the_pin(tmp_path, both_backends):
    out = faults.busy_scope(tmp_path, backlog=150, rounds=3, burst=12)
    assert_clean(out)
    for backend in backends_run(out):
        assert out.verified[f"calls led by the live claim and the newest email, with the pin ({backend})"] == 3
        # Every email the cursor passed was listed or counted: the backlog and each burst.
        assert out.verified[f"emails listed or counted exactly once as the cursor passed them ({backend})"] == 150 + 3 * 12

"""The Maildir fault scenarios at small sizes: the real intake in a hub process, its counts asserted."""

from __future__ import annotations

import pytest

from scopehub.eval import faults
from scopehub.eval.faults.maildir import (
    SCENARIOS as MAILDIR_SCENARIOS,
)
from scopehub.eval.faults.maildir import (
    maildir_cross_scope,
    maildir_half_written,
    maildir_hostile,
    maildir_kill,
    maildir_two_intakes,
    maildir_writers,
)

# A hub child process ingesting hundreds of files, killed and restarted: minutes on a busy machine.
pytestmark = pytest.mark.timeout(900)


def test_the_maildir_scenarios_are_registered_with_both_sizes() -> None:
    assert set(MAILDIR_SCENARIOS) <= set(faults.SCENARIOS)
    assert faults.REGISTRY["maildir_kill"].heavy == {"files": 2000, "kills": 20, "scopes": 20}  # the sizes
    assert faults.REGISTRY["maildir_writers"].heavy["writers"] == 5
    assert all(faults.REGISTRY[name].quick for name in MAILDIR_SCENARIOS)


def test_hub_killed_while_ingesting_answers_every_file_exactly_once(tmp_path) -> None:
    # A claim TTL longer than a restart: a kill mid-answer leaves the claim held after it.
    out = maildir_kill(tmp_path, files=60, kills=3, scopes=4, claim_ttl=8.0)

    counts, answered = out.details, out.details["answered"]
    assert (out.lost, out.duplicated, out.crashed) == (0, 0, 0), out.notes
    assert counts["kills"] == 3 and counts["hub_starts"] == 4
    # the kills really hit the window between the commit and the move to cur/
    assert counts["kills_with_a_file_committed_not_moved"] >= 1, out.notes
    assert (answered.answered_0, answered.answered_twice, answered.outbox_0, answered.outbox_twice) == (0, 0, 0, 0)
    assert answered.right == 60 and counts["left_in_new"] == 0 and counts["dlq"] == 0
    assert out.verified["files answered exactly once (database and outbox)"] == 60


def test_five_concurrent_writer_processes_lose_and_duplicate_nothing(tmp_path) -> None:
    out = maildir_writers(tmp_path, writers=5, per_writer=6, cli_every=6)

    counts = out.details
    assert out.ok, out.notes
    assert counts["writer_failures"] == 0 and counts["acked"] == 30
    assert counts["via_cli"] == 5  # through `agents-hub dispatch send`
    assert counts["names_distinct"] == 30  # same origin and subjects, yet no file overwrote another
    assert (counts["acked_not_stored"], counts["stored_twice"], counts["broken"]) == (0, 0, 0)
    assert counts["answered"].right == 30


def test_a_reader_never_sees_a_half_written_file_and_a_crashed_writers_tmp_file_stays(tmp_path) -> None:
    out = maildir_half_written(tmp_path, writers=2, per_writer=5, chunks=8, size=64_000, crashers=1)

    counts = out.details
    assert out.ok, out.notes
    assert counts["partial_reads"] == 0 and counts["tmp_ingested"] == 0
    assert counts["killed_mid_write"] == 1 and counts["stale_tmp_left"] == 1  # left in tmp/, never read
    assert counts["answered"].right == counts["acked"] >= 10


def test_hostile_files_go_to_dlq_or_are_refused_and_nothing_is_lost(tmp_path) -> None:
    out = maildir_hostile(tmp_path, rounds=1)

    counts = out.details
    assert out.ok, out.notes
    assert counts["cases"] >= 40 and counts["by_expect"]["dlq"] >= 30 and counts["by_expect"]["refused"] == 2
    assert (counts["lost"], counts["wrong_outcome"], counts["dlq_without_reason"]) == (0, 0, 0)
    assert counts["outside_read_or_changed"] == 0
    assert counts["alive_to_the_end"] and counts["hub_died"] == 0 and counts["failed_passes"] == 0
    assert counts["answered"].right == counts["good"] == 3


def test_a_file_for_another_scope_never_reaches_this_one(tmp_path) -> None:
    out = maildir_cross_scope(tmp_path, scopes=9, per_scope=3)

    counts = out.details
    assert out.ok, out.notes
    assert counts["leaked"] == 0 and not any(counts["leaks"].values())
    assert counts["lying_front_matter"] == 9 and counts["alias_in_dlq"] == 1
    assert counts["answered"].right == counts["files"] == 27
    assert counts["prompts_checked"] >= 27


def test_two_intakes_on_one_maildir_take_each_file_once_and_leave_no_false_dlq_entry(tmp_path, postgres_server, monkeypatch):
    from scopehub.eval.faults import _backends

    monkeypatch.setenv(_backends.POSTGRES_URL_ENV, postgres_server.url)  # the session's server
    monkeypatch.setattr(_backends, "_server", None)
    out = maildir_two_intakes(tmp_path, files=8, during=8)
    assert out.ok, "\n".join(out.notes)
    assert {unit: n for unit, n in out.verified.items()} == {
        "files taken by one of two intakes, answered once (sqlite)": 16,
        "files taken by one of two intakes, answered once (postgresql)": 16,
    }

"""A stored digest row is checked when read and rebuilt when broken, on every backend.

A corrupt or wrong-shaped row (not JSON, a number where lines belong, a line without its
sources or its time) is never sent to an agent ("1 January 1970: - 5"), never crashes a
command, and the next compaction rebuilds it from the messages, with no SQL by hand.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from scopehub.hub import Deps, Hub, Inbound, load_settings
from scopehub.hub.cli import cli
from scopehub.hub.digest import DIGEST_HEADER, DigestKeeper
from scopehub.hub.models.testing import ScriptedModel
from scopehub.memory import digest_usage, get_digest
from tests.helpers import registry_of
from tests.hub.test_digest import DAY, HISTORY, SCOPE, START, fill
from tests.memory.backends import BACKENDS

BROKEN = {
    "not json": ("lines", "{not json"),
    "a number for a line": ("lines", "[5]"),
    "an object for the lines": ("lines", '{"a": 1}'),
    "a line without its time": ("lines", json.dumps([{"text": "Ram booked the flight.", "sources": [1]}])),
    "a line dated 1970": ("lines", json.dumps([{"text": "5", "sources": [1], "ts": 0}])),
    "a line without its sources": ("lines", json.dumps([{"text": "Ram booked the flight.", "sources": [], "ts": START}])),
    "a number for a line's text": ("lines", json.dumps([{"text": 5, "sources": [1], "ts": START}])),
    # No date can be written for it: `digest show` crashed formatting it (OverflowError).
    "a line dated past the year 9999": ("lines", json.dumps([{"text": "Ram booked the flight.", "sources": [1], "ts": 1e300}])),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request, tmp_path):
    """(store, its --db value) on each backend."""
    store = BACKENDS[request.param](request, tmp_path)
    db = str(tmp_path / "conformance.db") if request.param == "sqlite" else request.getfixturevalue("postgres_store_url")
    yield store, db
    store.close()


def make_hub(store, db, agent, *, every: int = 2) -> Hub:
    config = load_settings(db=db, window=4, tail=2, digest_every=every, digest_tokens=200)
    keeper = DigestKeeper(store, config, mode="extractive", clock=lambda: START + 30 * DAY)
    return Hub(Deps(store=store, settings=config, model=agent, digest=keeper), registry_of())


def break_row(store, column: str, value: str) -> None:
    with store.transaction() as conn:
        conn.execute(f"UPDATE digests SET {column} = ? WHERE scope = ?", (value, SCOPE))


def system_of(model: ScriptedModel) -> str:
    return "\n\n".join(m["content"] for m in model.calls[-1].messages if m["role"] == "system")


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_row_is_never_sent_and_the_next_compaction_rebuilds_it(backend, case):
    store, db = backend
    agent = ScriptedModel(default="ok")
    # Compacted every 20 messages: two more would not make it due; being broken does.
    hub = make_hub(store, db, agent, every=20)
    fill(store)
    assert asyncio.run(hub.deps.digest.compact(SCOPE, "test", force=True)).outcome == "compacted"
    made = get_digest(store, SCOPE)
    column, value = BROKEN[case]
    break_row(store, column, value)

    broken = get_digest(store, SCOPE)  # read, checked, never raised
    assert broken.broken and broken.version == made.version and not broken.exists
    assert digest_usage(store, SCOPE)["broken"] == broken.broken

    async def talk() -> None:
        reply = await hub.handle(Inbound(scope=SCOPE, text="where do we fly?", sender="Ram"))
        assert reply.kind == "agent" and reply.text == "ok"
        assert DIGEST_HEADER not in system_of(agent) and "1970" not in system_of(agent)
        await hub.after_send(reply)  # due at once: rebuilt from the messages
        reply = await hub.handle(Inbound(scope=SCOPE, text="and the budget?", sender="Ram"))
        assert reply.kind == "agent"

    asyncio.run(talk())
    rebuilt = get_digest(store, SCOPE)
    assert not rebuilt.broken and rebuilt.exists and rebuilt.version == made.version + 1
    shown = system_of(agent).split(DIGEST_HEADER + "\n", 1)[1].split("\n\n", 1)[0]
    assert "14 November 2023:" in shown and all(line[2:].split(": ", 1)[1] in HISTORY for line in shown.splitlines() if line.startswith("- "))


@pytest.mark.parametrize("case", ["not json", "a number for a line", "a line dated past the year 9999"])
def test_commands_on_a_broken_row_say_so_in_one_line_and_compact_rebuilds_it(backend, case):
    store, db = backend
    fill(store)
    runner = CliRunner()
    base = ["--db", db]
    env = {"HUB_WINDOW": "4", "HUB_DIGEST_EVERY": "2", "HUB_DIGEST_MODE": "extractive", "HUB_ROUTER_EMBEDDER": "none"}
    assert runner.invoke(cli, [*base, "digest", "compact", "--scope", SCOPE], env=env).exit_code == 0
    break_row(store, *BROKEN[case])

    shown = runner.invoke(cli, [*base, "digest", "show", "--scope", SCOPE], env=env)
    assert shown.exit_code == 0 and shown.exception is None, shown.output
    assert "is broken" in shown.output and "digest compact" in shown.output
    as_json = runner.invoke(cli, [*base, "digest", "show", "--scope", SCOPE, "--json"], env=env)
    assert as_json.exit_code == 0 and json.loads(as_json.output)["broken"]
    usage = runner.invoke(cli, [*base, "usage", "--scope", SCOPE], env=env)
    assert usage.exit_code == 0 and usage.exception is None, usage.output

    forced = runner.invoke(cli, [*base, "digest", "compact", "--scope", SCOPE, "--force"], env=env)
    assert forced.exit_code == 0 and forced.output.startswith("compacted (full), version 2"), forced.output
    assert not get_digest(store, SCOPE).broken
    again = runner.invoke(cli, [*base, "digest", "show", "--scope", SCOPE], env=env)
    assert "is broken" not in again.output and "version 2" in again.output


def test_unreadable_counters_start_again_and_the_lines_stay(backend):
    store, db = backend
    agent = ScriptedModel(default="ok")
    hub = make_hub(store, db, agent)
    fill(store)
    asyncio.run(hub.deps.digest.compact(SCOPE, "test"))
    made = get_digest(store, SCOPE)
    break_row(store, "stats", '[1, "two"]')
    after = get_digest(store, SCOPE)
    assert (after.lines, after.stats, after.broken) == (made.lines, {}, "")
    assert digest_usage(store, SCOPE)["compactions"]["full"] == 0
    asyncio.run(hub.handle(Inbound(scope=SCOPE, text="where do we fly?", sender="Ram")))
    assert DIGEST_HEADER in system_of(agent)
    result = CliRunner().invoke(cli, ["--db", db, "usage", "--scope", SCOPE])
    assert result.exit_code == 0 and result.exception is None, result.output


@pytest.mark.parametrize(("column", "value"), [("upto_id", 1e23), ("made", 1e300), ("covered", -7)])
def test_numbers_no_id_or_time_can_be_are_read_as_zero(tmp_path, column, value):
    """SQLite keeps whatever a column is given: an id past 64 bits crashed every query it was bound to."""
    from scopehub.memory import open_store

    db = str(tmp_path / "hub.db")
    store = open_store(db)
    fill(store)
    env = {"HUB_WINDOW": "4", "HUB_DIGEST_EVERY": "2", "HUB_DIGEST_MODE": "extractive", "HUB_ROUTER_EMBEDDER": "none"}
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", db, "digest", "compact", "--scope", SCOPE], env=env).exit_code == 0
    break_row(store, column, value)
    assert getattr(get_digest(store, SCOPE), column) == 0
    for command in (["digest", "show"], ["usage"], ["digest", "compact"]):
        result = runner.invoke(cli, ["--db", db, *command, "--scope", SCOPE], env=env)
        assert result.exit_code == 0 and result.exception is None, (command, result.output)
    store.close()

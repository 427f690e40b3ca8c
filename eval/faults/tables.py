"""Memory tables failing under a running hub: every memory part fails open, the answer claim included.

``memory_tables``
    For each memory table (claims, events, cursors, talk channels, lessons, feedback,
    digests, reflections, facts) in turn, on a hub built as the transports build it
    (digest, reflection, facts, knowledge extraction on), with history in the scope: the
    table is made unusable (renamed away: every read and write of it fails), a message
    is sent and the work after the reply runs, then the operator's commands run on the
    broken database, then the table is put back and one more message is sent. Counted:
    messages not stored or not answered (lost), answered twice (duplicated), replies
    that are not the agent's answer, an exception out of the hub or the work after the
    reply, a failure nobody logged, and a command that printed a traceback (crashed). On
    SQLite and PostgreSQL.

``digest_rows``
    The digest when the model's compaction answer is not the JSON asked for and when the
    stored row is corrupt or wrong-shaped (not JSON, a number for a line, a line without
    its sources or its time, a time no date can be written for). Counted: older history
    the agents got nothing about (no digest at all after a failed compaction: lost), a
    broken row sent to an agent ("1 January 1970: - 5") or a command that printed a
    traceback (crashed), a row the next compaction did not rebuild (lost). On SQLite and
    PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
from pathlib import Path

from scopehub.hub.app import build_hub
from scopehub.hub.cli.main import main as cli_main
from scopehub.hub.orchestrator import Hub, Inbound
from scopehub.memory import (
    NewMessage,
    acquire_claim,
    add_lesson,
    emit_event,
    open_store,
    post_to_channel,
)

from ._backends import databases
from ._harness import capture_logs, echo_model, hub_settings, is_extraction, last_user_text
from ._outcome import Outcome, Scenario, timed

__all__ = ["BROKEN_ROWS", "TABLES", "digest_rows", "memory_tables"]

# The memory parts a turn reads or writes, each one table: made unusable one at a time.
TABLES = ("claims", "events", "cursors", "channel_messages", "lessons", "feedback", "digests", "reflections", "facts")
COMMANDS = (("usage",), ("digest", "show"), ("events", "list"), ("claims",), ("knowledge", "list"), ("search", "offsite"))
ANSWERED_UNIT = "messages answered with a memory table failing"
COMMAND_UNIT = "commands on a failing table without a traceback"


def _rename(store, old: str, new: str) -> None:
    with store.transaction() as conn:
        conn.execute(f'ALTER TABLE "{old}" RENAME TO "{new}"')


def _history(store, scope: str) -> None:
    """What each part reads: older messages (the digest), an event, a channel post, a lesson, a claim."""
    for n in range(8):
        store.append(NewMessage(scope=scope, role="user", text=f"Priya set the offsite budget to {4500 + n} euros.", agent="general"))
    emit_event(store, scope, "tasks", "task.created", {"task_id": 1, "title": "book the offsite venue"})
    post_to_channel(store, scope, "team", "tasks", "The offsite is in Lisbon.")
    add_lesson(store, scope, "general", "Say the budget in euros.", kind="improvement")
    acquire_claim(store, scope, "reminder:1", "worker-x", note="reminders: sending a reminder: pay the deposit", ttl=600)


def _commands(db: str, scope: str) -> tuple[int, list[str]]:
    """Run the operator's commands as a person does; (how many ran clean, the ones that printed a traceback)."""
    clean, broken = 0, []
    for command in COMMANDS:
        args = ["--db", db, *command, *(["--scope", scope] if command != ("claims",) else [])]
        err, out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                cli_main(args)
            except SystemExit:
                pass
            except Exception as exc:  # escaped main(): a person would see a traceback
                broken.append(f"{' '.join(command)}: {type(exc).__name__}: {exc}")
                continue
        if "Traceback" in err.getvalue() + out.getvalue():
            broken.append(f"{' '.join(command)}: printed a traceback")
        else:
            clean += 1
    return clean, broken


async def _turn(hub: Hub, scope: str, text: str, ext_id: str) -> tuple[object, str]:
    """One message and the work after its reply; (the reply, what went wrong outside the reply)."""
    reply = await hub.handle(Inbound(scope=scope, text=text, ext_id=ext_id, agent="general"))
    try:
        await hub.after_send(reply)
        await hub.reflect_due()  # what a transport runs on its schedule
    except Exception as exc:
        return reply, f"the work after the reply raised {type(exc).__name__}: {exc}"
    return reply, ""


def _judge(out: Outcome, store, backend: str, table: str, scope: str, ext_id: str, reply: object, problem: str) -> bool:
    label = f"{backend}, {table}"
    before = out.failures
    if problem:
        out.fail("crashed", f"{label}: {problem}")
    message = store.find_ext(scope, ext_id)
    if message is None:
        out.fail("lost", f"{label}: the person's message is not stored")
        return False
    answers = store.query("SELECT count(*) FROM messages WHERE scope = ? AND role = 'agent' AND reply_to = ?", (scope, message.id))[0][0]
    if answers == 0:
        out.fail("lost", f"{label}: the message was not answered ({getattr(reply, 'text', None)!r})")
    elif answers > 1:
        out.fail("duplicated", f"{label}: the message was answered {answers} times", answers - 1)
    if getattr(reply, "kind", None) != "agent" or not str(getattr(reply, "text", "")).startswith("re: "):
        out.fail("crashed", f"{label}: the person got {getattr(reply, 'text', None)!r}, not the agent's answer")
    return out.failures == before


def memory_tables(workdir: Path, *, tables: tuple[str, ...] = TABLES, seed: int = 0) -> Outcome:
    """Each memory table failing in turn: answered once, logged, commands without a traceback (both backends)."""
    out = Outcome("memory_tables")
    with timed(out), databases(workdir, out) as found:
        for backend, db in found:
            settings = hub_settings(db=db, window=4, tail=2, digest_every=2, digest_mode="extractive", router_embedder="none")
            store = open_store(db)
            try:
                hub = build_hub(settings, store=store, model=echo_model())
                for number, table in enumerate(tables):
                    scope = f"user:{820 + number}"
                    _history(store, scope)
                    _rename(store, table, f"{table}_broken")
                    try:
                        with capture_logs("scopehub") as logs:
                            reply, problem = asyncio.run(_turn(hub, scope, "what is the offsite budget?", f"{table}:1"))
                        if _judge(out, store, backend, table, scope, f"{table}:1", reply, problem):
                            if any(r.levelno >= logging.WARNING for r in logs.records):
                                out.verify(f"{ANSWERED_UNIT} ({backend})")
                            else:
                                out.fail("crashed", f"{backend}, {table}: the failure was not logged")
                        clean, broken = _commands(db, scope)
                        out.verify(f"{COMMAND_UNIT} ({backend})", clean)
                        for line in broken:
                            out.fail("crashed", f"{backend}, {table}: {line}")
                    finally:
                        _rename(store, f"{table}_broken", table)
                    # Put back: the next message is answered as usual, and nothing was left claimed.
                    reply, problem = asyncio.run(_turn(hub, scope, "and the venue?", f"{table}:2"))
                    if _judge(out, store, backend, f"{table} restored", scope, f"{table}:2", reply, problem):
                        out.verify(f"messages answered once the table is back ({backend})")
                    left = asyncio.run(hub.answer_stalled())
                    if left:
                        out.fail("duplicated", f"{backend}, {table}: {len(left)} message(s) answered again afterwards", len(left))
                asyncio.run(hub.drain())
            finally:
                store.close()
            out.note(f"{backend}: {len(tables)} tables failing in turn ({', '.join(tables)}); {len(COMMANDS)} commands each")
    return out


SCENARIOS = {"memory_tables": Scenario(memory_tables)}


# The stored digest's lines, corrupt or wrong-shaped, as a crash, a bad migration or a hand
# edit leaves them: each must be checked when read, never sent, and rebuilt.
BROKEN_ROWS = {
    "not JSON": "{not json",
    "a number for a line": "[5]",
    "an object for the lines": '{"a": 1}',
    "a line without its time": json.dumps([{"text": "Priya booked Lisbon.", "sources": [1]}]),
    "a line dated 1970": json.dumps([{"text": "5", "sources": [1], "ts": 0}]),
    "a line without its sources": json.dumps([{"text": "Priya booked Lisbon.", "sources": [], "ts": 1.7e9}]),
    "a line dated past 9999": json.dumps([{"text": "Priya booked Lisbon.", "sources": [1], "ts": 1e300}]),
}
ROW_UNIT = "broken digest rows never sent, read by every command, rebuilt"


def _prose_model():
    """Agents answer ``re: <message>``; a compaction or reflection gets prose, not the JSON asked for."""
    from scopehub.hub.models.testing import FunctionModel

    async def answer(messages: list[dict], tools: list[dict]) -> str:
        if is_extraction(messages):
            return '{"facts": []}'
        if tools or "offsite" in last_user_text(messages):
            return "re: " + last_user_text(messages)[:200]
        return "Sure, here is a summary of the chat."  # not the JSON the digest asked for

    return FunctionModel(answer, name="prose")


def _sent_digest(model) -> str:
    """The system text of the model's last agent call (where the digest goes)."""
    calls = [c for c in model.calls if c.tools]
    return "\n".join(m["content"] for m in calls[-1].messages if m["role"] == "system") if calls else ""


def digest_rows(workdir: Path, *, seed: int = 0) -> Outcome:
    """A failed model compaction leaves the extractive digest; a broken row is never sent and is rebuilt (both backends)."""
    from scopehub.hub.digest import DIGEST_HEADER
    from scopehub.memory import get_digest

    out = Outcome("digest_rows")
    with timed(out), databases(workdir, out) as found:
        for backend, db in found:
            settings = hub_settings(db=db, window=4, tail=2, digest_every=2, digest_mode="model", router_embedder="none")
            store = open_store(db)
            model = _prose_model()
            try:
                hub = build_hub(settings, store=store, model=model)
                for number, (case, lines) in enumerate(BROKEN_ROWS.items()):
                    scope, label = f"user:{860 + number}", f"{backend}, {case}"
                    _history(store, scope)
                    reply, problem = asyncio.run(_turn(hub, scope, "what is the offsite budget?", f"{case}:1"))
                    _judge(out, store, backend, case, scope, f"{case}:1", reply, problem)
                    made = get_digest(store, scope)
                    if made is None or not made.exists:  # seed 003: the cached digest, else the raw recent events
                        out.fail("lost", f"{label}: the model's compaction failed and the agents got nothing about the older history")
                        continue
                    with store.transaction() as conn:
                        conn.execute("UPDATE digests SET lines = ? WHERE scope = ?", (lines, scope))
                    reply, problem = asyncio.run(_turn(hub, scope, "and the offsite venue?", f"{case}:2"))
                    sent = _sent_digest(model)
                    ok = _judge(out, store, backend, case, scope, f"{case}:2", reply, problem)
                    if DIGEST_HEADER in sent:  # a broken row has no line worth sending
                        out.fail("crashed", f"{label}: the broken row was sent to the agent: {sent.split(DIGEST_HEADER, 1)[1][:80]!r}")
                        ok = False
                    _, broken = _commands(db, scope)
                    for line in broken:
                        out.fail("crashed", f"{label}: {line}")
                    ok = ok and not broken
                    asyncio.run(hub.deps.digest.compact(scope, "faults", force=True))
                    rebuilt = get_digest(store, scope)
                    if rebuilt is None or rebuilt.broken or not rebuilt.exists:
                        out.fail("lost", f"{label}: the next compaction did not rebuild the digest ({getattr(rebuilt, 'broken', None)!r})")
                        ok = False
                    if ok:
                        out.verify(f"{ROW_UNIT} ({backend})")
                asyncio.run(hub.drain())
            finally:
                store.close()
            out.note(f"{backend}: {len(BROKEN_ROWS)} broken rows after a failed model compaction; {len(COMMANDS)} commands each")
    return out


SCENARIOS = {"memory_tables": Scenario(memory_tables), "digest_rows": Scenario(digest_rows)}

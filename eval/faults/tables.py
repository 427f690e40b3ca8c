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
"""

from __future__ import annotations

import asyncio
import contextlib
import io
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
from ._harness import capture_logs, echo_model, hub_settings
from ._outcome import Outcome, Scenario, timed

__all__ = ["TABLES", "memory_tables"]

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

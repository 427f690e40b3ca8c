"""Isolation: nothing of one scope is returned or changed by another."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
import time
from pathlib import Path
from typing import Any

from scopehub.agents import ToolContext, search_memory
from scopehub.hub.facts import current as current_facts
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.orchestrator import (
    Inbound,
)
from scopehub.hub.runtime import run_tool
from scopehub.memory import (
    Store,
    add_reminder,
    add_task,
    add_vault_item,
    get_reminder,
    get_task,
    get_vault_item,
    list_reminders,
    list_tasks,
    list_vault_items,
    vault_item_by_number,
)

from ._harness import (
    HashEmbedder,
    available_search_methods,
    is_extraction,
    last_user_text,
    make_hub,
)
from ._outcome import (
    ITEMS_UNCHANGED,
    SCOPE_PAIRS,
    Outcome,
    Scenario,
    timed,
)

log = logging.getLogger(__name__)


_SECRET = re.compile(r"zx[0-9a-f]{10}q")


def _isolation_scopes(n: int) -> list[str]:
    """``user:1`` and ``group:-5`` (where user 1 writes) first, then users and groups alternating."""
    scopes = ["user:1", "group:-5"]
    i = 2
    while len(scopes) < n:
        scopes.append(f"user:{i}" if i % 2 == 0 else f"group:-{i * 10 + 1}")
        i += 1
    return scopes[:n]


def isolation(workdir: Path, *, scopes: int = 100, seed: int = 0, victims: int = 3) -> Outcome:
    """Scopes with the same words and their own secret: nothing returns or changes another scope's data."""
    out = Outcome("isolation", verified={SCOPE_PAIRS: 0, ITEMS_UNCHANGED: 0})
    with timed(out):
        workdir.mkdir(parents=True, exist_ok=True)
        rng = random.Random(seed)
        names = _isolation_scopes(max(2, scopes))
        secrets = {scope: f"zx{rng.getrandbits(40):010x}q" for scope in names}
        owner = {secret: scope for scope, secret in secrets.items()}
        with Store(workdir / "isolation.db") as store:
            state = {"scope": names[0]}

            typed: dict[str, set[str]] = {}  # secrets of other scopes a person typed into a scope: its own data then
            leaks: set[tuple[str, str]] = set()  # (scope, the other scope whose data it showed)
            checks = 0

            def foreign(text: str, scope: str) -> list[str]:
                found = set(_SECRET.findall(text)) - typed.get(scope, set())
                return [owner.get(s, s) for s in found if owner.get(s) != scope]

            def check(what: str, text: str, scope: str) -> None:
                nonlocal checks
                checks += 1
                others = foreign(text, scope)
                leaks.update((scope, other) for other in others)
                if others:
                    out.fail("leaked", f"{what} in {scope} showed data of {sorted(others)[:3]}")

            def agent_answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
                scope = state["scope"]
                check("a model call", json.dumps(messages, ensure_ascii=False), scope)
                if is_extraction(messages):
                    own = _SECRET.findall(last_user_text(messages))
                    facts = [{"text": f"User's locker code is {own[0]}", "kind": "other", "key": "user.locker_code", "op": "add"}] if own else []
                    return json.dumps({"facts": facts})
                return "noted"

            def router_answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
                check("the LLM router's prompt", json.dumps(messages, ensure_ascii=False), state["scope"])
                return '{"agent": "general", "also_sees": ["tasks", "inbox", "notes", "reminders"]}'

            model = FunctionModel(agent_answer, name="isolation")
            hub = make_hub(store, model, router_model=FunctionModel(router_answer, name="router"), facts=True)
            now = time.time()
            ids: dict[str, dict[str, int]] = {}

            async def fill() -> None:
                for scope in names:
                    state["scope"] = scope
                    secret = secrets[scope]
                    group = scope.startswith("group:")
                    sender = "Ann" if scope in ("user:1", "group:-5") else f"member{rng.randint(1, 9)}"
                    texts = [
                        f"my locker code is {secret}",
                        f"the quarterly budget meeting notes mention {secret}",
                        f"/remember my pin is {secret}",
                        "add buy milk to my tasks",
                        "what is my locker code?",
                    ]
                    for n, text in enumerate(texts):
                        reply = await hub.handle(Inbound(scope=scope, text=text, ext_id=f"i{n}", sender=sender if group else None, chat=scope.split(":", 1)[1]))
                        await hub.after_send(reply)
                    task = add_task(store, scope, f"buy milk {secret}", now=now)
                    reminder = add_reminder(store, scope, f"call mum about {secret}", now + 3600, chat=scope.split(":", 1)[1], now=now)
                    note = add_vault_item(store, scope, "note", f"budget notes {secret}", title=f"budget {secret}", agent="notes", now=now)
                    email = add_vault_item(store, scope, "email", f"From: boss\nSubject: deadline\n\nThe code is {secret}", title="deadline", agent="inbox", now=now)
                    # What people and tools call them: task, reminder, note and email numbers count
                    # per scope (and notes and emails per kind), like the tools' arguments.
                    ids[scope] = {"task": task.id, "reminder": reminder.id, "note": note.number, "email": email.number}
                model.calls.clear()

            asyncio.run(fill())
            tools = {t.name: t for spec in hub.registry for t in spec.tools}
            tools[search_memory.name] = search_memory
            methods = available_search_methods()
            embedder = HashEmbedder() if "semantic" in methods else None

            async def probe(scope: str) -> None:
                state["scope"] = scope
                others = rng.sample([s for s in names if s != scope], min(victims, len(names) - 1))
                queries = ["locker code budget milk deadline", secrets[scope], *(secrets[o] for o in others), "zx*", '"zx" OR code']
                for method in methods:
                    for query in queries:
                        hits = store.search(scope, query, k=10, method=method, embedder=embedder)
                        check(f"search[{method}]", " ".join(f"{h.text} {h.snippet}" for h in hits), scope)
                        for hit in hits:
                            owned = store.get(scope, hit.id) if hit.kind == "message" else get_vault_item(store, scope, hit.id)
                            if owned is None:
                                out.fail("leaked", f"search[{method}] in {scope} returned {hit.kind} #{hit.id} of another scope")
                check("facts", " ".join(f.text for f in current_facts(store, scope)), scope)
                check("facts block", hub.facts_block(scope), scope)
                latest = store.latest(scope)
                if latest is not None:
                    for agent in hub.registry.names:
                        built = hub.context_for(agent, scope, latest, tuple(n for n in hub.registry.names if n != agent))
                        check(f"context[{agent}]", json.dumps(built.messages, ensure_ascii=False), scope)
                check("tasks", " ".join(t.title for t in list_tasks(store, scope, include_done=True)), scope)
                check("reminders", " ".join(r.text for r in list_reminders(store, scope, include_inactive=True)), scope)
                check("vault", " ".join(f"{v.title} {v.body}" for v in list_vault_items(store, scope, limit=50)), scope)
                ctx = ToolContext(store=store, scope=scope, chat=scope.split(":", 1)[1], clock=lambda: now, extra={"timezone": "UTC"})
                calls: list[tuple[str, dict[str, Any]]] = [
                    ("list_tasks", {"done": True}),
                    ("list_reminders", {}),
                    ("list_notes", {}),
                    ("list_emails", {}),
                    ("search_memory", {"query": f"locker code {secrets[others[0]]}"}),
                ]
                for other in others:
                    victim = ids[other]
                    calls += [
                        ("read_note", {"id": victim["note"]}),
                        ("read_email", {"id": victim["email"]}),
                        ("draft_reply", {"email_id": victim["email"], "body": "hello"}),
                        ("complete_task", {"id": victim["task"]}),
                        ("edit_task", {"id": victim["task"], "title": "hijacked"}),
                        ("cancel_reminder", {"id": victim["reminder"]}),
                        ("delete_note", {"id": victim["note"]}),
                    ]
                # Task and reminder numbers count per scope, so the victims' numbers also name
                # this scope's own records: what must not change is the victims' rows.
                def victims_state() -> dict[str, tuple[Any, Any, Any]]:
                    return {
                        other: (
                            get_task(store, other, ids[other]["task"]),
                            get_reminder(store, other, ids[other]["reminder"]),
                            vault_item_by_number(store, other, "note", ids[other]["note"]),
                        )
                        for other in others
                    }

                before = victims_state()
                for name, arguments in calls:
                    if name in tools:
                        result, _ = await run_tool(tools, name, json.dumps(arguments), ctx)
                        check(f"tool {name}", result, scope)
                after = victims_state()
                for other in others:
                    victim = ids[other]
                    (task, reminder, note), (task_was, reminder_was, note_was) = after[other], before[other]
                    if task is None or task != task_was:
                        out.fail("leaked", f"a tool in {scope} changed task #{victim['task']} of {other}")
                    else:
                        out.verify(ITEMS_UNCHANGED)
                    if reminder is None or reminder != reminder_was:
                        out.fail("leaked", f"a tool in {scope} cancelled reminder #{victim['reminder']} of {other}")
                    else:
                        out.verify(ITEMS_UNCHANGED)
                    if note != note_was:  # its own turn may have deleted it; another scope's never may
                        out.fail("leaked", f"a tool in {scope} deleted note #{victim['note']} of {other}")
                    else:
                        out.verify(ITEMS_UNCHANGED)
                typed.setdefault(scope, set()).add(secrets[others[0]])
                for text in ("/facts", f"/search {secrets[others[0]]}", "/search locker code budget", "/usage", "what's my pin?"):
                    reply = await hub.handle(Inbound(scope=scope, text=text, sender="Ann" if scope.startswith("group:") else None))
                    check(f"reply to {text.split()[0]}", reply.text if reply else "", scope)
                model.calls.clear()
                probed.append(scope)

            # Every output of a probed scope was searched for the secret of every other scope:
            # each (scope, other) pair without a leak counts once.
            probed: list[str] = []

            async def probe_all() -> None:
                for scope in names:
                    await probe(scope)

            asyncio.run(probe_all())
            # The member's private facts never reach the group they write in.
            private = secrets["user:1"]
            group_view = " ".join(
                [hub.facts_block("group:-5"), *(f.text for f in current_facts(store, "group:-5")), *(h.text for h in store.search("group:-5", private, k=10))]
            )
            if private in group_view:
                out.fail("leaked", "group:-5 sees a private fact of user:1")
                leaks.add(("group:-5", "user:1"))
            out.verify(SCOPE_PAIRS, len(probed) * (len(names) - 1) - sum(1 for scope, _ in leaks if scope in probed))
            out.note(
                f"{len(probed)} of {len(names)} scopes probed, {checks:,} outputs checked for every other scope's secret, "
                f"search methods {', '.join(methods)}; group:-5 vs user:1 (same person) checked"
            )
    return out




SCENARIOS = {"isolation": Scenario(isolation, heavy={"scopes": 100}, quick={"scopes": 10})}

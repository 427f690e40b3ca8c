"""The console's writes (only with ``--allow-writes``): add or correct a fact, forget one,
cancel a reminder, erase a scope. Each is a form, then a confirmation page that says
exactly what will change, then the change with an audit event by ``operator``; every POST
carries a CSRF token bound to the session, the action, the scope and the row.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from scopehub.hub.console import audit
from scopehub.hub.console.urls import scope_url
from scopehub.hub.console.web import OPERATOR, Console
from scopehub.hub.facts.keys import normalise_key
from scopehub.hub.facts.text import MAX_FACT_CHARS, clean
from scopehub.memory import (
    FACT_KINDS,
    Fact,
    FactChange,
    NewFact,
    apply_fact_changes,
    cancel_reminder,
    current_facts,
    delete_facts,
    emit_event,
    fact_history,
    get_fact,
    get_reminder,
)

__all__ = ["routes"]


def _history_of(facts: list[Fact], fact_id: int) -> list[Fact]:
    """The fact and the older versions it superseded (what forgetting deletes)."""
    found, pending = [], [fact_id]
    by_id = {f.id: f for f in facts}
    while pending:
        current = by_id.get(pending.pop())
        if current is not None and current not in found:
            found.append(current)
            pending.extend(f.id for f in facts if f.superseded_by == current.id)
    return found


def routes(console: Console) -> list[Route]:
    store = console.store

    def memory_url(request: Request, scope: str, code: str) -> RedirectResponse:
        return RedirectResponse(console.done_url(request, scope_url(scope, "memory"), code), status_code=303)

    def current_fact(scope: str, fact_id: int) -> Fact:
        fact = get_fact(store, scope, fact_id)
        if fact is None or fact.invalid_at is not None:
            raise HTTPException(404, f"no current fact #{fact_id} in {scope}")
        return fact

    # -- add or correct a fact ---------------------------------------------------------------
    def fact_form(request: Request) -> Response:
        console.require_writes()
        scope = console.scope_of(request)
        fact = current_fact(scope, console.path_id(request, "fact_id")) if "fact_id" in request.path_params else None
        return console.page(request, "fact_form.html", scope=scope, fact=fact, kinds=FACT_KINDS, values=None, problem="")

    async def fact_submit(request: Request) -> Response:
        editing = "fact_id" in request.path_params
        scope = console.scope_of(request)
        fact_id = console.path_id(request, "fact_id") if editing else None
        form = await console.checked_form(request, "fact-edit" if editing else "fact-add", scope, fact_id or "")
        fact = current_fact(scope, fact_id) if fact_id is not None else None
        text, kind = clean(form.get("text", "")), form.get("kind", "other")
        key = normalise_key(form.get("key", "").strip()) if form.get("key", "").strip() else None
        problem = ""
        if not text:
            problem = "A fact needs some text."
        elif len(text) > MAX_FACT_CHARS:
            problem = f"A fact is at most {MAX_FACT_CHARS} characters; this one has {len(text)}."
        elif kind not in FACT_KINDS:
            problem = f"The kind must be one of {', '.join(FACT_KINDS)}."
        elif fact is not None and (text, key, kind) == (fact.text, fact.key, fact.kind):
            problem = "Nothing changed."
        values = {"text": text, "key": key or "", "kind": kind}
        if problem:
            return console.page(request, "fact_form.html", 400, scope=scope, fact=fact, kinds=FACT_KINDS, values=values, problem=problem)
        # Adding a fact with a key replaces the current facts of that key, as /remember does.
        replaced = [f for f in current_facts(store, scope) if key and f.key == key and (fact is None or f.id != fact.id)]
        if form.get("confirm") != "yes":
            return console.page(request, "fact_confirm.html", scope=scope, fact=fact, values=values, replaced=replaced)
        with store.transaction():  # the change and its audit event: both or neither
            superseded = tuple(f.id for f in replaced) + ((fact.id,) if fact is not None else ())
            (added,) = apply_fact_changes(
                store, scope, [FactChange(add=NewFact(text, kind=kind, key=key, confidence="explicit"), invalidate=superseded)]
            )
            if fact is not None:
                emit_event(store, scope, OPERATOR, audit.FACT_EDITED, {"fact_id": fact.id, "new_fact_id": added.id, "key": key})
            else:
                emit_event(store, scope, OPERATOR, audit.FACT_ADDED, {"fact_id": added.id, "key": key, "replaced": [f.id for f in replaced]})
        return memory_url(request, scope, "fact-edited" if fact is not None else "fact-added")

    # -- forget a fact ---------------------------------------------------------------------
    def forget_form(request: Request) -> Response:
        console.require_writes()
        scope = console.scope_of(request)
        fact = current_fact(scope, console.path_id(request, "fact_id"))
        return console.page(request, "forget.html", scope=scope, fact=fact, versions=_history_of(fact_history(store, scope), fact.id))

    async def forget(request: Request) -> Response:
        scope = console.scope_of(request)
        fact_id = console.path_id(request, "fact_id")
        await console.checked_form(request, "fact-forget", scope, fact_id)
        fact = get_fact(store, scope, fact_id)
        if fact is None or fact.invalid_at is not None:
            return memory_url(request, scope, "fact-missing")
        with store.transaction():  # like /forget: the fact with its older versions, and the audit event
            gone = delete_facts(store, scope, [fact_id], with_history=True)
            emit_event(store, scope, OPERATOR, audit.FACT_FORGOTTEN, {"fact_ids": [f.id for f in gone], "key": fact.key})
        store.flush_deleted()  # the deleted rows' copies in the write-ahead log too
        return memory_url(request, scope, "fact-forgotten")

    # -- cancel a reminder -------------------------------------------------------------------
    def cancel_form(request: Request) -> Response:
        console.require_writes()
        scope = console.scope_of(request)
        reminder = get_reminder(store, scope, console.path_id(request, "number"))
        if reminder is None or not reminder.active:
            raise HTTPException(404, f"no active reminder #{request.path_params['number']} in {scope}")
        return console.page(request, "cancel.html", scope=scope, reminder=reminder)

    async def cancel(request: Request) -> Response:
        scope = console.scope_of(request)
        number = console.path_id(request, "number")
        await console.checked_form(request, "reminder-cancel", scope, number)
        with store.transaction():  # the reminder and its event: both or neither, as the tool does it
            reminder = cancel_reminder(store, scope, number)
            if reminder is not None:
                emit_event(store, scope, OPERATOR, "reminder.cancelled", {"reminder_id": reminder.id, "text": reminder.text})
        return memory_url(request, scope, "reminder-cancelled" if reminder is not None else "reminder-missing")

    # -- erase a scope ---------------------------------------------------------------------
    def erase_form(request: Request) -> Response:
        console.require_writes()
        scope = console.scope_of(request)
        return console.page(request, "erase.html", scope=scope, usage=store.usage(scope), mismatch=False)

    async def erase(request: Request) -> Response:
        scope = console.scope_of(request)
        form = await console.checked_form(request, "erase", scope)
        from scopehub.hub.erasure import erase_scope_everywhere

        if form.get("confirm", "").strip() != scope:
            return console.page(request, "erase.html", status_code=400, scope=scope, usage=store.usage(scope), mismatch=True)
        # The store and the Maildir files, like /forget all: seconds on a long scope, off the event loop.
        await run_in_threadpool(erase_scope_everywhere, store, console.settings, scope)
        return RedirectResponse(console.done_url(request, "/", "scope-erased"), status_code=303)

    base = "/scopes/{scope:scope}"
    return [
        Route(f"{base}/facts/new", fact_form, methods=["GET"]),
        Route(f"{base}/facts/new", fact_submit, methods=["POST"]),
        Route(f"{base}/facts/{{fact_id:int}}/edit", fact_form, methods=["GET"]),
        Route(f"{base}/facts/{{fact_id:int}}/edit", fact_submit, methods=["POST"]),
        Route(f"{base}/facts/{{fact_id:int}}/forget", forget_form, methods=["GET"]),
        Route(f"{base}/facts/{{fact_id:int}}/forget", forget, methods=["POST"]),
        Route(f"{base}/reminders/{{number:int}}/cancel", cancel_form, methods=["GET"]),
        Route(f"{base}/reminders/{{number:int}}/cancel", cancel, methods=["POST"]),
        Route(f"{base}/erase", erase_form, methods=["GET"]),
        Route(f"{base}/erase", erase, methods=["POST"]),
    ]

"""Write actions: only with --allow-writes, only by POST with the form's CSRF token, one scope at a time."""

from __future__ import annotations

import re

from scopehub.hub.console.access import csrf_token
from scopehub.memory import current_facts, get_reminder, list_reminders, recent_events
from tests.hub.console.conftest import FACT, SECRET, make_client


def forms(page: str) -> dict[str, str]:
    """action -> CSRF token of every form on a page."""
    return dict(re.findall(r'<form[^>]*action="([^"]+)">\s*<input type="hidden" name="csrf" value="([0-9a-f]+)">', page))


def fact_id(store, scope="user:1", text=FACT) -> int:
    return next(f.id for f in current_facts(store, scope) if text in f.text)


def test_read_only_console_shows_no_buttons_and_answers_403(fresh):
    store = fresh.store
    client = make_client(fresh)
    fid = fact_id(store)
    page = client.get("/scopes/user:1/memory").text
    assert "<form" not in page and "erase…" not in page
    # Even with a token that would be valid, the routes refuse.
    app_secret_token = "0" * 64
    for path in (f"/scopes/user:1/facts/{fid}/forget", "/scopes/user:1/reminders/1/cancel", "/scopes/user:1/erase"):
        response = client.post(path, data={"csrf": app_secret_token, "confirm": "user:1"})
        assert response.status_code == 403 and "--allow-writes" in response.text
    assert client.get("/scopes/user:1/erase").status_code == 403
    assert fid in [f.id for f in current_facts(store, "user:1")]
    assert list_reminders(store, "user:1")  # still active
    assert store.count_messages("user:1") > 0


def test_forget_a_fact(fresh):
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    fid = fact_id(store)
    action = f"/scopes/user:1/facts/{fid}/forget"
    token = forms(client.get("/scopes/user:1/memory").text)[action]
    assert client.post(action, data={"csrf": "forged"}).status_code == 403
    assert client.post(action, data={}).status_code == 403
    assert fid in [f.id for f in current_facts(store, "user:1")]
    response = client.post(action, data={"csrf": token})
    assert response.status_code == 303 and response.headers["location"] == "/scopes/user:1/memory?done=fact-forgotten"
    assert fid not in [f.id for f in current_facts(store, "user:1")]
    assert "Fact forgotten" in client.get(response.headers["location"]).text


def test_a_csrf_token_is_bound_to_its_action(fresh):
    client = make_client(fresh, allow_writes=True)
    page_forms = forms(client.get("/scopes/user:1/memory").text)
    reminder_token = page_forms["/scopes/user:1/reminders/1/cancel"]
    fid = fact_id(fresh.store)
    assert client.post(f"/scopes/user:1/facts/{fid}/forget", data={"csrf": reminder_token}).status_code == 403
    assert fid in [f.id for f in current_facts(fresh.store, "user:1")]


def test_a_cross_site_form_is_refused(fresh):
    client = make_client(fresh, allow_writes=True)
    fid = fact_id(fresh.store)
    action = f"/scopes/user:1/facts/{fid}/forget"
    token = forms(client.get("/scopes/user:1/memory").text)[action]
    assert client.post(action, data={"csrf": token}, headers={"Origin": "https://attacker.example"}).status_code == 403
    assert fid in [f.id for f in current_facts(fresh.store, "user:1")]


def test_cancel_a_reminder_records_who_did_it(fresh):
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    action = "/scopes/user:1/reminders/1/cancel"
    token = forms(client.get("/scopes/user:1/memory").text)[action]
    response = client.post(action, data={"csrf": token})
    assert response.status_code == 303 and response.headers["location"].endswith("done=reminder-cancelled")
    assert not get_reminder(store, "user:1", 1).active
    event = recent_events(store, "user:1")[-1]
    assert (event.type, event.agent, event.payload["text"]) == ("reminder.cancelled", "operator", "call Anna")
    again = client.post(action, data={"csrf": token})
    assert again.headers["location"].endswith("done=reminder-missing")


def test_a_write_on_one_scope_never_touches_another(fresh):
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    other = fact_id(store, "user:2", "555-0199")
    action = f"/scopes/user:1/facts/{other}/forget"  # user:2's fact through user:1's URL, with a valid token
    response = client.post(action, data={"csrf": csrf_token(SECRET, action)})
    assert response.status_code == 303 and response.headers["location"].endswith("done=fact-missing")
    assert other in [f.id for f in current_facts(store, "user:2")]


def test_erase_a_scope_after_typing_its_id(fresh):
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    form_page = client.get("/scopes/user:1/erase")
    assert form_page.status_code == 200
    token = forms(form_page.text)["/scopes/user:1/erase"]
    mistyped = client.post("/scopes/user:1/erase", data={"csrf": token, "confirm": "user:2"})
    assert mistyped.status_code == 400 and "nothing was erased" in mistyped.text
    assert store.count_messages("user:1") > 0
    inbox_file = next((fresh.maildir / "user-1").rglob("*.md"))
    done = client.post("/scopes/user:1/erase", data={"csrf": token, "confirm": "user:1"})
    assert done.status_code == 303 and done.headers["location"] == "/?done=scope-erased"
    assert store.count_messages("user:1") == 0 and store.calls("user:1") == []
    assert not inbox_file.exists()  # the Maildir files went too
    assert store.count_messages("user:2") > 0  # the other scope is untouched
    assert client.get("/scopes/user:1").status_code == 404
    assert "Scope erased" in client.get("/?done=scope-erased").text

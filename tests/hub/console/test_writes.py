"""Fixing: only with --allow-writes, each change confirmed first and audited, every POST with
a CSRF token bound to its session, action, scope and row; notices only from this console."""

from __future__ import annotations

import html
import re
from urllib.parse import quote

import pytest
from markupsafe import escape

from scopehub.hub.console.session import Signer
from scopehub.hub.console.urls import scope_url
from scopehub.memory import (
    current_facts,
    fact_history,
    get_fact,
    get_reminder,
    list_reminders,
    recent_events,
)
from tests.hub.console.conftest import FACT, ODD_SCOPES, SECRET, TOKEN, make_client


def forms(page: str) -> dict[str, str]:
    """action -> CSRF token of every form on a page."""
    found = re.findall(r'<form[^>]*action="([^"]+)"[^>]*>\s*<input type="hidden" name="csrf" value="([0-9a-f]+)">', page)
    return {html.unescape(action): token for action, token in found}


def fact_id(store, scope="user:1", text=FACT) -> int:
    return next(f.id for f in current_facts(store, scope) if text in f.text)


def test_read_only_console_shows_no_write_links_and_answers_403(fresh):
    store = fresh.store
    client = make_client(fresh)
    fid = fact_id(store)
    page = client.get("/scopes/user:1/memory").text
    assert not forms(page) and "erase…" not in page and "forget…" not in page and "correct…" not in page
    assert "replay…" not in client.get("/scopes/user:1").text and "sandbox" not in page
    for path in (f"/scopes/user:1/facts/{fid}/forget", f"/scopes/user:1/facts/{fid}/edit", "/scopes/user:1/facts/new",
                 "/scopes/user:1/reminders/1/cancel", "/scopes/user:1/erase", "/sandbox"):  # fmt: skip
        response = client.post(path, data={"csrf": "0" * 64, "confirm": "yes", "text": "x"})
        assert response.status_code == 403 and "--allow-writes" in response.text, path
        assert client.get(path).status_code == 403, path
    assert client.get(f"/scopes/user:1/messages/{store.messages('user:1')[0].id}/replay").status_code == 403
    assert fid in [f.id for f in current_facts(store, "user:1")]
    assert list_reminders(store, "user:1") and store.count_messages("user:1") > 0


def test_a_crafted_done_link_shows_no_false_success(fresh):
    """``/?done=scope-erased`` on a read-only console, or with a signature this console did not make, shows nothing."""
    assert "Scope erased" not in make_client(fresh).get("/?done=scope-erased").text
    writes = make_client(fresh, allow_writes=True)
    assert "Scope erased" not in writes.get("/?done=scope-erased").text
    assert "Scope erased" not in writes.get("/?done=scope-erased&t=1800000000&sig=" + "ab" * 32).text


def test_a_real_done_link_shows_nothing_on_a_read_only_console(fresh):
    writes = make_client(fresh, allow_writes=True)
    action = "/scopes/user:1/reminders/1/cancel"
    done = writes.post(action, data={"csrf": forms(writes.get(action).text)[action]}).headers["location"]
    assert "Reminder cancelled." in writes.get(done).text
    assert "Reminder cancelled." not in make_client(fresh).get(done).text  # same secret, same (no) session, read-only


def test_correct_a_fact_after_a_confirmation(fresh):
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    fid = fact_id(store)
    memory = client.get("/scopes/user:1/memory").text
    assert f'href="/scopes/user:1/facts/{fid}/edit">correct…</a>' in memory
    form_page = client.get(f"/scopes/user:1/facts/{fid}/edit").text
    action = f"/scopes/user:1/facts/{fid}/edit"
    token = forms(form_page)[action]
    assert 'value="my email is ann@example.com"' in form_page
    preview = client.post(action, data={"csrf": token, "text": "my email is ann@work.example", "key": "user.email", "kind": "contact"})
    assert preview.status_code == 200 and "Confirm: correct fact" in preview.text
    assert "my email is ann@example.com" in preview.text and "my email is ann@work.example" in preview.text
    assert get_fact(store, "user:1", fid).invalid_at is None  # nothing changed yet
    confirm = forms(preview.text)[action]
    done = client.post(action, data={"csrf": confirm, "text": "my email is ann@work.example", "key": "user.email", "kind": "contact", "confirm": "yes"})
    assert done.status_code == 303 and done.headers["location"].startswith("/scopes/user:1/memory?done=fact-edited")
    (new,) = [f for f in current_facts(store, "user:1") if f.key == "user.email"]
    assert (new.text, new.confidence) == ("my email is ann@work.example", "explicit")
    old = get_fact(store, "user:1", fid)
    assert old.invalid_at is not None and old.superseded_by == new.id  # the old text stays in the history
    event = recent_events(store, "user:1")[-1]
    assert (event.type, event.agent, event.payload) == ("operator.fact_edited", "operator", {"fact_id": fid, "new_fact_id": new.id, "key": "user.email"})
    assert "Fact corrected" in client.get(done.headers["location"]).text


def test_a_bad_fact_is_refused_with_a_reason_and_changes_nothing(fresh):
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    token = forms(client.get("/scopes/user:1/facts/new").text)["/scopes/user:1/facts/new"]
    before = fact_history(store, "user:1")
    for data, reason in (({"text": "  "}, "needs some text"), ({"text": "x" * 1001}, "at most"), ({"text": "ok", "kind": "weird"}, "kind must be")):
        response = client.post("/scopes/user:1/facts/new", data={"csrf": token, "kind": "other", **data, "confirm": "yes"})
        assert response.status_code == 400 and reason in response.text
    assert fact_history(store, "user:1") == before


def test_add_a_fact_that_replaces_one_of_the_same_key(fresh):
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    old = fact_id(store)
    token = forms(client.get("/scopes/user:1/facts/new").text)["/scopes/user:1/facts/new"]
    data = {"csrf": token, "text": "Ann's email is ann@new.example", "key": "user.email", "kind": "contact"}
    preview = html.unescape(client.post("/scopes/user:1/facts/new", data=data).text)
    assert f"#{old} my email is ann@example.com" in preview.split("replaces")[1]
    client.post("/scopes/user:1/facts/new", data={**data, "confirm": "yes"})
    (now,) = [f for f in current_facts(store, "user:1") if f.key == "user.email"]
    assert now.text == "Ann's email is ann@new.example" and get_fact(store, "user:1", old).superseded_by == now.id
    event = recent_events(store, "user:1")[-1]
    assert (event.type, event.payload["replaced"]) == ("operator.fact_added", [old])


def test_forget_a_fact_after_a_confirmation_and_leave_no_copy_in_the_audit(fresh):
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    fid = fact_id(store)
    confirm_page = client.get(f"/scopes/user:1/facts/{fid}/forget").text
    assert "Forget fact" in confirm_page and "cannot be undone" in confirm_page and FACT in confirm_page
    action = f"/scopes/user:1/facts/{fid}/forget"
    token = forms(confirm_page)[action]
    assert client.post(action, data={"csrf": "forged"}).status_code == 403
    assert client.post(action, data={}).status_code == 403
    assert fid in [f.id for f in current_facts(store, "user:1")]
    response = client.post(action, data={"csrf": token})
    assert response.status_code == 303 and response.headers["location"].startswith("/scopes/user:1/memory?done=fact-forgotten")
    assert get_fact(store, "user:1", fid) is None  # gone with its history, as /forget does
    event = recent_events(store, "user:1")[-1]
    assert (event.type, event.agent, event.payload) == ("operator.fact_forgotten", "operator", {"fact_ids": [fid], "key": "user.email"})
    assert "ann@example.com" not in str([e.payload for e in recent_events(store, "user:1", limit=100)])
    assert "Fact forgotten" in client.get(response.headers["location"]).text
    again = client.post(action, data={"csrf": token})
    assert "done=fact-missing" in again.headers["location"]


def test_a_csrf_token_is_bound_to_its_action_and_row(fresh):
    client = make_client(fresh, allow_writes=True)
    fid = fact_id(fresh.store)
    reminder_token = forms(client.get("/scopes/user:1/reminders/1/cancel").text)["/scopes/user:1/reminders/1/cancel"]
    assert client.post(f"/scopes/user:1/facts/{fid}/forget", data={"csrf": reminder_token}).status_code == 403
    other = fact_id(fresh.store, "user:2", "555-0199")
    token = forms(client.get(f"/scopes/user:2/facts/{other}/forget").text)[f"/scopes/user:2/facts/{other}/forget"]
    assert client.post(f"/scopes/user:1/facts/{fid}/forget", data={"csrf": token}).status_code == 403  # another row
    assert fid in [f.id for f in current_facts(fresh.store, "user:1")]
    action = f"/scopes/user:1/facts/{fid}/forget"
    assert client.post(action, data={"csrf": forms(client.get(action).text)[action]}).status_code == 303  # its own token works


def test_a_cross_site_form_is_refused(fresh):
    client = make_client(fresh, allow_writes=True)
    fid = fact_id(fresh.store)
    action = f"/scopes/user:1/facts/{fid}/forget"
    token = forms(client.get(action).text)[action]
    assert client.post(action, data={"csrf": token}, headers={"Origin": "https://attacker.example"}).status_code == 403
    assert fid in [f.id for f in current_facts(fresh.store, "user:1")]


def test_a_csrf_token_of_one_session_is_refused_in_another(fresh):
    first = make_client(fresh, allow_writes=True, token=TOKEN)
    first.post("/login", data={"token": TOKEN, "next": "/"})
    fid = fact_id(fresh.store)
    action = f"/scopes/user:1/facts/{fid}/forget"
    token = forms(first.get(action).text)[action]
    second = make_client(fresh, allow_writes=True, token=TOKEN)
    second.post("/login", data={"token": TOKEN, "next": "/"})
    assert second.post(action, data={"csrf": token}).status_code == 403
    done = first.post(action, data={"csrf": token})
    assert done.status_code == 303
    assert "Fact forgotten" in first.get(done.headers["location"]).text
    assert "Fact forgotten" not in second.get(done.headers["location"]).text  # a notice is for the session that acted


def test_cancel_a_reminder_after_a_confirmation_records_who_did_it(fresh):
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    action = "/scopes/user:1/reminders/1/cancel"
    page = client.get(action).text
    assert "Cancel reminder #1?" in page and "call Anna" in page
    response = client.post(action, data={"csrf": forms(page)[action]})
    assert response.status_code == 303 and "done=reminder-cancelled" in response.headers["location"]
    assert not get_reminder(store, "user:1", 1).active
    event = recent_events(store, "user:1")[-1]
    assert (event.type, event.agent, event.payload["text"]) == ("reminder.cancelled", "operator", "call Anna")
    assert client.get(action).status_code == 404  # no longer active: nothing to confirm


def test_a_write_on_one_scope_never_touches_another(fresh):
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    other = fact_id(store, "user:2", "555-0199")
    action = f"/scopes/user:1/facts/{other}/forget"  # user:2's fact through user:1's URL, with a valid token
    response = client.post(action, data={"csrf": Signer(SECRET).sign("csrf", "", "fact-forget", "user:1", other)})
    assert response.status_code == 303 and "done=fact-missing" in response.headers["location"]
    assert other in [f.id for f in current_facts(store, "user:2")]


@pytest.mark.parametrize("scope", ODD_SCOPES)
def test_scopes_whose_ids_need_encoding_open_and_change(fresh, scope):
    """``/``, ``%`` and quotes in a scope id: every page opens, and a write passes its CSRF check."""
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    home = html.unescape(client.get("/").text)
    url = scope_url(scope)
    assert (f'href="{url}"' in home and "%2F" in url) or "/" not in scope
    for path in (url, scope_url(scope, "memory"), scope_url(scope, "charts"), scope_url(scope, "search", q="plumber"), scope_url(scope, "erase")):
        page = client.get(path)
        assert page.status_code == 200, path
        assert str(escape(scope)) in page.text
    call = store.calls(scope)[-1]
    assert client.get(scope_url(scope, "calls", call["id"])).status_code == 200
    fid = fact_id(store, scope, "Odd")
    action = scope_url(scope, "facts", fid, "forget")
    response = client.post(action, data={"csrf": forms(client.get(action).text)[action]})
    assert response.status_code == 303 and "done=fact-forgotten" in response.headers["location"]
    assert get_fact(store, scope, fid) is None
    assert "Fact forgotten" in client.get(response.headers["location"]).text
    erase = scope_url(scope, "erase")
    done = client.post(erase, data={"csrf": forms(client.get(erase).text)[erase], "confirm": scope})
    assert done.status_code == 303 and store.count_messages(scope) == 0 and store.count_messages("user:1") > 0
    assert "Scope erased" in client.get(done.headers["location"]).text


def test_erase_a_scope_after_typing_its_id(fresh):
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    form_page = client.get("/scopes/user:1/erase")
    token = forms(form_page.text)["/scopes/user:1/erase"]
    mistyped = client.post("/scopes/user:1/erase", data={"csrf": token, "confirm": "user:2"})
    assert mistyped.status_code == 400 and "nothing was erased" in mistyped.text
    assert store.count_messages("user:1") > 0
    inbox_file = next((fresh.maildir / "user-1").rglob("*.md"))
    done = client.post("/scopes/user:1/erase", data={"csrf": token, "confirm": "user:1"})
    assert done.status_code == 303 and done.headers["location"].startswith("/?done=scope-erased")
    assert store.count_messages("user:1") == 0 and store.calls("user:1") == []
    assert not inbox_file.exists()  # the Maildir files went too
    assert store.count_messages("user:2") > 0  # the other scope is untouched
    assert client.get("/scopes/user:1").status_code == 404
    assert "Scope erased" in client.get(done.headers["location"]).text


def test_replay_shows_what_was_sent_beside_what_would_be_sent_now(fresh):
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    message = next(m for m in store.messages("user:1") if m.text == "what tasks do I have?")
    replay = f"/scopes/user:1/messages/{message.id}/replay"
    assert f'href="{replay}"' in client.get("/scopes/user:1").text
    page = html.unescape(client.get(replay).text)
    rows = {name: state for state, name in re.findall(r'<tr class="section-row (\w+)" data-section="(\w+)">', page)}
    assert len(rows) == 9
    assert rows["persona"] == "same" and rows["facts"] == "same" and rows["message"] == "same"
    # Correct the fact: the replay now shows the new facts beside the ones sent then.
    fid = fact_id(store)
    action = f"/scopes/user:1/facts/{fid}/edit"
    token = forms(client.get(action).text)[action]
    client.post(action, data={"csrf": token, "text": "my email is ann@work.example", "key": "user.email", "kind": "contact", "confirm": "yes"})
    page = html.unescape(client.get(replay).text)
    facts = page.split('data-section="facts"')[1].split("</tr>")[0]
    assert 'section-row changed" data-section="facts"' in page
    assert "ann@example.com" in facts and "ann@work.example" in facts
    assert client.get(f"/scopes/user:1/messages/{message.id + 1}/replay").status_code == 404  # an agent's reply: nothing to replay


def test_the_sandbox_chat_answers_in_a_scratch_scope_only(fresh):
    store = fresh.store
    client = make_client(fresh, allow_writes=True)
    page = client.get("/sandbox").text
    token = forms(page)["/sandbox"]
    sent = client.post("/sandbox", data={"csrf": token, "text": "add water the plants to my tasks"})
    assert sent.status_code == 303
    scope = re.search(r"scope=([^#&]+)", sent.headers["location"]).group(1).replace("%3A", ":")
    assert scope.startswith("user:sandbox-")
    conversation = html.unescape(client.get(sent.headers["location"].split("#")[0]).text)
    assert "add water the plants to my tasks" in conversation and "ok, done" in conversation
    call = store.calls(scope)[-1]
    assert f'href="{scope_url(scope, "calls", call["id"])}"' in conversation
    again = client.post("/sandbox", data={"csrf": token, "text": "and buy soil", "scope": scope})
    assert again.status_code == 303 and [m.text for m in store.messages(scope) if m.role == "user"] == ["add water the plants to my tasks", "and buy soil"]
    refused = client.post("/sandbox", data={"csrf": token, "text": "hi", "scope": "user:1"})
    assert refused.status_code == 400 and "not a sandbox" in refused.text
    assert "hi" not in [m.text for m in store.messages("user:1")]
    assert client.post("/sandbox", data={"csrf": "forged", "text": "hi"}).status_code == 403
    assert quote(scope) in client.get("/sandbox").text  # listed for later

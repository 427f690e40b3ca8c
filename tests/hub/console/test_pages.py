"""Every page of the console over HTTP: what an operator reads there, escaped, one scope at a time."""

from __future__ import annotations

import html
import re

from markupsafe import escape

from scopehub.hub.console.calls import call_view
from scopehub.hub.context import agent_prompt
from scopehub.hub.context.tokens import get_tokenizer
from tests.hub.console.conftest import (
    CHANNEL_POST,
    CONVERSATION,
    FACT,
    HOSTILE,
    LESSON,
    OTHER_SECRET,
    make_client,
)


def agent_calls(store, scope="user:1"):
    return [c for c in store.calls(scope) if c["via"] not in ("router", "extractor")]


def test_scopes_list_shows_counts_activity_and_saving(client, populated):
    page = client.get("/")
    assert page.status_code == 200
    rows = {m[0]: m[1] for m in re.findall(r'<a href="/scopes/(user:\d)">.*?</a>.*?<td class="n">([\d,]+)</td>', page.text, re.S)}
    assert rows == {"user:1": str(populated.store.count_messages("user:1")), "user:2": str(populated.store.count_messages("user:2"))}
    usage = populated.store.usage("user:1")
    assert f"{usage.tokens_sent:,}" in page.text and f"{usage.full_history_tokens:,}" in page.text
    assert OTHER_SECRET not in page.text  # the list names scopes, never their messages
    user1 = page.text.split('href="/scopes/user:1"')[1].split("</tr>")[0]
    # One pending reminder and one file waiting in the scope's Maildir inbox.
    assert re.findall(r'<td class="n">([^<]*)</td>', user1)[-2:] == ["1", "1"]
    user2 = page.text.split('href="/scopes/user:2"')[1].split("</tr>")[0]
    assert re.findall(r'<td class="n">([^<]*)</td>', user2)[-2:] == ["", ""]


def test_timeline_shows_each_message_with_its_route_and_its_calls(client, populated):
    store = populated.store
    page = client.get("/scopes/user:1")
    assert page.status_code == 200
    text = html.unescape(page.text)
    for message in store.messages("user:1"):
        assert f"#{message.id}" in text
        if message.role == "user":
            assert f"→ {message.agent}" in text.replace("<b>", "").replace("</b>", "")
            assert f"via {message.via}" in text
    for call in agent_calls(store):
        assert f'href="/scopes/user:1/calls/{call["id"]}"' in page.text
        assert f"{call['total']:,} tokens sent, full history {call['full_history_tokens']:,}" in text
    assert page.text.count('class="mini-bar"') == len(agent_calls(store))
    assert OTHER_SECRET not in page.text


def test_timeline_pages_by_keyset_without_losing_or_repeating_a_message(client, populated):
    store = populated.store
    seen: list[int] = []
    url = "/scopes/user:1?n=3"
    while url:
        page = client.get(url)
        assert page.status_code == 200
        seen += [int(i) for i in re.findall(r'<div class="msg \w+" id="m(\d+)">', page.text)]
        older = re.search(r'href="(/scopes/user:1\?before=\d+&amp;n=3)">older', page.text)
        url = html.unescape(older.group(1)) if older else None
    assert seen == sorted((m.id for m in store.messages("user:1")), reverse=True)
    assert client.get("/scopes/user:1?before=abc").status_code == 400
    assert client.get(f"/scopes/user:1?before={10**30}").status_code == 400
    assert client.get(f"/scopes/user:1/calls/{10**30}").status_code == 404
    assert client.get("/scopes/user:1?n=100000").status_code == 400


def test_call_page_shows_exactly_what_the_model_was_sent(client, populated):
    """Every provider message the model received for each call is on that call's page, and
    the page says it is byte-identical to what was sent."""
    requests = [c for c in populated.model.calls if not c.json_mode]  # the fact extractor asks in JSON mode
    calls = agent_calls(populated.store)
    assert len(requests) >= len(calls) == len(CONVERSATION)
    by_user_text = {r.messages[-1]["content"]: r for r in requests}
    for call in calls:
        page = client.get(f"/scopes/user:1/calls/{call['id']}")
        assert page.status_code == 200
        assert "byte-identical" in page.text
        message = populated.store.get("user:1", call["message_id"])
        sent = by_user_text[message.text]
        for provider_message in sent.messages:
            if provider_message["role"] == "system" and "cache_control" in provider_message:
                continue  # persona + rules: shown as their two sections, checked below
            for part in provider_message["content"].split("\n\n"):
                assert str(escape(part)) in page.text, part
        prompt = agent_prompt(populated.hub.registry[call["agent"]])
        assert str(escape(prompt.persona)) in page.text and str(escape(prompt.rules)) in page.text
        for name in ("persona", "rules", "tools", "history", "message"):
            assert f'id="section-{name}"' in page.text
        assert 'class="stacked-bar"' in page.text
        reply = next(m for m in populated.store.messages("user:1") if m.reply_to == message.id)
        assert f'<div class="meta">#{reply.id} ·' in page.text.split('id="reply"')[1]


def test_call_page_shows_the_facts_lessons_and_awareness_that_were_sent(client, populated):
    call = next(c for c in agent_calls(populated.store) if c["agent"] == "tasks")
    page = html.unescape(client.get(f"/scopes/user:1/calls/{call['id']}").text)
    section = {name: page.split(f'id="section-{name}"')[1].split('class="section"')[0] for name in ("facts", "lessons", "awareness")}
    assert "ann@example.com" in section["facts"]
    assert LESSON in section["lessons"]
    assert CHANNEL_POST in section["awareness"]
    assert f"{call['facts']:,} tokens" in section["facts"]


def test_a_call_record_without_texts_is_rebuilt_and_says_so(populated):
    """An older call record (token counts only): history rebuilt from the routes, other texts marked as not kept."""
    call = dict(agent_calls(populated.store)[-1])
    call["extra"] = {}
    call["also_sees"] = ()
    prompts = {name: agent_prompt(spec) for name, spec in ((s.name, s) for s in populated.hub.registry)}
    view = call_view(populated.store, populated.settings, call, prompts, get_tokenizer())
    assert view.state == "rebuilt" and "recorded before call records kept" in view.notes[0]
    sections = {s.name: s for s in view.sections}
    assert sections["facts"].text is None and sections["facts"].tokens == call["facts"] > 0
    assert [i.message_id for i in sections["history"].items]  # the history follows from the stored routes


def test_an_edited_message_makes_the_call_page_say_it_changed(fresh):
    store = fresh.store
    call = agent_calls(store)[-1]
    earlier = next(m for m in store.messages("user:1") if m.id < call["message_id"] and m.role == "user")
    store.edit_text("user:1", earlier.id, "something else entirely")
    page = make_client(fresh).get(f"/scopes/user:1/calls/{call['id']}").text
    assert "not byte-identical" in page and "byte-identical (sha256 matches)" not in page


def test_message_texts_are_data_never_html(client, populated):
    for path in ("/scopes/user:1", f"/scopes/user:1/calls/{agent_calls(populated.store)[CONVERSATION.index(HOSTILE)]['id']}"):
        page = client.get(path).text
        assert "<script>alert(1)</script>" not in page
        assert str(escape(HOSTILE)) in page  # shown as typed, template syntax untouched
    error = client.get("/scopes/%3Cscript%3Ealert(1)")  # the scope of the URL is echoed in the 404
    assert error.status_code == 404 and "<script>alert(1)" not in error.text and "&lt;script&gt;alert(1)" in error.text


def test_no_page_of_one_scope_shows_another_scopes_data(client, populated):
    other_call = agent_calls(populated.store, "user:2")[0]
    assert client.get(f"/scopes/user:1/calls/{other_call['id']}").status_code == 404
    assert client.get(f"/scopes/user:2/calls/{other_call['id']}").status_code == 200
    for path in ("/scopes/user:1", "/scopes/user:1/memory", "/scopes/user:1/charts"):
        page = client.get(path).text
        assert "zebra-42" not in page and "555-0199" not in page
    assert client.get("/scopes/user:3").status_code == 404  # no data: no page
    assert client.get("/scopes/nobody").status_code == 404


def test_memory_page_shows_every_part_of_the_scopes_memory(client, populated):
    page = html.unescape(client.get("/scopes/user:1/memory").text)
    for expected in (
        FACT,  # facts
        "buy milk",  # tasks
        "call Anna",  # reminders
        "task.created",  # events
        "compacting",  # claims
        CHANNEL_POST,  # channels
        LESSON,  # lessons
        "Ann keeps her tasks here.",  # digest
        "Ann shops on fridays.",  # knowledge
        "user-1/hub",  # the Maildir backlog
    ):
        assert expected in page, expected
    assert re.search(r"<td>user-1/hub</td><td class=\"n\">1</td>", page)
    assert "<form" not in page  # read-only: no buttons


def test_charts_draw_tokens_over_time_and_routing_paths(client, populated):
    for path in ("/charts", "/scopes/user:1/charts"):
        page = client.get(path)
        assert page.status_code == 200
        assert 'data-series="tokens sent"' in page.text and 'data-series="full history would be"' in page.text
        scopes_shown = ("user:1",) if "user:1" in path else ("user:1", "user:2")
        sent = sum(populated.store.usage(s).tokens_sent for s in scopes_shown)
        full = sum(populated.store.usage(s).full_history_tokens for s in scopes_shown)
        assert f"{sent:,} tokens sent; {full:,} with the full history" in page.text  # the buckets add up
        routes = dict(re.findall(r'<rect data-label="([^"]+)"[^>]*><title>[^:]+: (\d+)</title>', page.text))
        expected = {}
        scopes = ("user:1",) if "user:1" in path else ("user:1", "user:2")
        for scope in scopes:
            for m in populated.store.messages(scope):
                if m.role == "user":
                    expected[m.via] = expected.get(m.via, 0) + 1
        assert {k: int(v) for k, v in routes.items()} == expected


def test_static_stylesheet_and_security_headers(client):
    response = client.get("/static/console.css")
    assert response.status_code == 200 and "stacked" not in response.headers.get("content-security-policy", "")
    page = client.get("/")
    assert "script-src" not in page.headers["content-security-policy"]  # default-src 'none': no script at all
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"


def test_a_section_repeated_from_call_to_call_is_kept_once_and_followed(client, populated):
    """The facts block is the same in every call: the first record keeps it, the later ones
    refer to it, and every call page still shows it."""
    calls = agent_calls(populated.store)
    kept = [c for c in calls if isinstance(c_sent(c)["sections"].get("facts"), str)]
    assert [c["id"] for c in kept] == [calls[0]["id"]]
    for call in calls[1:]:
        assert c_sent(call)["sections"]["facts"]["same_as"] == calls[0]["id"]
        assert "ann@example.com" in html.unescape(client.get(f"/scopes/user:1/calls/{call['id']}").text)


def test_a_reference_to_a_lost_copy_is_said_never_guessed(fresh):
    store = fresh.store
    calls = agent_calls(store)
    with store.transaction() as conn:  # the call that kept the facts text loses its record of it
        conn.execute("UPDATE calls SET extra = '{}' WHERE id = ?", (calls[0]["id"],))
    page = html.unescape(make_client(fresh).get(f"/scopes/user:1/calls/{calls[-1]['id']}").text)
    facts = page.split('id="section-facts"')[1].split('class="section"')[0]
    assert "text not kept" in facts and "ann@example.com" not in facts
    assert "kept by an earlier call that is gone" in page and "byte-identical (sha256 matches)" not in page


def c_sent(call):
    import json

    extra = call["extra"] if isinstance(call["extra"], dict) else json.loads(call["extra"])
    return extra["sent"]


def test_the_scopes_list_pages_by_scope_name(populated, monkeypatch):
    from scopehub.hub.console import app as console_app

    monkeypatch.setattr(console_app, "SCOPES_PER_PAGE", 1)
    client = make_client(populated)
    first = client.get("/").text
    assert 'href="/scopes/user:1"' in first and 'href="/scopes/user:2"' not in first
    following = re.search(r'href="(/\?after=[^"]+)">next scopes', first).group(1)
    second = client.get(html.unescape(following)).text
    assert 'href="/scopes/user:2"' in second and 'href="/scopes/user:1"' not in second
    assert "next scopes" not in second

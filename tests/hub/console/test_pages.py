"""The console's reading pages over HTTP: what an operator reads there, escaped, one scope at a time."""

from __future__ import annotations

import html
import re

from markupsafe import escape

from scopehub.hub.console.calls import call_view
from scopehub.hub.context import agent_prompt
from scopehub.hub.context.tokens import get_tokenizer
from tests.hub.console.conftest import (
    API_KEY,
    CHANNEL_POST,
    CONVERSATION,
    DRAFT,
    EMAIL,
    FACT,
    FAILING,
    HOSTILE,
    LESSON,
    NOTE,
    agent_calls,
    hub_calls,
    make_client,
)


def section(page: str, name: str) -> str:
    return page.split(f'id="section-{name}"')[1].split('class="section"')[0]


def test_call_page_shows_exactly_what_the_model_was_sent(client, populated):
    """Every provider message the model received for each call is on that call's page, and
    the page says it is byte-identical to what was sent."""
    requests = [c for c in populated.model.calls if not c.json_mode]  # router and extractor ask in JSON mode
    calls = agent_calls(populated.store)
    by_user_text = {}
    for request in requests:  # the first request of each call (a tool loop sends more)
        person = [m for m in request.messages if m["role"] == "user"][-1]["content"]
        by_user_text.setdefault(person, request)
    assert len(calls) == len(CONVERSATION) + 1
    for call in calls:
        page = client.get(f"/scopes/user:1/calls/{call['id']}")
        assert page.status_code == 200
        assert "byte-identical" in page.text
        message = populated.store.get("user:1", call["message_id"])
        sent = next(r for text, r in by_user_text.items() if text.endswith(message.text))
        for provider_message in sent.messages:
            if provider_message["role"] == "system" and "cache_control" in provider_message:
                continue  # persona + rules: shown as their two sections, checked below
            for part in provider_message["content"].split("\n\n"):
                assert str(escape(part)) in page.text, part
        prompt = agent_prompt(populated.hub.registry[call["agent"]])
        assert str(escape(prompt.persona)) in page.text and str(escape(prompt.rules)) in page.text
        assert 'class="stacked-bar"' in page.text


def test_call_page_shows_the_facts_lessons_and_awareness_that_were_sent(client, populated):
    call = next(c for c in agent_calls(populated.store) if c["agent"] == "tasks")
    page = html.unescape(client.get(f"/scopes/user:1/calls/{call['id']}").text)
    assert "ann@example.com" in section(page, "facts")
    assert LESSON in section(page, "lessons")
    assert CHANNEL_POST in section(page, "awareness")
    assert f"{call['facts']:,} tokens" in section(page, "facts")


def test_a_call_links_to_its_message_its_reply_and_its_history_and_shows_what_was_left_out(client, populated):
    store = populated.store
    call = [c for c in agent_calls(store) if c["agent"] == "tasks"][-1]  # "what tasks do I have?"
    page = client.get(f"/scopes/user:1/calls/{call['id']}").text
    message_id = call["message_id"]
    assert f'href="/scopes/user:1?around={message_id}#m{message_id}">message #{message_id}' in page
    reply = next(m for m in store.messages("user:1") if m.reply_to == message_id)
    assert f'href="/scopes/user:1?around={reply.id}#m{reply.id}">#{reply.id}</a>' in page.split('id="reply"')[1]
    history = section(page, "history")
    sent, left_out = history.split('class="left-out"')
    sent_ids = [int(i) for i in re.findall(r'around=(\d+)#m\d+">#\d+</a> · (?:user|assistant)', sent)]
    assert sent_ids and all(i < message_id for i in sent_ids)
    # The window's other messages (the notes agent's, the reminders agent's): one click away.
    shown = {int(i) for i in re.findall(r'around=(\d+)#m\d+">#\d+</a>', left_out)}
    window = {m.id for m in store.window("user:1", populated.settings.window, up_to=message_id - 1)}
    assert shown == window - set(sent_ids) and shown
    assert "note that the wifi password is on the fridge" in html.unescape(left_out)
    # Its sibling calls: the router's before it.
    router = next(c for c in hub_calls(store, "router") if c["message_id"] == message_id)
    assert f'href="/scopes/user:1/calls/{router["id"]}"' in page


def test_the_tool_loop_reads_as_name_arguments_result_round_by_round(client, populated):
    call = next(c for c in agent_calls(populated.store) if c["tool_calls"])
    page = client.get(f"/scopes/user:1/calls/{call['id']}").text
    loop = page.split("<h2>Tool loop</h2>")[1].split("<h2>Reply</h2>")[0]
    rounds = re.findall(r'<li class="round"><div class="meta">(round \d+[^<]*)</div>', loop)
    assert rounds[0].startswith("round 1 · ") and "400 in, 20 out" in rounds[0]
    assert rounds[1].startswith("round 2 · ") and "430 in, 6 out" in rounds[1] and "the answer" in rounds[1]
    # The arguments as the model gave them, readable: no JSON in JSON, no \u003c escapes.
    assert '<code>add_task(title=&#34;buy milk &lt;fresh&gt;&#34;, due=&#34;friday&#34;)</code>' in loop
    assert "\\u003c" not in loop and "Added #1 buy milk" in html.unescape(loop)


def test_a_failed_call_says_why_with_the_key_redacted(client, populated):
    failed = next(c for c in agent_calls(populated.store) if not c["ok"])
    page = client.get(f"/scopes/user:1/calls/{failed['id']}").text
    failure = html.unescape(page.split('id="failure"')[1].split("</div>")[0])
    assert "ModelUnavailable" in failure and "provider returned 503 Service Unavailable (key [redacted])" in failure
    assert "apology" in failure
    assert API_KEY not in page and API_KEY not in str(populated.store.calls("user:1"))
    timeline = client.get("/scopes/user:1").text
    assert "failed: ModelUnavailable" in timeline


def test_the_router_call_page_shows_its_prompt_answer_and_route(client, populated):
    store = populated.store
    chosen = next(c for c in hub_calls(store, "router") if c["ok"] and c["message_id"] == store.messages("user:1")[0].id)
    page = html.unescape(client.get(f"/scopes/user:1/calls/{chosen['id']}").text)
    assert "LLM router call" in page and "Route the new message to one agent" in page
    assert "New message: add buy milk to my tasks" in page and '{"agent": "tasks"}' in page
    assert "The router chose tasks" in page.replace("<b>", "").replace("</b>", "")
    assert "Added buy milk." not in page.split("<h3>Answer</h3>")[1]  # not the agent's reply as its "answer"
    unusable = next(c for c in hub_calls(store, "router") if not c["ok"])
    page = html.unescape(client.get(f"/scopes/user:1/calls/{unusable['id']}").text)
    assert "RouterError" in page and "I think reminders?" in page and "that route was kept" in page


def test_the_extractor_call_page_shows_the_facts_it_proposed_and_what_became_of_them(client, populated):
    store = populated.store
    birthday = next(m for m in store.messages("user:1") if "birthday" in m.text)
    call = next(c for c in hub_calls(store, "extractor") if c["message_id"] == birthday.id)
    page = html.unescape(client.get(f"/scopes/user:1/calls/{call['id']}").text)
    assert "Fact extractor call" in page and "You extract lasting facts from one chat message" in page
    assert f'Message: "{birthday.text}"' in page  # the variable part of the prompt as sent
    proposed = page.split('class="proposed"')[1].split("</table>")[0]
    rows = re.findall(r"<tr[^>]*><td class=\"text\">([^<]+)</td><td>([^<]*)</td><td>(\w+)</td><td>(\w+)", proposed)
    assert ("User lives in Paris", "user.city", "add", "refused") in rows
    assert ("Anna's birthday is in May", "anna.birthday", "add", "add") in rows
    assert "not in the person's own words" in proposed
    assert "ok, done" not in page  # the inbox agent's answer is not this call's reply


def test_a_call_record_without_texts_is_rebuilt_and_says_so(populated):
    """An older call record (token counts only): history rebuilt from the routes, other texts marked as not kept."""
    call = dict(agent_calls(populated.store)[-2])
    call["extra"] = {}
    call["also_sees"] = ()
    prompts = {spec.name: agent_prompt(spec) for spec in populated.hub.registry}
    view = call_view(populated.store, populated.settings, call, prompts, get_tokenizer())
    assert view.state == "rebuilt" and "recorded before call records kept" in view.notes[0]
    sections = {s.name: s for s in view.sections}
    assert sections["facts"].text is None and sections["facts"].tokens == call["facts"] > 0
    assert [i.message_id for i in sections["history"].items]


def test_an_edited_message_makes_the_call_page_say_it_changed(fresh):
    store = fresh.store
    call = agent_calls(store)[-2]
    earlier = next(m for m in store.messages("user:1") if m.id < call["message_id"] and m.role == "user")
    store.edit_text("user:1", earlier.id, "something else entirely")
    page = make_client(fresh).get(f"/scopes/user:1/calls/{call['id']}").text
    assert "not byte-identical" in page and "byte-identical (sha256 matches)" not in page


def test_message_texts_are_data_never_html(client, populated):
    hostile_call = agent_calls(populated.store)[CONVERSATION.index(HOSTILE)]
    for path in ("/scopes/user:1", f"/scopes/user:1/calls/{hostile_call['id']}", "/scopes/user:1/search?q=alert"):
        page = client.get(path).text
        assert "<script>alert(1)</script>" not in page
        assert str(escape(HOSTILE)) in page, path  # shown as typed, template syntax untouched
    error = client.get("/scopes/%3Cscript%3Ealert(1)")  # the scope of the URL is echoed in the 404
    assert error.status_code == 404 and "<script>alert(1)" not in error.text and "&lt;script&gt;alert(1)" in error.text


def test_no_page_of_one_scope_shows_another_scopes_data(client, populated):
    other_call = agent_calls(populated.store, "user:2")[0]
    assert client.get(f"/scopes/user:1/calls/{other_call['id']}").status_code == 404
    assert client.get(f"/scopes/user:2/calls/{other_call['id']}").status_code == 200
    for path in ("/scopes/user:1", "/scopes/user:1/memory", "/scopes/user:1/charts", "/scopes/user:1/search?q=zebra+secret"):
        page = client.get(path).text
        assert "zebra-42" not in page and "555-0199" not in page, path
    assert client.get("/scopes/user:3").status_code == 404  # no data: no page
    assert client.get("/scopes/nobody").status_code == 404


def test_memory_page_shows_every_part_of_the_scopes_memory(client, populated):
    page = html.unescape(client.get("/scopes/user:1/memory").text)
    for expected in (
        FACT,  # facts
        "Anna's birthday is in May",  # a fact the extractor added
        NOTE,  # notes
        EMAIL,  # emails
        "billing@example.com",
        DRAFT,  # reply drafts
        "buy milk <fresh>",  # tasks (the tool call made it)
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
    for title in ("Notes (1)", "Emails (1)", "Reply drafts (1)"):
        assert title in page
    assert re.search(r"<td>user-1/hub</td><td class=\"n\">1</td>", page)
    assert "<form" not in page.split('<nav class="tabs">')[1].split('<h2>Facts')[1]  # read-only: no write forms


def test_without_a_digest_the_memory_page_says_none_exists_and_why_the_last_compaction_failed(fresh):
    from scopehub.memory import record_digest_failure

    store = fresh.store
    page = html.unescape(make_client(fresh).get("/scopes/user:2/memory").text)
    digest = page.split("<h2>Digest</h2>")[1].split("<h2>")[0]
    assert "No digest yet" in digest and "version 0" not in digest and "1970" not in digest
    record_digest_failure(store, "user:2", "timeout after 30 s", retry_after=2)
    page = html.unescape(make_client(fresh).get("/scopes/user:2/memory").text)
    digest = page.split("<h2>Digest</h2>")[1].split("<h2>")[0]
    assert "The last compaction failed (1 failed so far): timeout after 30 s." in digest
    assert "after message #2" in digest and "version 0 (" not in digest


def test_static_stylesheet_and_security_headers(client):
    response = client.get("/static/console.css")
    assert response.status_code == 200
    page = client.get("/")
    assert "script-src" not in page.headers["content-security-policy"]  # default-src 'none': no script at all
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"


def test_a_section_repeated_from_call_to_call_is_kept_once_and_followed(client, populated):
    """The facts block is the same in every call: the first record keeps it, the later ones
    refer to it, and every call page still shows it."""
    calls = agent_calls(populated.store)
    holders = [c for c in calls if isinstance(c_sent(c)["sections"].get("facts"), str)]
    assert holders and len(holders) < len(calls)
    for call in calls:
        assert "ann@example.com" in html.unescape(client.get(f"/scopes/user:1/calls/{call['id']}").text)


def test_a_reference_to_a_lost_copy_is_said_never_guessed(fresh):
    store = fresh.store
    calls = agent_calls(store)
    with store.transaction() as conn:  # the call that kept the facts text loses its record of it
        conn.execute("UPDATE calls SET extra = '{}' WHERE id = ?", (calls[0]["id"],))
    referring = next(c for c in calls[1:] if c_sent(c)["sections"].get("facts", {}).get("same_as") == calls[0]["id"])
    page = html.unescape(make_client(fresh).get(f"/scopes/user:1/calls/{referring['id']}").text)
    facts = section(page, "facts")
    assert "text not kept" in facts and "ann@example.com" not in facts
    assert "kept by an earlier call that is gone" in page and "byte-identical (sha256 matches)" not in page


def c_sent(call):
    import json

    extra = call["extra"] if isinstance(call["extra"], dict) else json.loads(call["extra"])
    return extra["sent"]


def test_failing_message_is_found_on_the_timeline_of_failed_calls(client, populated):
    page = html.unescape(client.get("/scopes/user:1?failed=1").text)
    texts = re.findall(r'<div class="text">([^<]*)</div>', page)
    assert FAILING in texts
    assert "add buy milk to my tasks" not in texts  # it went well

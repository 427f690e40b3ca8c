"""Finding things: the scopes list's orders and pages, the timeline's filters, jumps and
pages, the search, and the links that follow a message to its reply and calls and back."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime

from scopehub.memory import NewMessage
from tests.hub.console.conftest import EMAIL, FAILING, NOTE, agent_calls, hub_calls, make_client


def ids_on(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<div class="msg \w+(?: target)?" id="m(\d+)">', page)]


def link(page: str, label: str) -> str:
    """The href of the link whose text is ``label``."""
    return html.unescape(re.search(r'<a href="([^"]+)">' + re.escape(label) + "</a>", page).group(1))


def scope_order(page: str) -> list[str]:
    return [html.unescape(s) for s in re.findall(r'<td class="scope" data-label="scope"><a href="[^"]+">([^<]+)</a>', page)]


# -- the scopes list ---------------------------------------------------------------------------


def test_scopes_list_shows_counts_activity_failures_and_saving(client, populated):
    store = populated.store
    page = client.get("/").text
    row = page.split('href="/scopes/user:1"')[1].split("</tr>")[0]
    cells = dict(re.findall(r'<td data-label="([^"]+)"[^>]*>(.*?)</td>', row, re.S))
    usage = store.usage("user:1")
    assert cells["messages"] == f"{store.count_messages('user:1'):,}"
    assert cells["agent calls"] == f"{usage.agent_calls:,}" and cells["tokens sent"] == f"{usage.tokens_sent:,}"
    assert cells["full history"] == f"{usage.full_history_tokens:,}"
    assert 'href="/scopes/user:1?failed=1">1</a>' in cells["failed"]  # the failed agent call, one click from here
    assert (cells["pending reminders"], cells["Maildir waiting"]) == ("1", "1")
    assert "zebra-42" not in page  # the list names scopes, never their messages


def test_scopes_sort_by_activity_messages_calls_tokens_and_cost(fresh):
    store = fresh.store
    client = make_client(fresh)
    store.append(NewMessage(scope="user:2", role="user", text="the latest word", ts=4_000_000_000))  # user:2 is newest now
    rows = {s: (store.count_messages(s), store.usage(s)) for s in store.scopes()}
    by_activity = scope_order(client.get("/").text)
    assert by_activity[0] == "user:2"
    assert scope_order(client.get("/?sort=messages").text) == sorted(rows, key=lambda s: (rows[s][0], s), reverse=True)
    assert scope_order(client.get("/?sort=tokens").text) == sorted(rows, key=lambda s: (rows[s][1].tokens_sent, s), reverse=True)
    assert scope_order(client.get("/?sort=calls&order=asc").text) == sorted(rows, key=lambda s: (rows[s][1].agent_calls, s))
    assert scope_order(client.get("/?sort=name").text) == sorted(rows)
    page = client.get("/?sort=tokens").text
    assert 'href="/?sort=tokens&amp;order=asc">tokens sent ↓' in page  # the sorted column toggles its order


def test_the_scopes_list_pages_and_says_so_past_the_last_page(populated, monkeypatch):
    from scopehub.hub.console.pages import scopes

    monkeypatch.setattr(scopes, "SCOPES_PER_PAGE", 2)
    client = make_client(populated)
    names = set(populated.store.scopes())
    seen, url = [], "/?sort=name"
    while url:
        page = client.get(url).text
        seen += scope_order(page)
        found = re.search(r'<a href="([^"]+)">next scopes →</a>', page)
        url = html.unescape(found.group(1)) if found else None
    assert sorted(seen) == sorted(names) and len(seen) == len(names)
    past = html.unescape(client.get("/?sort=name&page=9").text)
    assert "no scope has data yet" not in past
    assert f"Page 9 is past the last one: {len(names)} scopes in 3 pages." in past and "first page" in past


# -- the timeline ----------------------------------------------------------------------------


def test_timeline_shows_each_message_with_its_route_and_its_calls_linked_both_ways(client, populated):
    store = populated.store
    page = client.get("/scopes/user:1").text
    text = html.unescape(page)
    for message in store.messages("user:1"):
        assert f'id="m{message.id}"' in page
        if message.role == "user":
            assert f"→ {message.agent}" in text.replace("<b>", "").replace("</b>", "") and f"via {message.via}" in text
    for call in agent_calls(store):
        assert f'href="/scopes/user:1/calls/{call["id"]}">call #{call["id"]}</a>' in page
    for call in hub_calls(store, "router") + hub_calls(store, "extractor"):
        assert f'href="/scopes/user:1/calls/{call["id"]}">{call["via"]} call #{call["id"]}</a>' in page
    first, reply = store.messages("user:1")[:2]
    item = page.split(f'id="m{first.id}"')[1].split('<div class="msg')[0]
    assert f'answered by <a href="/scopes/user:1?around={reply.id}#m{reply.id}">#{reply.id}</a>' in item
    answer = page.split(f'id="m{reply.id}"')[1].split('<div class="msg')[0]
    call = next(c for c in agent_calls(store) if c["message_id"] == first.id)
    assert f'to <a href="/scopes/user:1?around={first.id}#m{first.id}">#{first.id}</a>' in answer
    assert f'by <a href="/scopes/user:1/calls/{call["id"]}">call #{call["id"]}</a>' in answer
    assert page.count('class="mini-bar"') == len(agent_calls(store))
    assert 'class="section-legend"' in page and ">history</text>" in page  # the bars' legend


def test_timeline_pages_by_keyset_without_losing_or_repeating_a_message(client, populated):
    store = populated.store
    seen: list[int] = []
    url = "/scopes/user:1?n=3"
    while url:
        page = client.get(url).text
        seen += ids_on(page)
        older = re.search(r'<a href="([^"]+)">older →</a>', page)
        url = html.unescape(older.group(1)) if older else None
    assert seen == sorted((m.id for m in store.messages("user:1")), reverse=True)
    last = client.get("/scopes/user:1?n=3&after=0").text  # "oldest ⇥"
    assert ids_on(last) == sorted(m.id for m in store.messages("user:1"))[:3][::-1]
    newer = link(last, "← newer")
    assert ids_on(client.get(newer).text) == sorted(m.id for m in store.messages("user:1"))[3:6][::-1]
    assert "⇤ newest" in last and "⇤ newest" not in client.get("/scopes/user:1?n=3").text
    assert client.get("/scopes/user:1?before=abc").status_code == 400
    assert client.get(f"/scopes/user:1?before={10**30}").status_code == 400
    assert client.get(f"/scopes/user:1/calls/{10**30}").status_code == 404
    assert client.get("/scopes/user:1?n=100000").status_code == 400


def test_timeline_filters_keep_only_what_they_name(client, populated):
    store = populated.store
    messages = store.messages("user:1")
    calls = store.calls("user:1")

    def shown(query: str) -> set[int]:
        return set(ids_on(client.get(f"/scopes/user:1?{query}").text))

    assert shown("agent=notes") == {m.id for m in messages if m.agent == "notes"}
    assert shown("via=local") == {m.id for m in messages if m.via == "local"}
    assert shown("failed=1") == {c["message_id"] for c in calls if not c["ok"]}
    assert shown("tools=1") == {c["message_id"] for c in calls if c["tool_calls"]} == {messages[0].id}
    assert shown("agent=tasks&tools=1") == {messages[0].id} and shown("agent=notes&tools=1") == set()
    day = datetime.fromtimestamp(messages[0].ts, tz=UTC).strftime("%Y-%m-%d")
    assert shown(f"from={day}&to={day}") == {m.id for m in messages}
    assert shown("from=2001-01-01&to=2001-01-02") == set()
    page = html.unescape(client.get("/scopes/user:1?agent=notes").text)
    assert f"{len([m for m in messages if m.agent == 'notes'])} of {len(messages)} messages" in page
    assert client.get("/scopes/user:1?from=yesterday").status_code == 400


def test_a_jump_goes_to_a_message_id_or_a_date(fresh):
    store = fresh.store
    client = make_client(fresh)
    base = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
    for i in range(120):
        store.append(NewMessage(scope="user:9", role="user", text=f"message {i}", ts=base + i * 3600))  # one an hour
    ids = [m.id for m in store.messages("user:9")]
    went = client.get(f"/scopes/user:9?go=%23{ids[30]}")
    assert went.status_code == 303 and went.headers["location"] == f"/scopes/user:9?around={ids[30]}#m{ids[30]}"
    page = client.get(went.headers["location"]).text
    assert ids[30] in ids_on(page) and f'class="msg user target" id="m{ids[30]}"' in page
    # A date: the page starts at its first message (at the bottom), newer ones above it.
    went = client.get("/scopes/user:9?go=2023-11-17")
    first_that_day = next(i for i, m in zip(ids, store.messages("user:9"), strict=True) if m.ts >= 1_700_179_200)
    assert went.headers["location"].endswith(f"#m{first_that_day}")
    page = html.unescape(client.get(went.headers["location"].split("#")[0]).text)
    assert ids_on(page)[-1] == first_that_day and "From 2023-11-17 on" in page
    went = client.get("/scopes/user:9?go=2023-11-17%2005:30")  # a date and a time
    page = client.get(went.headers["location"].split("#")[0]).text
    assert ids_on(page)[-1] == first_that_day + 6  # 06:13, the first message after 05:30
    after_all = client.get(client.get("/scopes/user:9?go=2031-01-01").headers["location"]).text
    assert "No message on or after 2031-01-01" in html.unescape(after_all) and ids_on(after_all)[0] == ids[-1]
    assert client.get("/scopes/user:9?go=soon").status_code == 400
    assert client.get("/scopes/user:9?go=%2399999999").status_code == 404


def test_search_finds_messages_notes_emails_and_facts_with_the_agents_hybrid_search(client, populated):
    store = populated.store
    page = html.unescape(client.get("/scopes/user:1/search?q=wifi+pasword").text)  # a typo: spelling-tolerant
    wifi = next(m for m in store.messages("user:1") if "wifi" in m.text)
    assert f'id="m{wifi.id}"' in page and page.index(f'id="m{wifi.id}"') < page.index('class="msg agent"')
    hits = store.search("user:1", "wifi pasword", k=30)
    assert [int(i) for i in re.findall(r'<div class="hit" data-kind="message">.*?id="m(\d+)"', page, re.S)] == [
        h.id for h in hits if h.kind == "message"
    ]  # the same ranking the agents' search_memory gets
    assert NOTE in html.unescape(client.get("/scopes/user:1/search?q=gate+code").text)
    found = html.unescape(client.get("/scopes/user:1/search?q=invoice+overdue").text)
    assert EMAIL in found and 'data-kind="email"' in found
    facts = html.unescape(client.get("/scopes/user:1/search?q=ann@example.com").text)
    assert "my email is ann@example.com" in facts.split("<h3>Facts</h3>")[1]
    failing = html.unescape(client.get("/scopes/user:1/search?q=dentist").text)
    assert FAILING in failing and "failed: ModelUnavailable" in failing  # a hit shows its calls
    dated = html.unescape(client.get("/scopes/user:1/search?q=2024-05-01").text)
    assert "Open the timeline at 2024-05-01" in dated and "go=2024-05-01" in dated
    assert "nothing found" in client.get("/scopes/user:1/search?q=xylophone").text

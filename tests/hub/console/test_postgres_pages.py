"""The console on a PostgreSQL store: every page answers and shows the scope's own data.

The console's own SQL (hub/console/queries.py, stats.py, tally.py) is written to be
portable; this runs it on a real PostgreSQL server (skipped, saying why, where none can be started).
"""

from __future__ import annotations

import html
import re

from scopehub.hub.console.urls import scope_url

from .conftest import (
    CHANNEL_POST,
    LESSON,
    NOTE,
    ODD_SCOPES,
    OTHER_SECRET,
    agent_calls,
    hub_calls,
    make_client,
    populate,
)


def test_every_page_of_the_console_works_on_postgresql(tmp_path, postgres_store_url):
    data = populate(tmp_path, db=postgres_store_url)
    store = data.store
    client = make_client(data, allow_writes=True)
    scopes = html.unescape(client.get("/").text)
    assert "user:1" in scopes and "user:2" in scopes
    assert client.get("/?sort=cost").status_code == 200

    timeline = html.unescape(client.get("/scopes/user:1").text)
    assert "add buy milk to my tasks" in timeline and OTHER_SECRET not in timeline
    for query in ("agent=tasks", "via=llm", "failed=1", "tools=1", "from=2000-01-01&to=2100-01-01", "after=0"):
        assert client.get(f"/scopes/user:1?{query}").status_code == 200, query
    first = store.messages("user:1")[0]
    assert f'id="m{first.id}"' in client.get("/scopes/user:1?tools=1").text
    went = client.get("/scopes/user:1?go=2000-01-01")
    assert went.status_code == 303 and went.headers["location"].endswith(f"#m{first.id}")

    found = html.unescape(client.get("/scopes/user:1/search?q=gate+code").text)
    assert NOTE in found

    call = agent_calls(store)[-2]
    context = html.unescape(client.get(f"/scopes/user:1/calls/{call['id']}").text)
    assert "byte-identical" in context
    for via in ("router", "extractor"):
        assert client.get(f"/scopes/user:1/calls/{hub_calls(store, via)[0]['id']}").status_code == 200
    failed = next(c for c in agent_calls(store) if not c["ok"])
    assert "ModelUnavailable" in client.get(f"/scopes/user:1/calls/{failed['id']}").text

    memory = html.unescape(client.get("/scopes/user:1/memory").text)
    for text in ("ann@example.com", LESSON, CHANNEL_POST, "buy milk", "call Anna", NOTE):
        assert text in memory
    assert "555-0199" not in memory  # user:2's fact

    for path in ("/charts", "/scopes/user:1/charts"):
        page = client.get(path)
        assert page.status_code == 200 and "<svg" in page.text and re.search(r'<polyline data-series="tokens sent"', page.text)
    for scope in ODD_SCOPES:
        assert client.get(scope_url(scope)).status_code == 200, scope
    assert client.get("/scopes/user:1/erase").status_code == 200
    assert client.get(f"/scopes/user:1/messages/{first.id}/replay").status_code == 200

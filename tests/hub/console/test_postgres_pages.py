"""The console on a PostgreSQL store: every page answers and shows the scope's own data.

The console's own SQL (hub/console/queries.py) is written to be portable; this runs it on
a real PostgreSQL server (skipped, saying why, where none can be started).
"""

from __future__ import annotations

import html

from .conftest import CHANNEL_POST, LESSON, OTHER_SECRET, make_client, populate


def test_every_page_of_the_console_works_on_postgresql(tmp_path, postgres_store_url):
    data = populate(tmp_path, db=postgres_store_url)
    client = make_client(data, allow_writes=True)
    scopes = html.unescape(client.get("/").text)
    assert "user:1" in scopes and "user:2" in scopes

    timeline = html.unescape(client.get("/scopes/user:1").text)
    assert "add buy milk to my tasks" in timeline and OTHER_SECRET not in timeline

    call = data.store.calls("user:1")[-1]
    context = html.unescape(client.get(f"/scopes/user:1/calls/{call['id']}").text)
    assert "what tasks do I have?" in context and "byte-identical" in context

    memory = html.unescape(client.get("/scopes/user:1/memory").text)
    for text in ("ann@example.com", LESSON, CHANNEL_POST, "buy milk", "call Anna"):
        assert text in memory
    assert "555-0199" not in memory  # user:2's fact

    for path in ("/charts", "/scopes/user:1/charts"):
        page = client.get(path)
        assert page.status_code == 200 and "<svg" in page.text
    assert client.get("/scopes/user:1/erase").status_code == 200

"""The charts: tokens against full history, saving over time, reply latency, per agent, the
routing paths; a bucket still filling drawn as partial; the sums kept current as calls come."""

from __future__ import annotations

import re

from scopehub.hub.console.tally import Tallies
from scopehub.memory import CallRecord
from tests.hub.console.conftest import agent_calls, make_client

HOUR = 3600


def record(store, scope: str, agent: str, ts: float, *, total: int = 100, full: int = 400, latency: float = 1000.0, ok: bool = True, cost: float = 0.0) -> None:
    store.record_call(
        CallRecord(scope=scope, agent=agent, message_id=None, via="local", also_sees=(), tokens={"total": total}, full_history_tokens=full,
                   latency_ms=latency, ts=ts, ok=ok, cost=cost)
    )  # fmt: skip


def points(page: str, series: str) -> list[tuple[float, float]]:
    found = re.search(rf'<polyline data-series="{re.escape(series)}"[^>]*points="([^"]*)"', page)
    return [tuple(map(float, p.split(","))) for p in found.group(1).split()] if found and found.group(1) else []


def test_charts_add_up_to_the_scopes_usage(client, populated):
    for path in ("/charts", "/scopes/user:1/charts"):
        page = client.get(path).text
        assert 'data-series="tokens sent"' in page and 'data-series="full history would be"' in page
        scopes = ("user:1",) if "user:1" in path else populated.store.scopes()
        sent = sum(populated.store.usage(s).tokens_sent for s in scopes)
        full = sum(populated.store.usage(s).full_history_tokens for s in scopes)
        assert f"{sent:,} tokens sent; {full:,} with the full history" in page  # the buckets add up
        routes = dict(re.findall(r'<rect data-label="([^"]+)"[^>]*><title>[^:]+: ([\d,]+)</title>', page.split("How messages were routed")[1]))
        expected: dict[str, int] = {}
        for scope in scopes:
            for m in populated.store.messages(scope):
                if m.role == "user":
                    expected[m.via or "not routed"] = expected.get(m.via or "not routed", 0) + 1
        assert {k: int(v.replace(",", "")) for k, v in routes.items()} == expected


def test_per_agent_tokens_calls_failures_and_cost(client, populated):
    page = client.get("/scopes/user:1/charts").text
    table = page.split('<table class="agents">')[1].split("</table>")[0]
    rows = {r[0]: r[1:] for r in re.findall(r"<tr><td>(\w+)</td><td class=\"n\">([\d,]+)</td><td class=\"n\">(\d*)</td><td class=\"n\">([\d,]+)</td>", table)}
    calls = agent_calls(populated.store)
    for agent in {c["agent"] for c in calls}:
        mine = [c for c in calls if c["agent"] == agent]
        failed = sum(1 for c in mine if not c["ok"])
        assert rows[agent] == (f"{len(mine):,}", str(failed) if failed else "", f"{sum(c['total'] for c in mine):,}"), agent
    assert 'class="bar-chart agent-tokens"' in page and 'class="bar-chart agent-calls"' in page


def test_saving_and_latency_over_time_and_the_partial_last_bucket(fresh):
    store = fresh.store
    now = [1_800_000_000.0]  # 2027-01-15 08:00 UTC
    start = now[0] - 30 * HOUR
    for hour in range(30):  # a finished hour each, then the current one, barely begun
        for i in range(4):
            record(store, "user:7", "tasks", start + hour * HOUR + i * 60, total=100, full=400, latency=1000 + 100 * i)
    record(store, "user:7", "tasks", now[0] + 10, total=100, full=100, latency=9000)
    from scopehub.memory import NewMessage

    store.append(NewMessage(scope="user:7", role="user", text="hi", ts=now[0]))
    client = make_client(fresh, clock=lambda: now[0] + 60)
    page = client.get("/scopes/user:7/charts").text
    saving = points(page.split("Saving over time")[1], "saving")
    assert len(saving) == 30  # the finished hours as a line...
    assert '<line class="partial" data-series="saving"' in page  # ...the current one dashed
    assert "so far: this bucket is not over" in page and "is not over yet: it is drawn dashed" in page
    saving_svg = page.split("Saving over time")[1].split("</svg>")[0]
    assert "75%</title>" in saving_svg and "0%" in saving_svg and "100%</text>" in saving_svg  # 1 - 100/400, and the scale
    latency = page.split("Reply latency")[1].split("</svg>")[0]
    assert "p50: 1,150 ms</title>" in latency and "p95: 1,285 ms</title>" in latency  # 1000..1300 in each hour
    later = make_client(fresh, clock=lambda: now[0] + 2 * HOUR).get("/scopes/user:7/charts").text
    assert 'class="partial"' not in later  # an hour later, the last one is over: drawn as any other
    # The last x label is placed inside the chart, not cut off at its edge.
    svg = page.split("Tokens sent against full history")[1].split("</svg>")[0]
    width = float(re.search(r'<svg[^>]*width="(\d+)"', svg).group(1))
    last_label = max(float(x) for x in re.findall(r'<text class="x-label" x="([\d.]+)"', svg))
    assert last_label <= width - 50


def test_the_sums_follow_new_calls_and_an_erased_scope_exactly(fresh):
    store = fresh.store
    tallies = Tallies(store)
    first = tallies.current()
    assert tallies.reads == 1 and sum(c.calls for c in first.cells.values()) == sum(len(agent_calls(store, s)) for s in store.scopes())
    assert tallies.current() is first and tallies.reads == 1  # nothing new: nothing read
    record(store, "user:2", "notes", 1_700_000_000, total=7, full=70)
    after = tallies.current()
    assert tallies.reads == 1  # one new call: only it was read
    notes = [c for (s, _, a), c in after.cells.items() if s == "user:2" and a == "notes"]
    assert sum(c.sent for c in notes) == 7
    store.erase("user:2")
    erased = tallies.current()
    assert tallies.reads == 2 and not [k for k in erased.cells if k[0] == "user:2"]  # a deletion: all read again
    page = make_client(fresh).get("/").text
    assert 'href="/scopes/user:2"' not in page

"""The console in a real headless browser (Debian's chromium, driven over DevTools) as an
operator uses it: log in, find a message in a scope of 20,000 by a word and by a date,
follow it to its calls, read a failure, filter; correct, forget, cancel, replay, chat in the
sandbox and erase, also on scopes whose ids hold ``/``, ``%`` and quotes; a phone-sized
screen. Skips, saying why, without a browser.

Set ``CONSOLE_SCREENSHOTS=<folder>`` to keep the screenshots (docs/console.png is one).
"""

from __future__ import annotations

import asyncio
import html
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from scopehub.hub.console import ConsoleConfig, create_app
from scopehub.hub.console.urls import scope_url
from scopehub.memory import current_facts, get_fact, get_reminder
from tests.hub.console.cdp import Browser, find_browser
from tests.hub.console.conftest import BIG_SCOPE, FAILING, ODD_SCOPES, TOKEN

uvicorn = pytest.importorskip("uvicorn", reason="the console extra is not installed")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def served(big):
    """The console under uvicorn on a loopback port, with a token and writes allowed."""
    settings = big.data.settings.model_copy(update={"console_token": TOKEN})
    app = create_app(ConsoleConfig(store=big.data.store, settings=settings, allow_writes=True, hub=big.data.hub))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("uvicorn did not start")
        time.sleep(0.05)
    yield big, f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def browser_path() -> str:
    path = find_browser()
    if path is None:
        pytest.skip("no chromium found (apt-get install chromium); the browser test needs a real browser")
    return path


def run(browser_path: str, profile: Path, scenario) -> None:
    async def go() -> None:
        try:
            async with Browser(browser_path, profile) as browser:
                await scenario(browser)
        except (RuntimeError, TimeoutError) as exc:
            if "exited before it listened" in str(exc):
                pytest.skip(f"chromium could not run here: {exc}")
            raise

    asyncio.run(go())


def keep(path: Path) -> None:
    folder = os.environ.get("CONSOLE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(folder) / path.name)


async def log_in(browser: Browser, base: str) -> None:
    await browser.goto(base + scope_url(BIG_SCOPE))
    assert "/login?next=" in await browser.url()
    await browser.submit("form.login", token=TOKEN)
    assert await browser.url() == base + scope_url(BIG_SCOPE)


def test_an_operator_finds_a_message_among_20000_by_a_word_and_by_a_date(served, browser_path, tmp_path):
    big, base = served
    filled = big.filled
    needle = filled["needle_id"]

    async def scenario(browser: Browser) -> None:
        await log_in(browser, base)
        await browser.goto(base + "/")
        page = await browser.html()
        assert "20,000" in page and f'href="{scope_url(BIG_SCOPE)}"' in page
        # By a word: open the scope (click 1), search (click 2): the message, its route and calls.
        await browser.click(f'a[href="{scope_url(BIG_SCOPE)}"]')
        assert "20,000 messages, newest first" in html.unescape(await browser.html())
        await browser.submit("form.finder[action$='/search']", q="zanzibar ferry")
        found = await browser.html()
        assert f'id="m{needle}"' in found and "blue folder" in found and "call #" in found
        # Its anchor opens the timeline around it, the message marked.
        await browser.click(f'#m{needle} a.anchor')
        assert f'class="msg user target" id="m{needle}"' in await browser.html()
        shot = tmp_path / "console_timeline.png"
        await browser.screenshot(shot)
        keep(shot)
        # By a date: open the scope, go to the moment (one form): the message is on that page.
        await browser.goto(base + scope_url(BIG_SCOPE))
        await browser.submit("form.finder:not([action$='/search'])", go=filled["needle_moment"])
        page = await browser.html()
        assert f'id="m{needle}"' in page and f"From {filled['needle_moment']} on" in html.unescape(page)
        # The filters: failed calls only; the newest and oldest pages.
        await browser.goto(base + scope_url(BIG_SCOPE))
        await browser.eval("document.querySelector('form.filters [name=failed]').checked = true")
        await browser.click("form.filters button[type=submit]")
        page = html.unescape(await browser.html())
        assert "failed=1" in await browser.url() and "failed: ModelUnavailable" in page and "1,000+ of" not in page
        await browser.click_link("oldest ⇥")
        oldest = await browser.html()
        assert "⇤ newest" in oldest and "older →" not in oldest

    run(browser_path, tmp_path / "profile-find", scenario)


def test_an_operator_follows_calls_and_reads_why_one_failed(served, browser_path, tmp_path):
    big, base = served
    filled = big.filled
    store = big.data.store

    async def scenario(browser: Browser) -> None:
        await log_in(browser, base)
        await browser.goto(base + scope_url(BIG_SCOPE, "calls", filled["failed_call"]))
        failure = html.unescape(await browser.html())
        assert "This call failed" in failure and "ModelUnavailable" in failure and "[redacted]" in failure
        assert "sk-bench-0123456789" not in failure
        await browser.goto(base + scope_url(BIG_SCOPE, "calls", filled["tool_call"]))
        loop = html.unescape(await browser.html())
        assert "round 1 · 610 ms · 520 in, 22 out" in loop and "add_task(title=" in loop and "list_tasks()" in loop
        await browser.goto(base + scope_url(BIG_SCOPE, "calls", filled["last_call"]))
        dom = await browser.html()
        assert '<svg class="stacked-bar"' in dom and "byte-identical" in dom
        for section in ("persona", "rules", "tools", "facts", "history", "message"):
            assert f'<rect data-section="{section}"' in dom, section
        shot = tmp_path / "console_call.png"
        await browser.screenshot(shot)
        keep(shot)
        await browser.click_link(f"message #{store.calls(BIG_SCOPE)[-1]['message_id']}")  # the call's message, on the timeline
        assert "target" in await browser.html()
        for call in ("router_call", "extractor_call"):
            await browser.goto(base + scope_url(BIG_SCOPE, "calls", filled[call]))
            page = html.unescape(await browser.html())
            assert "<h3>Prompt</h3>" in page and "<h3>Answer</h3>" in page
        await browser.goto(base + scope_url("user:1"))
        await browser.click_link(next(f"call #{c['id']}" for c in store.calls("user:1") if not c["ok"] and c["via"] not in ("router", "extractor")))
        assert FAILING in html.unescape(await browser.html()) and "ModelUnavailable" in await browser.html()

    run(browser_path, tmp_path / "profile-follow", scenario)


def test_an_operator_fixes_facts_and_reminders_on_scopes_with_odd_ids(served, browser_path, tmp_path):
    big, base = served
    store = big.data.store

    async def scenario(browser: Browser) -> None:
        await log_in(browser, base)
        for scope in ODD_SCOPES:
            fact = next(f for f in current_facts(store, scope) if "Odd" in f.text)
            await browser.goto(base + scope_url(scope, "memory"))
            await browser.click(f'a[href="{scope_url(scope, "facts", fact.id, "edit")}"]')
            await browser.submit("form.fact-form", text=f"my name is Even {scope}")
            assert "Confirm: correct fact" in await browser.html() and get_fact(store, scope, fact.id).invalid_at is None
            await browser.click("form.confirm-form button[type=submit]")
            page = html.unescape(await browser.html())
            assert "Fact corrected" in page and f"my name is Even {scope}" in page  # no "CSRF token mismatch"
            corrected = next(f for f in current_facts(store, scope) if "Even" in f.text)
            await browser.click(f'a[href="{scope_url(scope, "facts", corrected.id, "forget")}"]')
            assert "cannot be undone" in await browser.html()
            await browser.click("form.confirm-form button[type=submit]")
            assert "Fact forgotten" in await browser.html() and get_fact(store, scope, corrected.id) is None
        await browser.goto(base + scope_url("user:1", "memory"))
        await browser.click('a[href="/scopes/user:1/reminders/1/cancel"]')
        await browser.click("form.confirm-form button[type=submit]")
        assert "Reminder cancelled." in await browser.html() and not get_reminder(store, "user:1", 1).active
        message = next(m for m in store.messages("user:1") if m.text == "what tasks do I have?")
        await browser.goto(base + scope_url("user:1"))
        await browser.click(f'a[href="{scope_url("user:1", "messages", message.id, "replay")}"]')
        assert 'data-section="facts"' in await browser.html()
        await browser.goto(base + "/sandbox")
        await browser.submit("form.sandbox-form", text="remind me to water the plants")
        page = html.unescape(await browser.html())
        assert "user:sandbox-" in page and "remind me to water the plants" in page and "call #" in page
        scope = ODD_SCOPES[0]
        await browser.goto(base + scope_url(scope, "erase"))
        await browser.submit("form.confirm-form", confirm=scope)
        assert "Scope erased" in await browser.html() and store.count_messages(scope) == 0
        await browser.click("header form.logout button")
        assert "Logged out." in await browser.html()
        await browser.goto(base + "/")
        assert "/login" in await browser.url()

    run(browser_path, tmp_path / "profile-fix", scenario)


def test_a_phone_sized_screen_shows_every_column_and_the_charts_keep_their_labels(served, browser_path, tmp_path):
    _, base = served

    async def scenario(browser: Browser) -> None:
        await log_in(browser, base)
        await browser.width(420, 900)
        await browser.goto(base + "/")
        overflow = await browser.eval("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0  # nothing cut off: the table became one card per scope
        labels = await browser.eval("[...document.querySelectorAll('table.scopes tr:first-child td')].map(td => getComputedStyle(td, '::before').content)")
        assert '"tokens sent"' in labels and '"cost"' in labels
        shot = tmp_path / "console_scopes_420px.png"
        await browser.screenshot(shot)
        keep(shot)
        await browser.width(1280, 1000)
        await browser.goto(base + scope_url(BIG_SCOPE, "charts"))
        inside = await browser.eval(
            "[...document.querySelectorAll('svg.line-chart')].every(svg => [...svg.querySelectorAll('text.x-label')]"
            ".every(t => t.getBBox().x + t.getBBox().width <= svg.viewBox.baseVal.width))"
        )
        assert inside  # the last x label too
        assert await browser.eval("document.querySelectorAll('svg.saving-chart polyline, svg.latency-chart polyline').length") >= 3
        shot = tmp_path / "console_charts.png"
        await browser.screenshot(shot)
        keep(shot)

    run(browser_path, tmp_path / "profile-narrow", scenario)

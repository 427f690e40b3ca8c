"""The console in a real headless browser (Debian's chromium): the timeline and one call's
context render, with the stacked bar and the section texts. Skips, saying why, without one.

Set ``CONSOLE_SCREENSHOTS=<folder>`` to keep the screenshots (docs/console.png is one).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from scopehub.hub.console import ConsoleConfig, create_app
from tests.hub.console.conftest import CONVERSATION, LESSON, populate

uvicorn = pytest.importorskip("uvicorn", reason="the console extra is not installed")

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def _browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no chromium found (apt-get install chromium); the browser test needs a real browser")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    """The console under uvicorn on a loopback port, on a store the hub filled."""
    data = populate(tmp_path)
    port = _free_port()
    app = create_app(ConsoleConfig(store=data.store, settings=data.settings))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("uvicorn did not start")
        time.sleep(0.05)
    yield data, f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def _chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [browser, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(profile)},
    )


def test_timeline_and_call_context_in_a_real_browser(served, tmp_path):
    browser = _browser()
    data, base = served
    # The last call: facts, lessons and a history filtered from other agents' messages.
    call = [c for c in data.store.calls("user:1") if c["agent"] == "tasks"][-1]
    pages = {"timeline": f"{base}/scopes/user:1", "call": f"{base}/scopes/user:1/calls/{call['id']}"}
    shots = {}
    for name, url in pages.items():
        shot = tmp_path / f"console_{name}.png"
        done = _chromium(browser, tmp_path / f"profile-{name}", f"--screenshot={shot}", "--window-size=1280,1600", url)
        if not shot.exists():
            pytest.skip(f"chromium could not run here (exit {done.returncode}): {done.stderr.strip()[-300:]}")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000  # a real picture, not a blank
        shots[name] = shot
    dom = _chromium(browser, tmp_path / "profile-dom", "--dump-dom", pages["call"]).stdout
    # The stacked bar, as the browser parsed it: an SVG with a segment per section sent.
    assert '<svg class="stacked-bar"' in dom
    for section in ("persona", "rules", "tools", "facts", "lessons", "history", "message"):
        assert f'<rect data-section="{section}"' in dom, section
    # The section texts themselves: facts, lessons, a history message, the message.
    assert "ann@example.com" in dom and LESSON in dom and "add buy milk to my tasks" in dom and CONVERSATION[-1] in dom
    timeline = _chromium(browser, tmp_path / "profile-dom2", "--dump-dom", pages["timeline"]).stdout
    assert 'class="mini-bar"' in timeline and "&lt;script&gt;alert(1)&lt;/script&gt;" in timeline
    keep = os.environ.get("CONSOLE_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for shot in shots.values():
            shutil.copy(shot, Path(keep) / shot.name)

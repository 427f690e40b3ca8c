"""Who may use the console: a long token, a session that expires and logs out, a brake on
guessing; loopback only without a token."""

from __future__ import annotations

import re

import pytest

from scopehub.hub.cli import main
from scopehub.hub.console import ConsoleConfig, ConsoleRefused, check_listen, create_app
from scopehub.hub.console.access import COOKIE
from tests.hub.console.conftest import TOKEN, make_client


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("listen", ["0.0.0.0", "192.168.1.7", "::", "example.com"])
def test_without_a_token_the_console_refuses_any_address_but_loopback(listen):
    with pytest.raises(ConsoleRefused, match="HUB_CONSOLE_TOKEN"):
        check_listen(listen, "")
    check_listen(listen, TOKEN)  # with a token it may


@pytest.mark.parametrize("listen", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_token(listen):
    check_listen(listen, "")


@pytest.mark.parametrize("listen", ["0.0.0.0", "127.0.0.1"])
@pytest.mark.parametrize("token", ["x", "fifteen-chars!!"])
def test_a_token_shorter_than_16_characters_is_refused_everywhere(listen, token, populated):
    with pytest.raises(ConsoleRefused, match="at least 16"):
        check_listen(listen, token)
    settings = populated.settings.model_copy(update={"console_token": token})
    with pytest.raises(ConsoleRefused, match=f"is {len(token)} characters"):
        create_app(ConsoleConfig(store=populated.store, settings=settings))


def test_the_command_refuses_to_start_and_says_why(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("HUB_CONSOLE_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    with pytest.raises(SystemExit) as exit_info:
        main(["--db", str(tmp_path / "hub.db"), "console", "--listen", "0.0.0.0"])
    assert exit_info.value.code != 0
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0" in err and "HUB_CONSOLE_TOKEN" in err
    monkeypatch.setenv("HUB_CONSOLE_TOKEN", "x")
    with pytest.raises(SystemExit):
        main(["--db", str(tmp_path / "hub.db"), "console", "--listen", "0.0.0.0"])
    assert "HUB_CONSOLE_TOKEN is 1 characters: use at least 16" in capsys.readouterr().err
    assert not (tmp_path / "hub.db").exists()  # refused before opening anything


def test_the_command_names_the_extra_when_it_is_missing(tmp_path, monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a))
    with pytest.raises(SystemExit):
        main(["--db", str(tmp_path / "hub.db"), "console"])
    err = capsys.readouterr().err
    assert "pip install 'scopehub[console]'" in err and "uvicorn" in err


def test_with_a_token_every_request_needs_it(populated):
    client = make_client(populated, token=TOKEN)
    for i, path in enumerate(("/", "/scopes/user:1", "/scopes/user:1/memory", "/charts", "/scopes/user:1/search?q=milk")):
        assert client.get(path).status_code == 401, path
        if i < 3:  # (five wrong tokens in a minute and the brake is on)
            assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401, path
        assert client.get(path, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200, path
    denied = client.get("/scopes/user:1")
    assert "buy milk" not in denied.text and denied.headers["www-authenticate"].startswith("Bearer")
    assert client.get("/static/console.css").status_code == 200  # the stylesheet: no data in it, the login page needs it


def test_a_browser_is_sent_to_the_login_form_and_back(populated):
    client = make_client(populated, token=TOKEN)
    first = client.get("/scopes/user:1/memory?x=1", headers={"Accept": "text/html"})
    assert first.status_code == 303 and first.headers["location"] == "/login?next=%2Fscopes%2Fuser%3A1%2Fmemory%3Fx%3D1"
    form = client.get(first.headers["location"]).text
    assert 'name="next" value="/scopes/user:1/memory?x=1"' in form and 'type="password"' in form
    wrong = client.post("/login", data={"token": "wrong", "next": "/scopes/user:1/memory?x=1"})
    assert wrong.status_code == 401 and "not this console's token" in wrong.text and COOKIE not in wrong.headers.get("set-cookie", "")
    ok = client.post("/login", data={"token": TOKEN, "next": "/scopes/user:1/memory?x=1"})
    assert ok.status_code == 303 and ok.headers["location"] == "/scopes/user:1/memory?x=1"
    cookie = ok.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=strict" in cookie and "Max-Age=43200" in cookie
    assert TOKEN not in cookie  # a signed session id, never the token
    assert client.get("/scopes/user:1/memory").status_code == 200
    # Only this console's own paths after a login: no open redirect.
    assert client.post("/login", data={"token": TOKEN, "next": "//evil.example/x"}).headers["location"] == "/"
    assert client.post("/login", data={"token": TOKEN, "next": "https://evil.example"}).headers["location"] == "/"


def test_a_session_can_be_logged_out_and_its_cookie_is_refused_after(populated):
    client = make_client(populated, token=TOKEN)
    client.post("/login", data={"token": TOKEN, "next": "/"})
    cookie = client.cookies.get(COOKIE)
    page = client.get("/").text
    logout = re.search(r'<form class="inline logout" method="post" action="/logout"><input type="hidden" name="csrf" value="(\w+)">', page)
    assert logout, "a logged-in page offers to log out"
    assert client.post("/logout", data={"csrf": "forged"}).status_code == 403  # another site cannot log you out
    out = client.post("/logout", data={"csrf": logout.group(1)})
    assert out.status_code == 303 and out.headers["location"].startswith("/login?done=logged-out")
    assert "Logged out." in client.get(out.headers["location"]).text
    client.cookies.set(COOKIE, cookie)  # the old cookie, replayed
    assert client.get("/").status_code == 401


def test_a_session_expires(populated):
    clock = Clock()
    client = make_client(populated, token=TOKEN, clock=clock)
    client.post("/login", data={"token": TOKEN, "next": "/"})
    assert client.get("/").status_code == 200
    clock.now += 11 * 3600
    assert client.get("/").status_code == 200
    clock.now += 2 * 3600  # past the default 12 hours
    assert client.get("/").status_code == 401


def test_a_forged_or_altered_cookie_is_refused(populated):
    client = make_client(populated, token=TOKEN)
    client.post("/login", data={"token": TOKEN, "next": "/"})
    sid, expires, signature = client.cookies.get(COOKIE).split(".")
    for forged in (f"{sid}.{int(expires) + 999999}.{signature}", f"x{sid}.{expires}.{signature}", TOKEN, f"{sid}.{expires}.{'0' * 64}"):
        other = make_client(populated, token=TOKEN)
        other.cookies.set(COOKIE, forged)
        assert other.get("/").status_code == 401, forged


def test_wrong_tokens_are_braked(populated):
    """300 guesses: after five wrong ones in a minute, every try is refused unread (even the right one)."""
    client = make_client(populated, token=TOKEN)
    codes = [client.get("/", headers={"Authorization": f"Bearer guess-{i:04d}-guess"}).status_code for i in range(300)]
    assert codes[:5] == [401] * 5 and set(codes[5:]) == {429}
    braked = client.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert braked.status_code == 429 and int(braked.headers["retry-after"]) >= 1
    assert client.post("/login", data={"token": TOKEN}).status_code == 429
    assert client.get(f"/?token={TOKEN}").status_code == 429


def test_the_brake_lets_the_right_token_through_once_the_window_has_passed(populated):
    from scopehub.hub.console.session import LoginBrake

    now = [0.0]
    brake = LoginBrake(per_client=3, overall=10, window_s=60, clock=lambda: now[0])
    for _ in range(3):
        brake.failed("10.0.0.1")
    assert brake.wait("10.0.0.1") == 60 and brake.wait("10.0.0.2") == 0  # per client
    now[0] = 61
    assert brake.wait("10.0.0.1") == 0
    for i in range(10):
        brake.failed(f"10.0.1.{i}")  # many addresses, one try each: the overall limit
    assert brake.wait("10.0.0.9") > 0


def test_a_token_in_the_url_becomes_a_session_and_leaves_the_url(populated):
    client = make_client(populated, token=TOKEN)
    assert client.get("/scopes/user:1?token=wrong").status_code == 401
    response = client.get(f"/scopes/user:1?n=5&token={TOKEN}")
    assert response.status_code == 303 and response.headers["location"] == "/scopes/user:1?n=5"
    assert TOKEN not in response.headers["set-cookie"]
    assert client.get("/scopes/user:1").status_code == 200  # the client kept the cookie
    client.cookies.clear()
    assert client.get("/scopes/user:1").status_code == 401


def test_a_token_is_needed_on_loopback_too_when_one_is_set(populated):
    assert make_client(populated, token=TOKEN, host="127.0.0.1").get("/").status_code == 401


def test_without_a_token_only_loopback_host_names_are_answered(populated):
    """A page that rebinds its own name to 127.0.0.1 (DNS rebinding) gets nothing."""
    assert make_client(populated, host="127.0.0.1").get("/").status_code == 200
    assert make_client(populated, host="localhost:8765").get("/").status_code == 200
    assert make_client(populated, host="[::1]:8765").get("/").status_code == 200
    rebound = make_client(populated, host="attacker.example").get("/scopes/user:1")
    assert rebound.status_code == 403 and "buy milk" not in rebound.text

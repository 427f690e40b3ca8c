"""Who may use the console: a token for every request when one is set, loopback only without one."""

from __future__ import annotations

import pytest

from scopehub.hub.cli import main
from scopehub.hub.console import ConsoleRefused, check_listen
from scopehub.hub.console.access import COOKIE
from tests.hub.console.conftest import make_client

TOKEN = "s3cret-token-for-tests"


@pytest.mark.parametrize("listen", ["0.0.0.0", "192.168.1.7", "::", "example.com"])
def test_without_a_token_the_console_refuses_any_address_but_loopback(listen):
    with pytest.raises(ConsoleRefused, match="HUB_CONSOLE_TOKEN"):
        check_listen(listen, "")
    check_listen(listen, TOKEN)  # with a token it may


@pytest.mark.parametrize("listen", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_token(listen):
    check_listen(listen, "")


def test_the_command_refuses_to_start_and_says_why(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("HUB_CONSOLE_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    with pytest.raises(SystemExit) as exit_info:
        main(["--db", str(tmp_path / "hub.db"), "console", "--listen", "0.0.0.0"])
    assert exit_info.value.code != 0
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0" in err and "HUB_CONSOLE_TOKEN" in err
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
    for path in ("/", "/scopes/user:1", "/scopes/user:1/memory", "/charts", "/static/console.css"):
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401, path
        assert client.get(path, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200, path
    denied = client.get("/scopes/user:1")
    assert "buy milk" not in denied.text and denied.headers["www-authenticate"].startswith("Bearer")


def test_a_token_in_the_url_becomes_an_httponly_cookie_and_leaves_the_url(populated):
    client = make_client(populated, token=TOKEN)
    assert client.get("/scopes/user:1?token=wrong").status_code == 401
    response = client.get(f"/scopes/user:1?n=5&token={TOKEN}")
    assert response.status_code == 303 and response.headers["location"] == "/scopes/user:1?n=5"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
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

"""The database away for a moment, as people see it: the terminal chat keeps the message and
answers it once the store is back; the webhook answers 503 (Telegram sends the update
again) instead of "received" for what it could not store; ``/healthz`` says 503 without
holding up the worker's event loop. The store here is SQLite with calls made to fail,
the way PostgreSQL's pool fails while its server is down (``StoreUnavailable``)."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time

import httpx
import pytest

from scopehub.hub.models.testing import ScriptedModel
from scopehub.hub.orchestrator import Deps, Hub
from scopehub.hub.settings import load_settings
from scopehub.hub.transports import terminal
from scopehub.hub.transports.telegram.webhook import SECRET_HEADER
from scopehub.hub.transports.terminal import TerminalChat
from scopehub.memory import Store, StoreUnavailable
from tests.fakes.bot_api import FakeBotAPI
from tests.helpers import registry_of

TOKEN = "123456:away"
SECRET = "away-webhook-secret"  # the webhook refuses an update without its secret token


class AwayStore(Store):
    """A store whose ``method`` fails as a database that is away would, ``times`` times."""

    def __init__(self, path, failures: dict[str, int]) -> None:
        super().__init__(path)
        self.failures = dict(failures)
        self.unavailable_for: float | None = None

    def _maybe_fail(self, method: str) -> None:
        if self.failures.get(method, 0) > 0:
            self.failures[method] -= 1
            raise StoreUnavailable("PostgreSQL at the test's server is unavailable; try again shortly")

    def append(self, message):
        self._maybe_fail(f"append:{message.role}")
        return super().append(message)

    def record_call(self, call):
        self._maybe_fail("record_call")
        return super().record_call(call)

    def find_ext(self, scope, ext_id):
        self._maybe_fail("find_ext")
        return super().find_ext(scope, ext_id)


def hub_on(store: Store, model: ScriptedModel) -> Hub:
    return Hub(Deps(store=store, settings=load_settings(db=store.path, digest_every=0), model=model), registry_of())


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(terminal, "RETRY_FIRST", 0.01)
    monkeypatch.setattr(terminal, "RETRY_MAX", 0.02)


def chat_lines(hub: Hub, lines: list[str]) -> str:
    out = io.StringIO()
    chat = TerminalChat(hub, "user:local", out=out)
    with asyncio.Runner() as runner:
        chat.run_lines(runner, [line + "\n" for line in lines])
        runner.run(hub.drain())
    return out.getvalue()


def texts(store: Store) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in store.messages("user:local")]


# -- the terminal chat ----------------------------------------------------------------------------


def test_the_terminal_keeps_a_message_the_database_could_not_take_and_answers_every_line(tmp_path, capsys):
    store = AwayStore(tmp_path / "hub.db", {"append:user": 3})
    model = ScriptedModel(default="noted")
    out = chat_lines(hub_on(store, model), ["first thing", "second thing", "third thing"])

    assert out.count("noted\n") == 3  # every line answered, none dropped after the outage
    err = capsys.readouterr().err
    assert err.count("the database is unavailable; your message is kept and will be answered") == 1
    assert texts(store) == [
        ("user", "first thing"), ("agent", "noted"),
        ("user", "second thing"), ("agent", "noted"),
        ("user", "third thing"), ("agent", "noted"),
    ]  # fmt: skip
    assert [call.messages[-1]["content"] for call in model.calls] == ["first thing", "second thing", "third thing"]


def test_one_message_gives_up_after_its_patience_and_says_it_was_not_stored(tmp_path, capsys):
    # `chat --message` in a script: a database that stays away must not hang it for ever.
    store = AwayStore(tmp_path / "hub.db", {"append:user": 10_000})
    model = ScriptedModel(default="noted")
    chat = TerminalChat(hub_on(store, model), "user:local", out=io.StringIO(), patience=0.2)
    with asyncio.Runner() as runner, pytest.raises(StoreUnavailable, match=r"unavailable for 0 s .*; it was not stored"):
        runner.run(chat.send("buy milk"))
    assert "trying again for up to 0 s" in capsys.readouterr().err
    assert texts(store) == [] and model.calls == []  # nothing half-done, no model call


def test_chat_message_on_a_database_that_stays_away_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    from scopehub.hub.cli.main import main
    from scopehub.hub.models.testing import ScriptedModel as Scripted

    monkeypatch.setattr("scopehub.hub.app.build_model", lambda settings: Scripted(default="noted"))
    monkeypatch.setattr(Store, "append", lambda self, message: (_ for _ in ()).throw(StoreUnavailable("the test's database is away")))
    monkeypatch.setenv("HUB_CLAIM_TTL", "1")
    monkeypatch.setenv("HUB_ROUTER_EMBEDDER", "none")
    with pytest.raises(SystemExit) as exited:
        main(["--db", str(tmp_path / "hub.db"), "chat", "-m", "buy milk"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 2  # the retry notice, then one error line
    assert err.splitlines()[-1].startswith("error: ") and err.rstrip().endswith("it was not stored")


def test_a_turn_that_failed_after_storing_answers_the_stored_message_never_a_second_copy(tmp_path, capsys):
    # The reply is stored, then recording the call fails: the message must not be stored again.
    store = AwayStore(tmp_path / "hub.db", {"record_call": 1, "append:agent": 1})
    model = ScriptedModel(default="here you are")
    out = chat_lines(hub_on(store, model), ["what is on my list"])

    assert out.count("here you are\n") == 1
    assert [text for role, text in texts(store) if role == "user"] == ["what is on my list"]
    assert "your message is kept" in capsys.readouterr().err


# -- the webhook worker -----------------------------------------------------------------------------


class Worker:
    """A webhook worker on its own loop in a thread, with the fake Bot API; post() from the test."""

    def __init__(self, hub: Hub, tg: FakeBotAPI) -> None:
        self.hub, self.tg = hub, tg
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.port = 0
        self._stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=lambda: self.loop.run_until_complete(self._run()), daemon=True)

    async def _run(self) -> None:
        from scopehub.eval.workers import _free_port
        from scopehub.hub.transports.telegram import build_application
        from scopehub.hub.transports.telegram.webhook import WebhookServer

        app = build_application(self.hub, self.hub.settings, token=TOKEN, base_url=self.tg.base_url)
        await app.initialize()
        await app.post_init(app)
        await app.start()
        self.port = _free_port()
        server = WebhookServer(app, listen="127.0.0.1", port=self.port, url_path="hook", secret_token=SECRET)
        server.start()
        self._stop = asyncio.Event()
        self.ready.set()
        await self._stop.wait()
        await server.stop()
        await app.stop()
        await app.post_stop(app)
        await app.shutdown()

    def __enter__(self) -> Worker:
        self.thread.start()
        assert self.ready.wait(60)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(30)

    def post(self, update: dict) -> int:
        return httpx.post(f"http://127.0.0.1:{self.port}/hook", content=json.dumps(update),
                          headers={"Content-Type": "application/json", SECRET_HEADER: SECRET}, timeout=30).status_code  # fmt: skip

    def health(self) -> httpx.Response:
        return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=30)


def test_an_update_whose_redelivery_check_failed_is_answered_503_then_stored_and_answered_once(tmp_path):
    store = AwayStore(tmp_path / "hub.db", {"find_ext": 1})
    with FakeBotAPI(token=None) as tg, Worker(hub_on(store, ScriptedModel(default="hello back")), tg) as worker:
        update = tg.make_update(42, "hello", user_id=42)
        # The lookup of an earlier delivery failed before anything was stored: not "received".
        assert worker.post(update) == 503
        assert store.find_ext("user:42", f"42:{update['message']['message_id']}") is None
        assert worker.post(update) == 200  # Telegram's retry
        tg.wait_sent(1, 42, timeout=30)
        assert worker.post(update) == 200  # a redelivery after the answer: stored and answered once
        time.sleep(1.0)
        assert [m["text"] for m in tg.sent(42)] == [tg.sent(42)[0]["text"]] and "hello back" in tg.sent(42)[0]["text"]
    assert [(m.role, m.text) for m in store.messages("user:42")] == [("user", "hello"), ("agent", "hello back")]


def test_while_the_store_knows_its_database_is_down_every_update_is_answered_503_at_once(tmp_path):
    store = AwayStore(tmp_path / "hub.db", {})
    with FakeBotAPI(token=None) as tg, Worker(hub_on(store, ScriptedModel(default="back")), tg) as worker:
        store.unavailable_for = 3.0
        update = tg.make_update(7, "are you there", user_id=7)
        assert worker.post(update) == 503
        health = worker.health()
        assert health.status_code == 503 and "database unavailable" in health.text
        store.unavailable_for = None  # the pool reached the server again
        assert worker.post(update) == 200
        tg.wait_sent(1, 7, timeout=30)
        assert worker.health().status_code == 200


def test_healthz_answers_503_at_its_deadline_while_the_database_hangs(tmp_path, monkeypatch):
    from scopehub.hub.transports.telegram import webhook

    monkeypatch.setattr(webhook, "HEALTH_TIMEOUT", 0.3)
    release = threading.Event()

    class HangingStore(AwayStore):
        def query(self, sql, params=()):
            if sql == "SELECT 1" and not release.is_set():
                release.wait(20)  # a server that took the connection and never answers
            return super().query(sql, params)

    store = HangingStore(tmp_path / "hub.db", {})
    with FakeBotAPI(token=None) as tg, Worker(hub_on(store, ScriptedModel(default="ok")), tg) as worker:
        try:
            health = worker.health()
            assert health.status_code == 503 and "did not answer" in health.text
            # Meanwhile the loop serves the rest: an update is stored and answered.
            assert worker.post(tg.make_update(9, "still here?", user_id=9)) == 200
            tg.wait_sent(1, 9, timeout=30)
        finally:
            release.set()
        lag = worker.health().status_code
        assert lag == 200

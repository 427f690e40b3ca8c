"""A store the real hub filled (scripted model), and the console on it through Starlette's TestClient."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the console extra is not installed")
pytest.importorskip("jinja2", reason="the console extra is not installed")

from starlette.testclient import TestClient

from scopehub.hub import Inbound
from scopehub.hub.app import build_hub
from scopehub.hub.console import ConsoleConfig, create_app
from scopehub.hub.facts import remember
from scopehub.hub.models.testing import ScriptedModel
from scopehub.hub.orchestrator import Hub
from scopehub.hub.settings import Settings, load_settings
from scopehub.memory import (
    DigestLine,
    acquire_claim,
    add_knowledge,
    add_lesson,
    add_reminder,
    add_task,
    emit_event,
    post_to_channel,
    save_digest,
)

HOSTILE = "<script>alert(1)</script> {{7*7}}"
OTHER_SECRET = "zebra-42 is the other customer's secret"
FACT = "my email is ann@example.com"
LESSON = "Confirm the due date back to the person."
CHANNEL_POST = "inbox: the boss wants the report by friday"
CONVERSATION = (
    "add buy milk to my tasks",
    "remind me to call Anna tomorrow at 9",
    "note that the wifi password is on the fridge",
    HOSTILE,
    "here is an email from my boss: the report is due friday",
    "save a note: Anna's birthday is in May",
    "what tasks do I have?",
)


@dataclass
class Populated:
    """The filled store and what the tests need to know about it."""

    hub: Hub
    model: ScriptedModel
    settings: Settings
    maildir: Path

    @property
    def store(self):
        return self.hub.store


def _ask(hub: Hub, text: str, scope: str = "user:1", sender: str = "ann") -> None:
    async def go() -> None:
        reply = await hub.handle(Inbound(scope=scope, text=text, sender=sender, chat=scope.split(":")[1]))
        await hub.after_send(reply)

    asyncio.run(go())


def populate(tmp_path: Path, db: str | None = None) -> Populated:
    """user:1 with a conversation, facts, lessons, channel news, tasks, a reminder, events,
    a claim, a digest and knowledge; user:2 with a secret of its own; a Maildir inbox file.

    ``db`` is another database (a PostgreSQL URL); by default a SQLite file in ``tmp_path``."""
    maildir = tmp_path / "maildir"
    settings = load_settings(db=db or str(tmp_path / "hub.db"), maildir=str(maildir), console_token="")
    model = ScriptedModel(default="ok, done")
    hub = build_hub(settings, model=model)
    store = hub.store
    remember(store, "user:1", FACT)
    add_lesson(store, "user:1", "tasks", LESSON, kind="improvement", importance="high")
    post_to_channel(store, "user:1", "team", "inbox", CHANNEL_POST)
    for text in CONVERSATION:
        _ask(hub, text)
    _ask(hub, OTHER_SECRET, scope="user:2", sender="bob")
    remember(store, "user:2", "my phone is 555-0199")
    now = time.time()
    add_task(store, "user:1", "buy milk", "friday")
    add_reminder(store, "user:1", "call Anna", now + 86400, chat="1")
    emit_event(store, "user:1", "tasks", "task.created", {"task_id": 1, "number": 1, "title": "buy milk", "due": None})
    acquire_claim(store, "user:1", "digest", "worker-1", note="compacting", ttl=600)
    first = store.messages("user:1", limit=2)
    save_digest(
        store, "user:1", [DigestLine("Ann keeps her tasks here.", (first[0].id,), now)], upto_id=first[-1].id, covered=2, kind="full", mode="extractive"
    )
    add_knowledge(store, "user:1", "Ann shops on fridays.", importance=0.7, messages=[first[0].id], ts=now)
    inbox = maildir / "user-1" / "hub" / "new"
    inbox.mkdir(parents=True)
    (inbox / "1700000000.M1.waiting.md").write_text("---\nsubject: hi\n---\nbody\n", encoding="utf-8")
    return Populated(hub=hub, model=model, settings=settings, maildir=maildir)


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Populated:
    return populate(tmp_path_factory.mktemp("console"))


@pytest.fixture
def fresh(tmp_path: Path) -> Populated:
    """A store of its own, for tests that change it."""
    return populate(tmp_path)


ClientFactory = Callable[..., TestClient]


SECRET = b"csrf secret of the tests"


def make_client(data: Populated, *, allow_writes: bool = False, token: str = "", host: str = "127.0.0.1") -> TestClient:
    settings = data.settings.model_copy(update={"console_token": token})
    app = create_app(ConsoleConfig(store=data.store, settings=settings, allow_writes=allow_writes, secret=SECRET))
    return TestClient(app, base_url=f"http://{host}", follow_redirects=False)


@pytest.fixture(scope="module")
def client(populated: Populated) -> TestClient:
    return make_client(populated)

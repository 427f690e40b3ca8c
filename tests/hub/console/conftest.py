"""A store the real hub filled (one scripted model for the agents, the LLM router and the
fact extractor), and the console on it through Starlette's TestClient; a long scope for
the browser test, filled once per session."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the console extra is not installed")
pytest.importorskip("jinja2", reason="the console extra is not installed")

from starlette.testclient import TestClient

from scopehub.hub import Inbound
from scopehub.hub.app import build_hub
from scopehub.hub.console import ConsoleConfig, create_app
from scopehub.hub.errors import ModelUnavailable
from scopehub.hub.facts import remember
from scopehub.hub.facts.extraction import EXTRACTOR_PROMPT
from scopehub.hub.models import ModelResponse, ToolCall
from scopehub.hub.models.testing import ScriptedModel
from scopehub.hub.orchestrator import Hub
from scopehub.hub.settings import Settings, load_settings
from scopehub.memory import (
    DigestLine,
    acquire_claim,
    add_knowledge,
    add_lesson,
    add_reminder,
    add_vault_item,
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
FAILING = "please book the dentist for monday"  # the agent's model fails on this one
API_KEY = "hunter2-console-key"  # the deployment's key (no shape gives it away): never shown, even inside an error
PROVIDER_ERROR = f"provider returned 503 Service Unavailable (key {API_KEY})"
# What the LLM router answers for each message (valid JSON but for the hostile one: unusable).
ROUTER_ANSWERS = {
    "add buy milk to my tasks": '{"agent": "tasks"}',
    "remind me to call Anna tomorrow at 9": '{"agent": "reminders"}',
    "note that the wifi password is on the fridge": '{"agent": "notes"}',
    HOSTILE: "I think reminders?",
    "here is an email from my boss: the report is due friday": '{"agent": "inbox", "also_sees": ["tasks"]}',
    "save a note: Anna's birthday is in May": '{"agent": "notes"}',
    "what tasks do I have?": '{"agent": "tasks"}',
    FAILING: '{"agent": "general"}',
}
# The extractor proposes one fact in the person's words and one never said (refused).
EXTRACTED = {"text": "Anna's birthday is in May", "key": "anna.birthday", "kind": "other", "op": "add"}
INVENTED = {"text": "User lives in Paris", "key": "user.city", "kind": "identity", "op": "add"}
# Scope ids that need encoding in a URL, each with a few messages of its own.
ODD_SCOPES = ("user:a/b", "user:100%", "group:\"q'x\"")
NOTE, EMAIL, DRAFT = "The gate code is 4521", "Invoice 77 is overdue, please pay by friday", "Dear Sam, Thursday works for me."


def _answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """The scripted model behind the agents, the LLM router and the fact extractor."""
    system, last = messages[0]["content"], messages[-1]["content"]
    if system == EXTRACTOR_PROMPT:
        facts = [EXTRACTED, INVENTED] if "birthday" in last else []
        return ModelResponse(content=json.dumps({"facts": facts}), prompt_tokens=150, completion_tokens=40)
    if system.startswith("Route the new message"):
        said = last.rsplit("New message: ", 1)[-1]
        return ModelResponse(content=ROUTER_ANSWERS.get(said, '{"agent": "general"}'), prompt_tokens=90, completion_tokens=8)
    person = [m for m in messages if m["role"] == "user"][-1]["content"]
    if FAILING in person:
        raise ModelUnavailable(PROVIDER_ERROR)
    if "add buy milk" in person and messages[-1]["role"] != "tool":
        call = ToolCall("call_1", "add_task", json.dumps({"title": "buy milk <fresh>", "due": "friday"}))
        return ModelResponse(tool_calls=(call,), prompt_tokens=400, completion_tokens=20)
    if messages[-1]["role"] == "tool":
        return ModelResponse(content="Added buy milk.", prompt_tokens=430, completion_tokens=6)
    return ModelResponse(content="ok, done", prompt_tokens=300, completion_tokens=4)


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


def ask(hub: Hub, text: str, scope: str = "user:1", sender: str = "ann") -> None:
    async def go() -> None:
        reply = await hub.handle(Inbound(scope=scope, text=text, sender=sender, chat=scope.split(":", 1)[1]))
        await hub.after_send(reply)

    asyncio.run(go())


def populate(tmp_path: Path, db: str | None = None) -> Populated:
    """user:1 with a conversation (a tool call, a failed call, router and extractor calls),
    facts, lessons, channel news, notes, an email, a draft, a reminder, events, a claim, a
    digest and knowledge; user:2 with a secret of its own; scopes with odd ids; a Maildir file.

    ``db`` is another database (a PostgreSQL URL); by default a SQLite file in ``tmp_path``."""
    maildir = tmp_path / "maildir"
    settings = load_settings(
        db=db or str(tmp_path / "hub.db"), maildir=str(maildir), console_token="", api_key=API_KEY, router_model="scripted-router"
    )
    model = ScriptedModel(default=_answer)
    hub = build_hub(settings, model=model)
    hub.deps.router_model = model  # the same script answers as the LLM router
    store = hub.store
    remember(store, "user:1", FACT)
    add_lesson(store, "user:1", "tasks", LESSON, kind="improvement", importance="high")
    post_to_channel(store, "user:1", "team", "inbox", CHANNEL_POST)
    for text in CONVERSATION:
        ask(hub, text)
    ask(hub, FAILING)
    ask(hub, OTHER_SECRET, scope="user:2", sender="bob")
    remember(store, "user:2", "my phone is 555-0199")
    for scope in ODD_SCOPES:
        ask(hub, f"add call the plumber to my tasks for {scope}", scope=scope)
        remember(store, scope, f"my name is Odd {scope}")
    now = time.time()
    add_reminder(store, "user:1", "call Anna", now + 86400, chat="1")
    emit_event(store, "user:1", "tasks", "task.created", {"task_id": 1, "number": 1, "title": "buy milk", "due": None})
    acquire_claim(store, "user:1", "digest", "worker-1", note="compacting", ttl=600)
    first = store.messages("user:1", limit=2)
    save_digest(
        store, "user:1", [DigestLine("Ann keeps her tasks here.", (first[0].id,), now)], upto_id=first[-1].id, covered=2, kind="full", mode="extractive"
    )
    add_knowledge(store, "user:1", "Ann shops on fridays.", importance=0.7, messages=[first[0].id], ts=now)
    add_vault_item(store, "user:1", "note", NOTE, title="gate code", agent="notes")
    add_vault_item(store, "user:1", "email", EMAIL, title="Invoice 77", meta={"from": "billing@example.com"}, agent="inbox")
    add_vault_item(store, "user:1", "draft", DRAFT, title="Re: Thursday", meta={"to": "sam@example.com"}, agent="inbox")
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
TOKEN = "s3cret-token-for-tests"


def make_client(
    data: Populated, *, allow_writes: bool = False, token: str = "", host: str = "127.0.0.1", clock: Callable[[], float] | None = None
) -> TestClient:
    settings = data.settings.model_copy(update={"console_token": token})
    config = ConsoleConfig(store=data.store, settings=settings, allow_writes=allow_writes, secret=SECRET, hub=data.hub)
    if clock is not None:
        config.clock = clock
    return TestClient(create_app(config), base_url=f"http://{host}", follow_redirects=False)


@pytest.fixture(scope="module")
def client(populated: Populated) -> TestClient:
    return make_client(populated)


def agent_calls(store, scope: str = "user:1") -> list[dict[str, Any]]:
    return [c for c in store.calls(scope) if c["via"] not in ("router", "extractor")]


def hub_calls(store, via: str, scope: str = "user:1") -> list[dict[str, Any]]:
    return [c for c in store.calls(scope) if c["via"] == via]


BIG_SCOPE = "user:big"
BIG_MESSAGES = 20_000


@dataclass
class Big:
    """The populated store with a scope of 20,000 messages beside the small ones."""

    data: Populated
    filled: dict[str, Any]


@pytest.fixture(scope="session")
def big(tmp_path_factory: pytest.TempPathFactory) -> Big:
    """Filled once per test session: batched appends, one commit per 5,000 (about 10 s here)."""
    from scopehub.eval.console_bench import fill_store

    data = populate(tmp_path_factory.mktemp("console-big"))
    filled = fill_store(data.store, BIG_MESSAGES, scope=BIG_SCOPE, others=())
    return Big(data=data, filled=dict(filled))

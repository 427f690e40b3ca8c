"""What every page of the console shares: its configuration, the templates, the request
helpers (the scope of the URL, numbers from the query), CSRF and the "done" notices.

The pages (:mod:`.pages`) are plain functions of a :class:`Console`; Starlette runs the
synchronous ones in its thread pool, and the store serialises access behind its own lock.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote
from zoneinfo import ZoneInfo

import jinja2
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from scopehub.hub.console import queries
from scopehub.hub.console.access import Gate, check_token
from scopehub.hub.console.charts import SECTION_COLOURS
from scopehub.hub.console.session import LoginBrake, Sessions, Signer
from scopehub.hub.console.tally import Tallies
from scopehub.hub.console.urls import page_url, scope_url
from scopehub.hub.context import AgentPrompt
from scopehub.hub.context.tokens import Tokenizer, get_tokenizer
from scopehub.hub.settings import Settings
from scopehub.memory import InvalidScope, MemoryStore, validate_scope

__all__ = ["DONE", "MAX_ID", "OPERATOR", "Console", "ConsoleConfig"]

HERE = Path(__file__).resolve().parent
MAX_ID = 2**63 - 1  # the largest row id SQL integers hold
OPERATOR = "operator"  # who the console's writes are attributed to in the event log
DONE_SECONDS = 300  # a "done" notice is shown for this long after its action, then never again
# What a write action reports after its redirect (a code in the URL, never text from it).
DONE = {
    "fact-added": "Fact added.",
    "fact-edited": "Fact corrected: the old text is kept in the fact history.",
    "fact-forgotten": "Fact forgotten (with its older versions).",
    "fact-missing": "No such fact: nothing was changed.",
    "reminder-cancelled": "Reminder cancelled.",
    "reminder-missing": "No such active reminder: nothing was changed.",
    "scope-erased": "Scope erased from the store and the Maildir.",
    "logged-out": "Logged out.",
}


@dataclass
class ConsoleConfig:
    """What the console runs on: the store, the settings, the agents' prompts, the write flag.

    ``hub`` (or ``hub_factory``, called on first need) runs the replay and the sandbox chat;
    without either they say the console was started without a hub.
    """

    store: MemoryStore
    settings: Settings
    allow_writes: bool = False
    prompts: dict[str, AgentPrompt] = field(default_factory=dict)
    tokenizer: Tokenizer | None = None
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))  # signatures, per process
    session_hours: float = 12.0
    hub: Any = None
    hub_factory: Callable[[], Any] | None = None
    clock: Callable[[], float] = time.time


class Console:
    """The shared state and helpers of the console's pages."""

    def __init__(self, config: ConsoleConfig) -> None:
        check_token(config.settings.console_token)
        if not config.prompts:
            from scopehub.agents import discover_agents
            from scopehub.hub.context import agent_prompt

            config.prompts = {spec.name: agent_prompt(spec) for spec in discover_agents()}
        self.config = config
        self.store = config.store
        self.settings = config.settings
        self.prompts = config.prompts
        self.tokenizer = config.tokenizer or get_tokenizer()
        self.zone = ZoneInfo(config.settings.timezone)
        self.signer = Signer(config.secret)
        self.gate = Gate(
            token=config.settings.console_token,
            sessions=Sessions(self.signer, config.session_hours * 3600, clock=config.clock),
            brake=LoginBrake(),
        )
        self.templates = self._templates()
        self.tallies = Tallies(self.store)
        self._hub_lock = threading.Lock()

    # -- templates ----------------------------------------------------------------------
    def when(self, ts: float | None) -> str:
        if ts is None:
            return ""
        return datetime.fromtimestamp(float(ts), tz=UTC).astimezone(self.zone).strftime("%Y-%m-%d %H:%M:%S")

    def _templates(self) -> Jinja2Templates:
        # Autoescape on for every template: message texts are data, never HTML.
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True, undefined=jinja2.StrictUndefined
        )

        def num(value: float | None) -> str:
            return "" if value is None else f"{round(value):,}"

        def saving(sent: int, full: int) -> str:
            return f"{100 * (1 - sent / full):.0f}%" if full else "–"

        env.filters.update(when=self.when, num=num)
        env.globals.update(
            scope_url=scope_url,
            page_url=page_url,
            saving=saving,
            zone=self.settings.timezone,
            allow_writes=self.config.allow_writes,
            token_required=bool(self.settings.console_token),
            colours=SECTION_COLOURS,
            csrf=self.csrf,
            installed_agents=frozenset(self.prompts),
        )
        return Jinja2Templates(env=env)

    def page(self, request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return self.templates.TemplateResponse(request, name, context, status_code=status_code)

    # -- the request ----------------------------------------------------------------------
    def scope_of(self, request: Request) -> str:
        """The scope named in the URL, validated and present in the store (else 404)."""
        raw = request.path_params["scope"]
        try:
            scope = validate_scope(raw)
        except InvalidScope:
            raise HTTPException(404, f"{raw!r} is not a scope (user:<id> or group:<id>)") from None
        if not queries.scope_exists(self.store, scope):
            raise HTTPException(404, f"no data of {scope}")
        return scope

    @staticmethod
    def path_id(request: Request, name: str) -> int:
        """An id from the path; one no database row can have is a 404, not an overflow."""
        value = int(request.path_params[name])
        if value > MAX_ID:
            raise HTTPException(404, f"no such {name.split('_')[0]}")
        return value

    @staticmethod
    def int_param(request: Request, name: str, default: int | None, *, low: int = 0, high: int | None = MAX_ID) -> int | None:
        """A whole number from the query string, within bounds (else 400)."""
        raw = request.query_params.get(name, "").strip()
        if raw == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            raise HTTPException(400, f"{name} must be a whole number, not {raw!r}") from None
        if value < low or (high is not None and value > high):
            raise HTTPException(400, f"{name} must be between {low} and {high if high is not None else 'any'}")
        return value

    # -- writes ---------------------------------------------------------------------------
    def require_writes(self) -> None:
        if not self.config.allow_writes:
            raise HTTPException(403, "The console is read-only: start it with --allow-writes to change anything.")

    @staticmethod
    def session_of(request: Request) -> str:
        return str(request.scope.get("state", {}).get("session", ""))

    def csrf(self, request: Request, action: str, *parts: object) -> str:
        """The token a write form must carry: bound to this process, the session, the
        action and its decoded arguments (the scope id, the row), never to a URL's spelling."""
        return self.signer.sign("csrf", self.session_of(request), action, *parts)

    async def checked_form(self, request: Request, action: str, *parts: object) -> dict[str, str]:
        """The form of a write action after its origin and CSRF token are checked."""
        self.require_writes()
        return await self._signed_form(request, action, *parts)

    async def check_logout(self, request: Request) -> None:
        """A logout is a form too (another site must not end the session): the same checks, on any console."""
        await self._signed_form(request, "logout")

    async def _signed_form(self, request: Request, action: str, *parts: object) -> dict[str, str]:
        origin = request.headers.get("origin")
        if origin and origin != "null" and origin.rstrip("/") != f"{request.url.scheme}://{request.url.netloc}":
            raise HTTPException(403, "cross-site request refused")
        form = await request.form()
        sent = str(form.get("csrf", ""))
        if not self.signer.check(sent, "csrf", self.session_of(request), action, *parts):
            raise HTTPException(403, "the form is stale or forged (CSRF token mismatch): reload the page and try again")
        return {k: str(v) for k, v in form.items()}

    def done_url(self, request: Request, path: str, code: str, **query: Any) -> str:
        """``path`` with a signed notice of what an action did (shown once, briefly, to this session)."""
        ts = int(self.config.clock())
        # Signed over the decoded path, as it is checked: never over one spelling of it.
        signature = self.signer.sign("done", self._notice_session(request, code), unquote(path), code, ts)
        return page_url(path, **query, done=code, t=ts, sig=signature)

    def _notice_session(self, request: Request, code: str) -> str:
        # After a logout the session is gone: that one notice is bound to no session.
        return "" if code == "logged-out" else self.session_of(request)

    def notice(self, request: Request) -> str | None:
        """The text of a valid "done" notice of this page: never on a read-only console,
        never from a link this console did not make for this session in the last minutes."""
        code, ts, signature = (request.query_params.get(name, "") for name in ("done", "t", "sig"))
        if not code or code not in DONE or not ts.isdigit():
            return None
        if code != "logged-out" and not self.config.allow_writes:
            return None
        if not 0 <= self.config.clock() - int(ts) <= DONE_SECONDS:
            return None
        ok = self.signer.check(signature, "done", self._notice_session(request, code), unquote(request.url.path), code, int(ts))
        return DONE[code] if ok else None

    # -- the hub (replay, sandbox) ------------------------------------------------------------
    def hub(self) -> Any:
        """The hub that replays contexts and answers the sandbox chat (built on first need)."""
        with self._hub_lock:
            if self.config.hub is None and self.config.hub_factory is not None:
                self.config.hub = self.config.hub_factory()
            if self.config.hub is None:
                raise HTTPException(503, "this console was started without a hub: replay and the sandbox chat are off")
            return self.config.hub

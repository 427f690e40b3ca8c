"""The webhook server of one worker: "received" only once the update is stored.

python-telegram-bot's own webhook server answers Telegram 200 as soon as the update is
in its in-memory queue, so a worker killed right after loses the update (Telegram
never sends it again). Here the handler stores the message and marks it owed first
(:meth:`.inbox.Inbox.accept`), and only then answers 200; the answer itself is worked
by whichever worker holds the scope's turn (:mod:`scopehub.hub.turns`), in the
background. When storing fails (the database restarts) the answer is 503, and Telegram
delivers the update again later: nothing is lost, and the retry is deduplicated by the
message's unique ``(scope, ext_id)``.

Every request must carry the webhook's secret token (``X-Telegram-Bot-Api-Secret-Token``);
one without it, or with another, is refused (403) before anything is read. The secret is
``TELEGRAM_WEBHOOK_SECRET`` when set; otherwise the first worker of the deployment makes a
strong one and keeps it in the database (:func:`webhook_secret`), so every worker checks
the same secret and registers the same one with ``setWebhook(secret_token=...)``. There is
no configuration in which the webhook accepts an update without it.

Routes: ``POST /<url path>`` (Telegram's updates: JSON, with the secret token header) and
``GET /healthz`` (200 when the database answers, for the container's health check; the
reverse proxy does not pass it on; ``?format=json`` adds the loop's lag).

A database outage: every update is answered 503 at once (the store's pool knows the
server is gone and fails without waiting; a handler that failed on the database, even
before storing, answers 503 too), and ``/healthz`` says 503 without blocking the loop.
The pool tries the server every half second, and serving resumes with its first answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
import secrets
import signal
from collections import deque
from http import HTTPStatus
from typing import Any

import tornado.web
from telegram.error import TelegramError
from telegram.ext import Application
from tornado.httpserver import HTTPServer

from scopehub.hub.errors import ConfigError
from scopehub.hub.transports.telegram.bot import BOT_DATA_KEY, TelegramBot
from scopehub.hub.transports.telegram.delivery import call_with_retry
from scopehub.hub.transports.telegram.guard import read_update
from scopehub.hub.transports.telegram.inbox import INTAKE, Intake
from scopehub.hub.turns import is_transient

__all__ = ["SECRET_HEADER", "WEBHOOK_SECRET_NAME", "LoopLag", "WebhookServer", "run_webhook", "serve_webhook", "webhook_secret"]

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
SHUTDOWN_GRACE = 10.0  # seconds turns in progress get to finish on SIGTERM; the rest stays owed
HEALTH_TIMEOUT = 1.5  # seconds /healthz waits for the database before it answers 503
WEBHOOK_SECRET_NAME = "telegram-webhook-secret"  # the deployment's secret in the store
_SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")  # what Telegram accepts as a secret_token


def webhook_secret(transport: TelegramBot, configured: str | None) -> tuple[str, str]:
    """``(secret, where it came from)``: the configured one, else the deployment's from the store.

    The first worker to start makes it (256 random bits) and stores it; every other worker
    reads that one, so all of them check, and register, the same secret.
    """
    if configured:
        if not _SECRET_RE.match(configured):
            raise ConfigError("TELEGRAM_WEBHOOK_SECRET: expected 1-256 characters of A-Z, a-z, 0-9, _ and -")
        return configured, "TELEGRAM_WEBHOOK_SECRET"
    from scopehub.memory import deployment_secret

    hub = transport.hub
    secret = deployment_secret(hub.store, WEBHOOK_SECRET_NAME, lambda: secrets.token_urlsafe(32), now=hub.deps.clock())
    return secret, "the database (made by the deployment's first worker)"


class _UpdateHandler(tornado.web.RequestHandler):
    def initialize(self, telegram: Application[Any, Any, Any, Any, Any, Any], secret_token: str) -> None:
        self.application_ = telegram
        self.secret_token = secret_token

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json; charset=utf-8")

    async def post(self) -> None:
        given = self.request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), self.secret_token.encode()):
            log.warning("webhook request without the right secret token from %s; refused", self.request.remote_ip)
            raise tornado.web.HTTPError(HTTPStatus.FORBIDDEN)
        content_type = self.request.headers.get("Content-Type", "").split(";", 1)[0].strip()
        if content_type != "application/json":
            raise tornado.web.HTTPError(HTTPStatus.UNSUPPORTED_MEDIA_TYPE)
        try:
            data = json.loads(self.request.body)
        except ValueError:
            log.warning("webhook body from %s is not JSON; refused", self.request.remote_ip)
            raise tornado.web.HTTPError(HTTPStatus.BAD_REQUEST) from None
        if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
            log.warning("webhook body from %s is not a Telegram update (no update_id); refused", self.request.remote_ip)
            raise tornado.web.HTTPError(HTTPStatus.BAD_REQUEST)
        down = database_down(self.application_.bot_data[BOT_DATA_KEY].hub.store)
        if down is not None:  # nothing can be stored: say so at once, Telegram sends it again
            self._unavailable()
            return
        # An update PTB cannot read is kept and skipped (guard.py), and answered 200:
        # Telegram sending it again could not help, and it would hold up the chat's others.
        update = read_update(data, self.application_.bot)
        intake = Intake()
        token = INTAKE.set(intake)
        try:
            # The handlers run in this task: the message is stored and marked owed before we
            # answer; its answer is started in the background.
            await self.application_.process_update(update)
        finally:
            INTAKE.reset(token)
        if not intake.kept:
            self._unavailable()
            return
        self.set_status(HTTPStatus.OK)
        self.finish(json.dumps({"ok": True}))

    def _unavailable(self) -> None:
        self.set_header("Retry-After", "5")
        self.set_status(HTTPStatus.SERVICE_UNAVAILABLE)
        self.finish(json.dumps({"ok": False, "description": "not stored; send it again"}))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, tornado.web.HTTPError):
            return  # refused requests are logged above, once, without a traceback
        super().log_exception(typ, value, tb)


class LoopLag:
    """How late the event loop runs a timer: the lag a request waits before it is served.

    A task sleeps ``interval`` seconds again and again; what it oversleeps is the lag
    (the loop busy with other work, or blocked). The last ``keep`` samples are kept.
    """

    def __init__(self, interval: float = 0.05, keep: int = 4000) -> None:
        self.interval = interval
        self.samples: deque[float] = deque(maxlen=keep)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await asyncio.sleep(self.interval)
            self.samples.append(max(0.0, loop.time() - started - self.interval))

    def summary(self) -> dict[str, float]:
        """p50, p99 and max lag in milliseconds over the kept samples."""
        ordered = sorted(self.samples)
        if not ordered:
            return {"samples": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}

        def at(q: float) -> float:
            return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

        return {"samples": len(ordered), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": round(1000 * ordered[-1], 2)}


class _HealthHandler(tornado.web.RequestHandler):
    """``GET /healthz``: 200 when the database answers, 503 at once when it does not.

    Never blocks the event loop: a store known to be down (its pool found the server
    unreachable) answers 503 without a try; otherwise ``SELECT 1`` runs in a thread with
    a deadline. ``?format=json`` adds the event loop's lag (see :class:`LoopLag`).
    """

    def initialize(self, transport: TelegramBot, lag: LoopLag | None = None) -> None:
        self.transport = transport
        self.lag = lag

    async def get(self) -> None:
        store = self.transport.hub.store
        problem = ""
        down = database_down(store)
        if down is not None:
            problem = f"database unavailable for {down:.1f} s"
        else:
            try:
                await asyncio.wait_for(asyncio.to_thread(store.query, "SELECT 1"), HEALTH_TIMEOUT)
            except TimeoutError:
                problem = f"database did not answer within {HEALTH_TIMEOUT:.0f} s"
            except Exception as exc:
                problem = f"database unavailable: {type(exc).__name__}"
        if problem:
            self.set_status(HTTPStatus.SERVICE_UNAVAILABLE)
        if self.get_query_argument("format", "") == "json":
            self.set_header("Content-Type", "application/json; charset=utf-8")
            body = {"ok": not problem, "problem": problem or None, "loop_lag": self.lag.summary() if self.lag else None}
            self.finish(json.dumps(body))
            return
        self.finish((problem or "ok") + "\n")


def database_down(store: Any) -> float | None:
    """Seconds the store has known its database to be unreachable (None: it answers, or cannot tell)."""
    return getattr(store, "unavailable_for", None)


async def _database_error_is_retried(update: object, context: Any) -> None:
    """An update whose handling failed on the database is answered 503, so Telegram sends it
    again: a failure before the message was stored (looking up a redelivery) must not
    be answered "received"."""
    intake = INTAKE.get()
    if intake is not None and context.error is not None and is_transient(context.error):
        intake.kept = False


class _QuietApp(tornado.web.Application):
    def log_request(self, handler: tornado.web.RequestHandler) -> None:
        # Every update would be a line; failures are logged by the handlers.
        if handler.get_status() >= 500:
            log.warning("webhook answered %s to %s", handler.get_status(), handler.request.path)


class WebhookServer:
    """A tornado HTTP server for one worker's webhook (``start`` / ``stop``)."""

    def __init__(
        self,
        application: Application[Any, Any, Any, Any, Any, Any],
        *,
        listen: str = "0.0.0.0",
        port: int = 8443,
        url_path: str = "",
        secret_token: str,
    ) -> None:
        if not secret_token:
            raise ConfigError("the webhook server needs a secret token: every update without it is refused")
        transport = application.bot_data[BOT_DATA_KEY]
        if _database_error_is_retried not in application.error_handlers:
            application.add_error_handler(_database_error_is_retried)
        self.lag = LoopLag()
        path = "/" + url_path.strip("/")
        pattern = re.escape(path) + ("/?" if path != "/" else "")
        routes: list[Any] = [
            (r"/healthz", _HealthHandler, {"transport": transport, "lag": self.lag}),
            (pattern, _UpdateHandler, {"telegram": application, "secret_token": secret_token}),
        ]
        self.app = _QuietApp(routes)
        self.listen = listen
        self.port = port
        self._server: HTTPServer | None = None

    def start(self) -> None:
        self._server = HTTPServer(self.app, xheaders=True)
        self._server.listen(self.port, address=self.listen)
        self.lag.start()

    async def stop(self) -> None:
        await self.lag.stop()
        if self._server is not None:
            self._server.stop()  # no new connections; requests in progress finish
            await self._server.close_all_connections()
            self._server = None


async def serve_webhook(
    application: Application[Any, Any, Any, Any, Any, Any],
    *,
    listen: str,
    port: int,
    url_path: str,
    webhook_url: str | None,
    secret_token: str | None,
    allowed_updates: list[str],
    stop: asyncio.Event | None = None,
) -> None:
    """Run the worker until ``stop`` is set (or SIGTERM / SIGINT): the Application, its jobs, the server.

    Every worker registers the same webhook (``setWebhook`` is idempotent); pass
    ``webhook_url=None`` to leave the registration to someone else. ``secret_token`` None:
    the deployment's secret from the store (:func:`webhook_secret`).
    """
    transport: TelegramBot = application.bot_data[BOT_DATA_KEY]
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread, or not Unix
            loop.add_signal_handler(sig, stop.set)
    await application.initialize()
    if application.post_init is not None:
        await application.post_init(application)
    secret_token, source = webhook_secret(transport, secret_token)
    log.info("webhook secret token from %s; requests without it are refused", source)
    if webhook_url:
        try:
            await call_with_retry(
                lambda: application.bot.set_webhook(url=webhook_url, allowed_updates=allowed_updates, secret_token=secret_token),
                transport.retry,
                "setWebhook",
            )
        except TelegramError as exc:
            log.error("could not register the webhook %s: %s (updates arrive once it is registered)", webhook_url, exc)
    await application.start()
    server = WebhookServer(application, listen=listen, port=port, url_path=url_path, secret_token=secret_token)
    server.start()
    log.info("webhook worker %s listening on %s:%s", transport.hub.holder, listen, port)
    try:
        await stop.wait()
    finally:
        log.info("webhook worker %s stopping", transport.hub.holder)
        await server.stop()
        await transport.finish_turns(SHUTDOWN_GRACE)
        await application.stop()
        if application.post_stop is not None:
            await application.post_stop(application)
        await application.shutdown()


def run_webhook(application: Application[Any, Any, Any, Any, Any, Any], **options: Any) -> None:
    """Blocking :func:`serve_webhook` (the ``agents-hub telegram --webhook-url`` command)."""
    asyncio.run(serve_webhook(application, **options))

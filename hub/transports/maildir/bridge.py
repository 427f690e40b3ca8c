"""The Maildir intake wired to the hub: each file becomes a message of its scope, answered
by its agent (or routed, for the ``hub`` inbox), its reply stored, sent to the chat when a
transport can, and written back to the sender's outbox when the file asked for it.

The message is committed under ``maildir:<file name>`` before any model call (the hub
does that), so a crash between the commit and the move to ``cur/`` never answers a file
twice: the redelivery finds the stored message and its stored reply.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from scopehub.hub.transports.maildir.intake import Delivered, Dispatch, MaildirIntake, RetryLater
from scopehub.hub.transports.maildir.watcher import MaildirWatcher

if TYPE_CHECKING:
    from scopehub.hub.orchestrator import Hub, Reply

__all__ = ["RECURRING_CHECK", "ReplySink", "build_intake", "make_deliver", "send_recurring", "start_watcher"]

log = logging.getLogger(__name__)

RECURRING_CHECK = 3600.0  # seconds between checks of the recurring dispatches (and one at start)

# Where a transport sends a reply to a file's scope (Telegram: the chat of the scope).
ReplySink = Callable[[str, "Reply"], Awaitable[None]]


def _stored_reply(hub: Hub, dispatch: Dispatch) -> Delivered:
    """The reply already stored for a redelivered file; RetryLater while its answer is in flight.

    ``handle`` returns None for a redelivery when the file was answered before, and also
    when its answer is claimed by another process, or by one that was killed mid-answer
    (the claim runs out after ``HUB_CLAIM_TTL``). Settling the file then would move it to
    ``cur/`` unanswered for good, so it stays in ``new/`` until the answer is stored.
    """
    message = hub.store.find_ext(dispatch.scope, dispatch.ext_id)
    if message is None:
        raise RetryLater("not stored yet")
    for later in hub.store.messages(dispatch.scope, after=message.id, limit=50):
        if later.role == "agent" and later.reply_to == message.id:
            return Delivered(reply=later.text, message_id=message.id, agent=later.agent)
    if message.via == "command" or hub.store.is_answered(message.id):
        return Delivered(reply=None, message_id=message.id)  # commands never run twice; a failure's apology
    raise RetryLater("stored, but its answer is in flight in another process or one that stopped")


def make_deliver(hub: Hub, sink: ReplySink | None = None) -> Callable[[Dispatch], Awaitable[Delivered | None]]:
    """The intake's ``deliver``: hand the file to the hub and return its reply."""
    from scopehub.hub.orchestrator import Inbound

    async def deliver(dispatch: Dispatch) -> Delivered | None:
        inbound = Inbound(
            scope=dispatch.scope,
            text=dispatch.text(),
            sender=dispatch.sender,
            ext_id=dispatch.ext_id,
            agent=dispatch.agent,
        )
        reply = await hub.handle(inbound)
        if reply is None:  # a redelivery: answered before (or being answered elsewhere)
            return _stored_reply(hub, dispatch)
        hub.schedule_after_send(reply)
        if sink is not None and reply.kind != "command":
            try:
                await sink(dispatch.scope, reply)
            except Exception:  # the chat is a courtesy; the reply is stored and in the outbox
                log.exception("could not send the reply to %s's file %s to its chat", dispatch.scope, dispatch.name)
        if reply.kind == "error":
            return Delivered(reply=None, message_id=reply.message_id, agent=reply.agent)
        return Delivered(reply=reply.text, message_id=reply.message_id, agent=reply.agent)

    return deliver


def build_intake(hub: Hub, root: Path, *, sink: ReplySink | None = None) -> MaildirIntake:
    """An intake over ``root`` for the hub's agents, rate-limited and stale-checked per settings."""
    from scopehub.memory import acquire_claim, release_claim

    settings = hub.settings

    # Several workers may watch one Maildir (a shared volume): each file is taken under a
    # claim of its scope, held until it is moved to cur/, so one of them delivers it.
    def claim(dispatch: Dispatch) -> bool:
        note = f"hub: taking the file {dispatch.name}"
        key = f"maildir:{dispatch.ext_id}"
        return acquire_claim(hub.store, dispatch.scope, key, hub.holder, note=note, ttl=settings.claim_ttl, now=hub.deps.clock()) is not None

    def release(dispatch: Dispatch) -> None:
        try:
            release_claim(hub.store, dispatch.scope, f"maildir:{dispatch.ext_id}", hub.holder)
        except Exception:
            log.exception("claim on the file %s of %s not released; it runs out", dispatch.name, dispatch.scope)

    return MaildirIntake(
        root,
        agents=hub.registry.names,
        deliver=make_deliver(hub, sink),
        rate_per_scope=settings.maildir_rate,
        stale_after=settings.maildir_stale,
        # a file whose answer a killed process had claimed is answered once the claim runs out
        retry_after=min(30.0, settings.claim_ttl),
        clock=hub.deps.clock,
        claim=claim,
        release=release,
    )


def start_watcher(hub: Hub, root: Path, *, sink: ReplySink | None = None, force_polling: bool = False) -> MaildirWatcher:
    """Watch ``root`` in the running loop (a full pass first, then on every arrival)."""
    root.mkdir(parents=True, exist_ok=True)
    watcher = MaildirWatcher(build_intake(hub, root, sink=sink), force_polling=force_polling)
    watcher.start()
    log.info("watching the Maildir at %s (%s)", root, watcher.mode)
    return watcher


def send_recurring(hub: Hub, root: Path) -> list[Path]:
    """Send the recurring dispatches (``HUB_RECURRING``) that are due, each once per period.

    Each one under a claim on its scope, so two processes checking at the same moment
    never both send it; the period bookkeeping itself never sends one twice either.
    """
    from scopehub.hub.transports.maildir.recurring import RecurringDispatch, send_due
    from scopehub.memory import acquire_claim, release_claim

    sent: list[Path] = []
    for raw in hub.settings.recurring:
        try:
            item = RecurringDispatch.model_validate(raw)
        except ValueError as exc:
            log.error("recurring dispatch %r is invalid and skipped: %s", raw.get("name") if isinstance(raw, dict) else raw, exc)
            continue
        key = f"recurring:{item.name}"
        note = f"{item.to_agent}: sending the recurring dispatch {item.name!r}"
        if acquire_claim(hub.store, item.to_scope, key, hub.holder, note=note, ttl=60, now=hub.deps.clock()) is None:
            continue
        try:
            sent.extend(send_due(root, [item], now=hub.deps.clock()))
        except Exception:
            log.exception("recurring dispatch %r could not be sent; trying again at the next check", item.name)
        finally:
            release_claim(hub.store, item.to_scope, key, hub.holder)
    return sent

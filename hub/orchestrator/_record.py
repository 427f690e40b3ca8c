"""Record, the fifth stage of a turn: the reply stored, the call's tokens and cost recorded.

Order matters for crashes: the reply is stored before the call is recorded (a crash in
between leaves the message looking unanswered, so its redelivery is answered), and the
awareness cursors move only after the call that was shown their events is recorded.
"""

from __future__ import annotations

import logging

from scopehub.hub.context.record import SentSections, sent_record
from scopehub.hub.models import price_call
from scopehub.hub.orchestrator._run import RunOutcome
from scopehub.hub.orchestrator._sections import PreparedCall
from scopehub.hub.orchestrator._types import Deps, Reply
from scopehub.hub.routing.llm_router import RouterCall
from scopehub.hub.settings import Settings
from scopehub.memory import (
    CallRecord,
    NewMessage,
    Store,
    advance_channel_cursor,
    advance_cursor,
    redact_secrets,
)

__all__ = ["error_fields", "record_router_call", "record_turn"]

log = logging.getLogger(__name__)


def record_turn(deps: Deps, sent_sections: SentSections, call: PreparedCall, outcome: RunOutcome) -> Reply:
    """Store the reply (when the run gave one), record the call, move the cursors: the person's Reply."""
    store, settings = deps.store, deps.settings
    inbound, message, decision, spec, context = call.inbound, call.message, call.decision, call.spec, call.context
    stored = None
    if outcome.ok:
        stored = store.append(
            NewMessage(
                scope=inbound.scope,
                role="agent",
                text=outcome.text,
                ts=deps.clock(),
                agent=spec.name,
                also_sees=decision.also_sees,
                via=decision.via,
                chat=inbound.chat,
                reply_to=message.id,
            )
        )
    result = outcome.result
    model = deps.model
    model_used = (result.model if result else None) or spec.model or (model.name if model else None)
    reported = result is not None and result.usage_reported
    price = price_call(
        model_used,
        result.prompt_tokens if reported else None,
        result.completion_tokens if reported else None,
        result.cached_tokens if result else None,
        result.cache_write_tokens if result else None,
    )
    sent = sent_sections.compact(
        inbound.scope,
        sent_record(context, text=call.text, stored_text=message.text, message_tokens=settings.message_tokens),
    )
    if result and result.tool_calls:
        outcome_extra: dict[str, object] = {"tool_calls": result.tool_calls, "rounds": result.rounds}
    elif outcome.failure:
        outcome_extra = {"error": outcome.failure, "deadline_s": settings.reply_deadline}
    else:
        outcome_extra = {}
    call_id = store.record_call(
        CallRecord(
            scope=inbound.scope,
            agent=spec.name,
            message_id=message.id,
            via=decision.via,
            also_sees=decision.also_sees,
            tokens=context.tokens,
            full_history_tokens=context.full_history_tokens,
            model=model_used,
            latency_ms=outcome.latency_ms,
            prompt_tokens=result.prompt_tokens if reported else None,
            completion_tokens=result.completion_tokens if reported else None,
            ok=outcome.ok,
            extra={
                **outcome_extra,
                # The path this call's digest took and its age: a broken cache shows here.
                **({"digest": call.digest.record(context.tokens.get("digest", 0))} if deps.digest else {}),
                # What was sent, so that it can be shown again exactly (agents-hub console).
                "sent": sent,
            },
            cached_tokens=result.cached_tokens if result else None,
            cache_write_tokens=result.cache_write_tokens if result else None,
            billed_tokens=price.billed_tokens,
            cost=price.cost,
            **error_fields(settings, outcome.error),
        )
    )
    sent_sections.remember(inbound.scope, sent, call_id)
    if outcome.ok:
        _advance_cursors(store, call)
    reply = Reply(
        text=outcome.text,
        kind="agent" if stored is not None else "error",
        agent=spec.name,
        also_sees=decision.also_sees,
        via=decision.via,
        message_id=message.id,
        reply_id=stored.id if stored is not None else None,
        tokens=context.tokens,
        full_history_tokens=context.full_history_tokens,
        scope=inbound.scope,
    )
    return reply


def _advance_cursors(store: Store, call: PreparedCall) -> None:
    """At-least-once until commit: the cursors move only now that the call that was shown
    these events is recorded; a crash before this shows them again."""
    scope, agent, awareness = call.inbound.scope, call.spec.name, call.awareness
    if awareness.consumed_upto:
        try:
            advance_cursor(store, scope, agent, awareness.consumed_upto)
        except Exception:
            log.exception("cursor of %s/%s not advanced; its events will be shown again", scope, agent)
    if awareness.channel_upto:
        try:
            advance_channel_cursor(store, scope, agent, awareness.channel_upto)
        except Exception:
            log.exception("channel cursor of %s/%s not advanced; its channel news will be shown again", scope, agent)


def error_fields(settings: Settings, error: BaseException | None) -> dict[str, str | None]:
    """A failure's class and message for the call record, this deployment's secrets taken
    out (the store also redacts anything credential-shaped); the cause's too, when it adds."""
    if error is None:
        return {"error_class": None, "error_message": None}
    message = str(error) or type(error).__name__
    cause = error.__cause__
    if cause is not None and str(cause) and str(cause) not in message:
        message += f" (caused by {type(cause).__name__}: {cause})"
    secrets = (settings.api_key, settings.telegram_bot_token, settings.telegram_webhook_secret, settings.console_token)
    return {"error_class": type(error).__name__, "error_message": redact_secrets(message, secrets)}


def record_router_call(store: Store, settings: Settings, scope: str, message_id: int | None, call: RouterCall) -> None:
    """Record the LLM router's call: its tokens count in usage too, and the console shows its
    prompt, answer and route (or why the local route was kept)."""
    store.record_call(
        CallRecord(
            scope=scope,
            agent="hub",
            message_id=message_id,
            via="router",
            also_sees=(),
            tokens={},
            full_history_tokens=0,
            model=settings.router_model or None,
            prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens,
            latency_ms=call.latency_ms,
            ok=call.route is not None,
            extra={
                "prompt": call.messages,
                "answer": call.answer,
                "route": {"agent": call.route.agent, "also_sees": list(call.route.also_sees)} if call.route else None,
                "local": {"agent": call.local.agent, "via": call.local.via} if call.local else None,
            },
            **error_fields(settings, call.cause or call.error),
        )
    )

"""Intake, the first stage of a turn: commit the message (before any model call), spot a command.

A message is stored exactly once per delivery: a redelivery (a transport's retry, a
restart re-sending, a twin delivered to another worker) finds the stored one and is
answered only if it never was.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Container

from scopehub.hub.orchestrator._types import Deps, Inbound
from scopehub.memory import DuplicateMessage, Message, NewMessage, Store, validate_scope

__all__ = ["ADDRESSED", "UNKNOWN_COMMAND_REPLY", "command_of", "has_content", "inbound_of", "learn_stated_facts", "store_inbound"]

log = logging.getLogger(__name__)

UNKNOWN_COMMAND_REPLY = "unknown command /{name}; /help lists them"
ADDRESSED = "addressed"  # the route of a message the transport addressed to an agent, until it is answered
# A chat command: a slash and a lower-case word at the very start ("/usr/bin" is not one).
_COMMAND_RE = re.compile(r"^/([a-z_]+)(?:@\w+)?(?=\s|$)")


# Characters that show nothing although they are not whitespace: the Hangul and halfwidth
# fillers and the blank Braille pattern (people send them as "empty" messages).
_INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def has_content(text: str) -> bool:
    """Whether ``text`` shows anything: not only whitespace, zero-width or other format characters."""
    return any(
        not char.isspace() and char not in _INVISIBLE and unicodedata.category(char) not in ("Cf", "Cc", "Mn", "Me")
        for char in text
    )


def store_inbound(store: Store, inbound: Inbound, clock: Callable[[], float], *, ext_id_unseen: bool = False) -> Message | None:
    """Commit the message (before any model call); None when this delivery needs nothing more.

    A redelivery is never stored twice. It is worth answering only if the first delivery
    was stored but never answered (a crash in between); commands are not re-run, and
    chatter that was not addressed is not tagged again. A message that shows nothing
    (only whitespace or zero-width characters) says nothing: it is neither stored nor
    answered, and costs no model call. ``ext_id_unseen``: the caller looked ``inbound.ext_id``
    up in this store session and found nothing (a delivery stored meanwhile by another
    process is still caught: its append is refused as a duplicate).
    """
    scope = validate_scope(inbound.scope)
    if not has_content(inbound.text):
        log.info("message %s of %s shows nothing (empty or zero-width only); not stored, not answered", inbound.ext_id, scope)
        return None
    message = store.find_ext(scope, inbound.ext_id) if inbound.ext_id is not None and not ext_id_unseen else None
    if message is None:
        reply_to = store.find_ext(scope, inbound.reply_to_ext) if inbound.reply_to_ext else None
        try:
            return store.append(
                NewMessage(
                    scope=scope,
                    role="user",
                    text=inbound.text,
                    ts=inbound.ts if inbound.ts is not None else clock(),
                    sender=inbound.sender,
                    chat=inbound.chat,
                    ext_id=inbound.ext_id,
                    reply_to=reply_to.id if reply_to else None,
                    # Addressed by the transport (a Maildir inbox, an agent's Telegram topic):
                    # kept as the message's route, so answering it from a queue keeps it.
                    agent=inbound.agent,
                    via=ADDRESSED if inbound.agent else None,
                )
            )
        except DuplicateMessage:
            # Another process stored the same delivery a moment ago; it answers it (or, if it
            # dies first, the transport's retry of this delivery finds it unanswered).
            log.info("message %s of %s is being handled elsewhere", inbound.ext_id, scope)
            return None
    if message.via == "command" or not inbound.addressed or store.is_answered(message.id):
        log.info("message %s of %s was already handled; ignoring the redelivery", inbound.ext_id, scope)
        return None
    log.info("message %s of %s was stored but not answered yet", inbound.ext_id, scope)
    return message


def inbound_of(store: Store, message: Message, *, addressed: bool = True) -> tuple[Inbound, Message | None]:
    """A stored message as it came in, and the message it replies to: for answering it
    later (from a scope's queue, or after the process answering it stopped)."""
    inbound = Inbound(
        scope=message.scope,
        text=message.text,
        chat=message.chat,
        sender=message.sender,
        ext_id=message.ext_id,
        ts=message.ts,
        addressed=addressed,
        agent=message.agent if message.via == ADDRESSED else None,
    )
    reply_to = store.get(message.scope, message.reply_to) if message.reply_to else None
    return inbound, reply_to


def command_of(text: str, commands: Container[str], agents: Container[str]) -> tuple[str, str] | None:
    """``(name, argument)`` of a chat command, also an unknown one; None for text and ``/<agent>``."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    head, _, rest = stripped[1:].partition(" ")
    name = head.split("@", 1)[0].lower()
    if name in commands and name not in agents:
        return name, rest.strip()
    match = _COMMAND_RE.match(stripped)
    if match is not None and match.group(1) not in agents:
        return match.group(1), ""  # answered with "unknown command", never sent to an agent
    return None


def learn_stated_facts(deps: Deps, message: Message) -> int:
    """Keep the facts the message states in words the local key reader knows, before the
    reply: zero tokens, and the next message knows them however quickly the person types
    (the model's extraction after the reply gives way to each new message). Fail-open:
    a failure is a log line and the reply goes on. Returns how many facts were kept."""
    learn = getattr(deps.facts, "learn_stated", None)
    if not callable(learn):
        return 0
    try:
        return len(learn(message.scope, message))
    except Exception:
        log.exception("stated facts of message %s of %s not kept now; learning after the reply", message.id, message.scope)
        return 0

"""Helpers for the maildir tests: a hub double that commits to a real memory Store."""

from __future__ import annotations

import os
from pathlib import Path

from scopehub.hub.transports.maildir import Delivered, Dispatch
from scopehub.memory import DuplicateMessage, NewMessage, Store

AGENTS = frozenset({"notes", "tasks"})


class StoreHub:
    """Commits each dispatch under its ext id, answers it once, and says so on a redelivery.

    ``answered`` lists every (scope, file name) the "agent" actually answered: a file
    answered twice shows up twice.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.answered: list[tuple[str, str]] = []
        self.seen: list[Dispatch] = []

    async def deliver(self, dispatch: Dispatch) -> Delivered:
        self.seen.append(dispatch)
        try:
            message = self.store.append(
                NewMessage(
                    scope=dispatch.scope,
                    role="user",
                    text=dispatch.text(),
                    sender=dispatch.sender,
                    agent=dispatch.agent,
                    via="maildir",
                    ext_id=dispatch.ext_id,
                )
            )
        except DuplicateMessage:
            message = self.store.find_ext(dispatch.scope, dispatch.ext_id)
            assert message is not None
            replies = [m for m in self.store.messages(dispatch.scope) if m.reply_to == message.id and m.role == "agent"]
            if replies:  # already handled: hand back the stored answer, answer nothing
                return Delivered(reply=replies[0].text, message_id=message.id, agent=replies[0].agent)
        agent = dispatch.agent or "notes"
        text = f"{agent} read: {dispatch.subject}"
        self.answered.append((dispatch.scope, dispatch.name))
        self.store.append(NewMessage(scope=dispatch.scope, role="agent", text=text, agent=agent, reply_to=message.id))
        return Delivered(reply=text, message_id=message.id, agent=agent)


def files_under(path: Path) -> list[str]:
    """Every file under ``path``, relative, sorted."""
    found = []
    for dirpath, _dirnames, filenames in os.walk(path):
        found.extend(os.path.relpath(os.path.join(dirpath, name), path) for name in filenames)
    return sorted(found)


def crash_child(root: str, db: str, point: str) -> None:
    """One intake pass in a fresh process that dies (``os._exit``) at ``point``.

    ``after_commit``: deliver committed (and answered) the message, then the process dies.
    ``before_move``: the reply and receipt are written, the process dies before new/ -> cur/.
    """
    import asyncio

    from scopehub.hub.transports.maildir import MaildirIntake
    from scopehub.hub.transports.maildir import intake as intake_module

    hub = StoreHub(Store(db))

    async def deliver_then_die(dispatch: Dispatch) -> Delivered:
        await hub.deliver(dispatch)
        os._exit(3)

    def die(*_args, **_kwargs):
        os._exit(3)

    if point == "after_commit":
        deliver = deliver_then_die
    else:
        deliver = hub.deliver
        intake_module.move_no_replace = die
    asyncio.run(MaildirIntake(Path(root), agents=AGENTS, deliver=deliver).drain_once())
    os._exit(0)


WRITER_SCOPES = ("user:1", "group:-100")
WRITER_INBOXES = ("notes", "tasks", "hub")


def writer_payload(writer: int, index: int, size: int) -> str:
    return (f"w{writer}-{index}-" * (size // 6 + 1))[:size]


def slow_writer(root: str, writer: int, count: int, size: int) -> None:
    """Writes ``count`` large dispatches, each streamed into tmp/ in pieces with pauses."""
    import hashlib
    import time

    from scopehub.hub.transports.maildir.files import publish, render
    from scopehub.hub.transports.maildir.layout import dispatch_name, inbox_dir
    from scopehub.hub.transports.maildir.send import name_taken_in_scope

    for index in range(count):
        scope = WRITER_SCOPES[index % len(WRITER_SCOPES)]
        inbox = WRITER_INBOXES[index % len(WRITER_INBOXES)]
        payload = writer_payload(writer, index, size)
        digest = hashlib.sha256(payload.encode()).hexdigest()
        meta = {"from": f"w{writer}", "subject": f"file {index}", "priority": "normal"}
        data = render(meta, f"{digest}\n{payload}").encode()

        def pieces(data: bytes = data):
            step = len(data) // 3 + 1
            for start in range(0, len(data), step):
                yield data[start : start + step]
                time.sleep(0.001)

        publish(
            inbox_dir(Path(root), scope, inbox),
            dispatch_name(time.time(), "normal", f"w{writer}", f"file {index}"),
            pieces(),
            taken=lambda name, scope=scope: name_taken_in_scope(Path(root), scope, name),
        )

"""A busy scope: the newest item is in the next call, and nothing is passed over uncounted.

``busy_scope``
    A scope with a backlog of ``backlog`` emails the tasks agent was never told about, a
    live claim of another agent and a pinned channel message; then ``rounds`` calls, each
    after ``burst`` more emails (the newest an urgent one). Checked in every call, from
    what the agent was sent: the claim is the first line, the newest email the first news
    line, the pin is there (on every call, not once). Counted over the run, against where
    the agent's cursor moved: emails neither listed nor counted ("... and N more not
    shown") when the cursor passed them (lost), emails listed again after it had passed
    them (duplicated), calls missing the claim, the newest email or the pin (crashed). On
    SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

from scopehub.hub.context.awareness import AWARENESS_HEADER
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.orchestrator import Inbound
from scopehub.memory import (
    acquire_claim,
    cursor_of,
    emit_event,
    open_store,
    pin_channel_message,
    post_to_channel,
)

from ._backends import databases
from ._harness import last_user_text, make_hub
from ._outcome import Outcome, Scenario, timed

__all__ = ["busy_scope"]

SCOPE = "group:-4242"
AGENT = "tasks"  # interested in email.received; its collaborators (inbox, reminders) stay quiet here
SENDER = "mailer"  # emits the emails: no collaborator of the tasks agent, so every line is news
CALL_UNIT = "calls led by the live claim and the newest email, with the pin"
EVENT_UNIT = "emails listed or counted exactly once as the cursor passed them"
_EMAIL = re.compile(r"email #(\d+) from")
_MORE = re.compile(r"… and (\d+) more not shown")


def _block(messages: list[dict]) -> list[str]:
    system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    if AWARENESS_HEADER not in system:
        return []
    return system.split(AWARENESS_HEADER + "\n", 1)[1].split("\n\n", 1)[0].splitlines()


class _Busy:
    """One backend's run: the scope, what each call was sent, and the counts."""

    def __init__(self, db: str, out: Outcome, backend: str) -> None:
        self.out, self.backend = out, backend
        self.store = open_store(db)
        self.sent: list[list[str]] = []

        async def answer(messages: list[dict], tools: list[dict]) -> str:
            self.sent.append(_block(messages))
            return "re: " + last_user_text(messages)[:80]

        self.hub = make_hub(self.store, FunctionModel(answer))
        self.by_email: dict[int, int] = {}  # email number -> event id
        self.listed: dict[int, int] = {}  # event id -> calls that listed it
        self.counted = 0
        self.now = time.time()

    def email(self, number: int, subject: str, ts: float) -> int:
        payload = {"email_id": number, "sender": "news@example.com", "subject": subject, "dates": []}
        event = emit_event(self.store, SCOPE, SENDER, "email.received", payload, now=ts)
        self.by_email[number] = event.id
        return event.id

    def call(self, round_: int, newest: int) -> None:
        before = cursor_of(self.store, SCOPE, AGENT)
        asyncio.run(self.hub.handle(Inbound(scope=SCOPE, text=f"what first? ({round_})", agent=AGENT, ext_id=f"busy:{round_}")))
        after = cursor_of(self.store, SCOPE, AGENT)
        lines = self.sent[-1] if self.sent else []
        shown = [self.by_email[int(m[1])] for line in lines if (m := _EMAIL.search(line)) and int(m[1]) in self.by_email]
        more = next((int(m[1]) for line in lines if (m := _MORE.search(line))), 0)
        label = f"{self.backend}, call {round_}"
        ok = (
            lines[:1] == ["Working now:"]
            and len(lines) > 2
            and "renew the passport" in lines[1]
            and f"email #{newest} from" in lines[2]
            and any("(pinned): The person is vegetarian" in line for line in lines)
        )
        if ok:
            self.out.verify(f"{CALL_UNIT} ({self.backend})")
        else:
            self.out.fail("crashed", f"{label}: not led by the claim and the newest email, or the pin is missing: {lines[:4]}")
        again = [event_id for event_id in shown if event_id <= before]
        if again:
            self.out.fail("duplicated", f"{label}: {len(again)} emails listed again after the cursor had passed them", len(again))
        passed = sum(1 for event_id in self.by_email.values() if before < event_id <= after)
        fresh = [event_id for event_id in shown if before < event_id <= after]
        if len(fresh) + more != passed:
            self.out.fail("lost", f"{label}: the cursor passed {passed} emails, {len(fresh)} listed and {more} counted", abs(passed - len(fresh) - more))
        else:
            self.out.verify(f"{EVENT_UNIT} ({self.backend})", passed)
        for event_id in fresh:
            self.listed[event_id] = self.listed.get(event_id, 0) + 1
        self.counted += more


def busy_scope(workdir: Path, *, backlog: int = 150, rounds: int = 20, burst: int = 15, seed: int = 0) -> Outcome:
    """A backlog and a burst before every call: the newest first, the rest counted, the pin always (both backends)."""
    out = Outcome("busy_scope")
    with timed(out), databases(workdir, out) as found:
        for backend, db in found:
            run = _Busy(db, out, backend)
            try:
                now = run.now
                acquire_claim(run.store, SCOPE, "reminder:9", "worker-x", note="reminders: sending a reminder: renew the passport", ttl=3600, now=now)
                pin = post_to_channel(run.store, SCOPE, "team", "notes", "The person is vegetarian: never suggest meat.", now=now - 7200)
                pin_channel_message(run.store, SCOPE, pin.id)
                for n in range(backlog):
                    run.email(n + 1, f"newsletter {n + 1}", now - 3600 + n)
                number = backlog
                for round_ in range(rounds):
                    for _ in range(burst - 1):
                        number += 1
                        run.email(number, f"newsletter {number}", now + round_)
                    number += 1
                    run.email(number, f"URGENT: the server is down ({round_})", now + round_ + 0.5)
                    run.call(round_, number)
                out.note(
                    f"{backend}: a backlog of {backlog} emails, then {rounds} calls after {burst} new ones each: "
                    f"{len(run.listed)} listed, {run.counted} counted as not shown, the newest first every time"
                )
            finally:
                run.store.close()
    return out


SCENARIOS = {
    "busy_scope": Scenario(busy_scope, heavy={"backlog": 150, "rounds": 40, "burst": 15}, quick={"backlog": 150, "rounds": 5, "burst": 12}),
}

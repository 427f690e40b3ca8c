"""Concurrency: many chats at once while another process writes, and simultaneous first opens."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from scopehub.hub.context.builder import with_sender
from scopehub.hub.models import (
    ChatModel,
    LiteLLMModel,
)
from scopehub.hub.orchestrator import (
    Inbound,
)
from scopehub.memory import (
    Store,
)

from ._harness import (
    PHRASES,
    Observer,
    child_env,
    echo_model,
    fake_openai,
    last_user_text,
    make_hub,
    quiet_litellm,
    reopen,
    tail_of,
    write_log,
)
from ._outcome import (
    FIRST_OPENS,
    IN_ORDER,
    WRITER_PRESENT,
    Outcome,
    Scenario,
    timed,
)

log = logging.getLogger(__name__)


_SCOPE_TAG = re.compile(r"\[((?:user|group):-?\d+) #\d+\]")


def _chat_scopes(chats: int) -> list[str]:
    return [f"user:{i}" if i % 2 else f"group:-{i}" for i in range(1, chats + 1)]


def concurrency(
    workdir: Path,
    *,
    chats: int = 50,
    per_chat: int = 40,
    max_latency: float = 0.02,
    writer_messages: int = 5000,
    writer_batch: int = 10,
    seed: int = 0,
    use_litellm: bool = False,
) -> Outcome:
    """Chats at once through one hub while another process writes the same file: order kept, nothing lost."""
    name = "concurrency_litellm" if use_litellm else "concurrency"
    out = Outcome(name, verified={IN_ORDER: 0, WRITER_PRESENT: 0})
    with timed(out), contextlib.ExitStack() as stack:
        workdir.mkdir(parents=True, exist_ok=True)
        db = workdir / f"{name}.db"
        # Create the schema before the second process opens the file (concurrent first opens race: see the report).
        store = stack.enter_context(Store(db))
        scopes = _chat_scopes(chats)
        inbounds = [
            Inbound(scope=scope, text=f"[{scope} #{i}] {PHRASES[(i + n) % len(PHRASES)]}", ext_id=str(i), chat=scope.split(":", 1)[1], sender="p")
            for i in range(per_chat)
            for n, scope in enumerate(scopes)
        ]
        requests: list[list[dict[str, Any]]] = []
        if use_litellm:
            fakes = fake_openai()
            rng = random.Random(seed)

            def respond(body: dict[str, Any]) -> Any:
                # Runs in the server thread: random latency, then the echo.
                return fakes.delay(rng.uniform(0.0, max_latency), fakes.text("re: " + last_user_text(body.get("messages", []))[:200]))

            server = stack.enter_context(fakes.FakeOpenAI(default=respond))
            stack.enter_context(quiet_litellm())
            model: ChatModel = LiteLLMModel("openai/fake", api_base=server.base_url, timeout=30, retries=0)
        else:
            server = None
            model = echo_model(max_latency=max_latency, seed=seed)
        hub = make_hub(store, model)
        writer_log = workdir / f"{name}.writer.jsonl"
        writer_scope = "user:777777"
        writer_expected = write_log(writer_log, writer_messages, [writer_scope], seed)
        writer_err = workdir / f"{name}.writer.stderr"
        with writer_err.open("wb") as err:
            writer = subprocess.Popen(
                [sys.executable, "-m", "scopehub.hub.cli", "--db", str(db), "import", str(writer_log), "--batch", str(writer_batch)],
                cwd=workdir,
                env=child_env(),
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        observer = Observer(db)
        deadline = time.monotonic() + 30
        while observer.count(writer_scope) == 0 and writer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # start the hub once the other process is writing
        written_before = observer.count(writer_scope)

        async def run_all() -> list[Any]:
            return await asyncio.gather(*(hub.handle(inbound) for inbound in inbounds), return_exceptions=True)

        started = time.perf_counter()
        results = asyncio.run(run_all())
        hub_seconds = time.perf_counter() - started
        written_during = observer.count(writer_scope) - written_before
        observer.close()
        try:
            writer.wait(timeout=600)
        except subprocess.TimeoutExpired:
            writer.kill()
            out.fail("crashed", "the second writer did not finish within 600 s")
        if writer.returncode != 0:
            out.fail("crashed", f"the second writer exited {writer.returncode}: {tail_of(writer_err)}")
        if "locked" in tail_of(writer_err, 5000):
            out.fail("crashed", "the second writer saw 'database is locked'")
        rows = store.query("SELECT ext_id, text FROM messages WHERE scope = ?", (writer_scope,))
        copies = Counter(ext_id for ext_id, _ in rows)
        present = sum(1 for ext_id, text in rows if copies[ext_id] == 1 and writer_expected.get((writer_scope, ext_id)) == text)
        out.verify(WRITER_PRESENT, present)
        if present != writer_messages:
            out.fail("lost", f"the second writer's messages: {present} of {writer_messages} there once and unaltered", writer_messages - present)

        locked = 0
        wrong: set[tuple[str, str | None]] = set()
        for inbound, result in zip(inbounds, results, strict=True):
            if isinstance(result, BaseException):
                locked += "locked" in str(result)
                wrong.add((inbound.scope, inbound.ext_id))
                out.fail("crashed", f"{inbound.scope} #{inbound.ext_id}: {type(result).__name__}: {result}")
            elif result is None or result.text != "re: " + with_sender(inbound.text, inbound.sender, inbound.scope):
                wrong.add((inbound.scope, inbound.ext_id))
                out.fail("crashed", f"{inbound.scope} #{inbound.ext_id}: wrong reply {getattr(result, 'text', None)!r}")
        if locked:
            out.note(f"{locked} 'database is locked' errors")
        out.verify(IN_ORDER, _check_chats(store, scopes, per_chat, inbounds, out, wrong))
        if server is not None:
            requests = [body.get("messages", []) for body in server.requests]
        else:
            requests = [call.messages for call in model.calls]  # type: ignore[attr-defined]
        _check_calls(requests, out)
        out.note(
            f"{len(inbounds)} messages of {chats} chats in {hub_seconds:.1f} s ({len(inbounds) / hub_seconds:.0f}/s); "
            f"the second process committed {written_during} of its {writer_messages} messages meanwhile "
            f"(batches of {writer_batch}), exit {writer.returncode}"
        )
        out.details.update(hub_seconds=hub_seconds, written_during=written_during)
    return out


def _check_chats(
    store: Store,
    scopes: Sequence[str],
    per_chat: int,
    inbounds: Sequence[Inbound],
    out: Outcome,
    wrong: Collection[tuple[str, str | None]] = (),
) -> int:
    """Per chat: every message once, in order, each followed by its one reply before the next message.

    Returns how many messages passed: in a chat whose order is right, stored unaltered with
    exactly one reply, between it and the next message, and not in ``wrong`` (the person
    got a wrong reply or none).
    """
    texts = {(inbound.scope, inbound.ext_id): inbound.text for inbound in inbounds}
    verified = 0
    for scope in scopes:
        rows = store.messages(scope)
        users = [m for m in rows if m.role == "user"]
        replies = [m for m in rows if m.role == "agent"]
        order = [m.ext_id for m in users]
        wanted = [str(i) for i in range(per_chat)]
        if order != wanted:
            missing = len(set(wanted) - set(order))
            if missing:
                out.fail("lost", f"{scope}: {missing} messages missing", missing)
            if len(order) > len(set(order)):
                out.fail("duplicated", f"{scope}: messages stored twice", len(order) - len(set(order)))
            if not missing:
                out.fail("crashed", f"{scope}: order broken: {order[:10]}")
        per_message = Counter(r.reply_to for r in replies)
        for index, m in enumerate(users):
            right = order == wanted and (scope, m.ext_id) not in wrong
            if texts.get((scope, m.ext_id or "")) != m.text:
                out.fail("lost", f"{scope} #{m.ext_id}: text altered")
                right = False
            n = per_message.get(m.id, 0)
            if n == 0:
                out.fail("lost", f"{scope} #{m.ext_id}: no stored reply")
            elif n > 1:
                out.fail("duplicated", f"{scope} #{m.ext_id}: {n} replies", n - 1)
            else:
                reply = next(r for r in replies if r.reply_to == m.id)
                upper = users[index + 1].id if index + 1 < len(users) else float("inf")
                if not m.id < reply.id < upper:
                    out.fail("crashed", f"{scope} #{m.ext_id}: its reply is not between it and the next message")
                    right = False
            verified += right and n == 1
    return verified


def _check_calls(requests: Sequence[Sequence[dict[str, Any]]], out: Outcome) -> None:
    """Every model call carries only its own chat's messages."""
    for messages in requests:
        own = _SCOPE_TAG.findall(last_user_text(messages))
        seen = {tag for message in messages for tag in _SCOPE_TAG.findall(str(message.get("content") or ""))}
        if own and seen - {own[0]}:
            out.fail("leaked", f"a call for {own[0]} carried {sorted(seen - {own[0]})[:3]}")


_OPEN_CHILD = """
import sys, time
from scopehub.memory import Store
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time() - 0.05))
while time.time() < start:
    pass
try:
    Store(sys.argv[1]).close()
    print("ok")
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


def first_open(workdir: Path, *, rounds: int = 10, processes: int = 4, seed: int = 0) -> Outcome:
    """Processes opening a new database file at the same moment (say the bot and an import started together)."""
    out = Outcome("first_open", verified={FIRST_OPENS: 0})
    with timed(out):
        workdir.mkdir(parents=True, exist_ok=True)
        failed_rounds = 0
        for index in range(rounds):
            db = workdir / f"first_open.{index}.db"
            start = time.time() + 1.5  # every interpreter is up by then, even on a loaded machine
            procs = [
                subprocess.Popen([sys.executable, "-c", _OPEN_CHILD, str(db), repr(start)], cwd=workdir, env=child_env(), stdout=subprocess.PIPE, text=True)
                for _ in range(processes)
            ]
            outputs = [proc.communicate(timeout=120)[0].strip() for proc in procs]
            failures = [output for output in outputs if output != "ok"]
            for output in failures:
                out.fail("crashed", f"round {index + 1}: {output[:200]}")
            failed_rounds += bool(failures)
            before = out.failures
            store = reopen(db, out, f"round {index + 1}")
            if store is not None:
                store.close()
            if out.failures == before:  # the file they all opened is sound
                out.verify(FIRST_OPENS, outputs.count("ok"))
        out.note(f"{rounds} rounds of {processes} processes opening a new file at once; {failed_rounds} rounds with a failure")
    return out




SCENARIOS = {
    "concurrency": Scenario(
        concurrency, heavy={"chats": 50, "per_chat": 40, "writer_messages": 5000}, quick={"chats": 10, "per_chat": 10, "writer_messages": 500}
    ),
    "concurrency_litellm": Scenario(
        concurrency,
        heavy={"chats": 50, "per_chat": 40, "writer_messages": 5000, "use_litellm": True},
        quick={"chats": 5, "per_chat": 5, "writer_messages": 200, "use_litellm": True},
    ),
    "first_open": Scenario(first_open, heavy={"rounds": 10, "processes": 4}, quick={"rounds": 3, "processes": 3}),
}

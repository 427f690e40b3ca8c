"""``agents-hub chat``: the terminal transport, on the same hub as Telegram.

Same router, memory, agents and chat commands; the scope is ``user:local`` unless
``--scope`` says otherwise. Three ways in: ``--message TEXT`` (one message, then exit),
piped standard input (each line is a message; exit at end of input), or an interactive
prompt (``/quit`` or Ctrl-D leaves; Ctrl-C stops the reply being written, or leaves at
the prompt).

Output (standard output; logs go to standard error, warnings only unless
``HUB_LOG_LEVEL`` is set). Each reply is its text followed by
one metadata line::

    Added "buy milk" (#1).
    [tasks ← inbox] 412 tokens (full history 1,930)

The metadata line is ``[AGENT]`` or ``[AGENT ← OTHER, OTHER]`` (the ``also_sees`` agents
the router let it read), then the tokens this call was sent and, in brackets, what
sending the whole recent history would have cost. Numbers use ``,`` thousands
separators. A reply whose model call failed ends with `` · error``; a chat command
(``/help``, ``/facts`` ...) costs no model call and shows ``[hub] command``. With
``--json`` each reply is instead one JSON object per line (``text``, ``kind``, ``agent``,
``also_sees``, ``via``, ``tokens``, ``full_history_tokens``, ``message_id``,
``reply_id``): use that to parse.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from typing import TYPE_CHECKING, TextIO

import click

if TYPE_CHECKING:
    from scopehub.hub.orchestrator import Hub, Inbound, Reply

__all__ = ["DEFAULT_SCOPE", "NOISY_LOGGERS", "QUIT_WORDS", "TerminalChat", "format_meta", "format_reply"]

DEFAULT_SCOPE = "user:local"
QUIT_WORDS = frozenset({"/quit", "/exit", "/q"})
PROMPT = "you> "
RETRY_FIRST, RETRY_MAX = 0.5, 5.0  # seconds between tries while the database is unavailable

# Third-party loggers that narrate every HTTP request at INFO; noise in a chat.
NOISY_LOGGERS = ("httpx", "httpcore", "LiteLLM", "litellm", "openai")


def format_meta(reply: Reply) -> str:
    """The metadata line shown under a reply (see the module docstring)."""
    if reply.kind == "command":
        return "[hub] command"
    agent = reply.agent or "?"
    label = f"{agent} ← {', '.join(reply.also_sees)}" if reply.also_sees else agent
    total = reply.tokens.get("total", 0)
    line = f"[{label}] {total:,} tokens (full history {reply.full_history_tokens:,})"
    if reply.kind == "error":
        line += " · error"
    return line


def format_reply(reply: Reply, *, as_json: bool = False) -> str:
    """What is printed for one reply: text and metadata line, or one JSON line."""
    if as_json:
        return json.dumps(
            {
                "text": reply.text,
                "kind": reply.kind,
                "agent": reply.agent,
                "also_sees": list(reply.also_sees),
                "via": reply.via,
                "tokens": reply.tokens,
                "full_history_tokens": reply.full_history_tokens,
                "message_id": reply.message_id,
                "reply_id": reply.reply_id,
            },
            ensure_ascii=False,
        )
    return f"{reply.text}\n{format_meta(reply)}"


class TerminalChat:
    """Feeds lines to the hub and prints replies; one event loop for the whole session."""

    def __init__(self, hub: Hub, scope: str, *, as_json: bool = False, out: TextIO | None = None) -> None:
        self.hub = hub
        self.scope = scope
        self.as_json = as_json
        self.out = out

    def _print(self, text: str) -> None:
        click.echo(text, file=self.out)

    async def send(self, text: str) -> Reply | None:
        """Answer one message and print it; returns the reply. Learning from it (fact
        extraction) runs in the background and gives way to the next message.

        While the database is unavailable the message is kept (here, then in the store)
        and tried again with a growing pause; the person is told once, and the lines
        after it wait their turn rather than being dropped.
        """
        from scopehub.hub.orchestrator import Inbound

        inbound = Inbound(scope=self.scope, text=text, chat="terminal", sender="local")
        reply = await self._answer_kept(inbound)
        if reply is None:
            return None
        self._print(format_reply(reply, as_json=self.as_json))
        self.hub.schedule_after_send(reply)
        return reply

    async def _answer_kept(self, inbound: Inbound) -> Reply | None:
        """``hub.handle(inbound)``, tried again while the database is unavailable. After a
        failed try the store is asked first whether the message got stored; a stored one
        is answered as it is (never stored twice)."""
        from scopehub.hub.orchestrator import Reply
        from scopehub.hub.turns import is_transient

        delay, told, look, stored = RETRY_FIRST, False, False, None
        while True:
            try:
                if look:
                    stored, look = self._stored_unanswered(inbound.text), False
                if stored is None:
                    return await self.hub.handle(inbound)
                reply = await self.hub.answer_queued(stored)
                earlier = self.hub.stored_reply(stored) if reply is None else None
                if earlier is not None:  # answered by the try that failed afterwards
                    reply = Reply(text=earlier.text, agent=earlier.agent, message_id=stored.id, reply_id=earlier.id, scope=self.scope)
                return reply
            except Exception as exc:
                if not is_transient(exc):
                    raise
                if not told:
                    click.echo(f"the database is unavailable; your message is kept and will be answered ({exc})", err=True)
                    told = True
                look = stored is None
            await asyncio.sleep(delay)
            delay = min(RETRY_MAX, delay * 2)

    def _stored_unanswered(self, text: str):  # -> Message | None
        """This scope's newest message from the person if it is ``text`` and unanswered: the
        message a failed try stored before the database went away."""
        latest = self.hub.store.latest(self.scope, role="user")
        if latest is not None and latest.text == text and not self.hub.store.is_answered(latest.id):
            return latest
        return None

    @staticmethod
    async def read_line(prompt: str) -> str:
        """``input(prompt)`` in a daemon thread, so background work goes on while the person
        types (and an abandoned read never holds the process at exit)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()

        def settle(value: str | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value or "")

        def read() -> None:
            try:
                value = input(prompt)
            except BaseException as exc:  # EOFError (Ctrl-D) reaches the caller
                loop.call_soon_threadsafe(settle, None, exc)
            else:
                loop.call_soon_threadsafe(settle, value, None)

        threading.Thread(target=read, name="terminal-input", daemon=True).start()
        return await future

    def run_lines(self, runner: asyncio.Runner, lines: list[str] | TextIO) -> None:
        """Each non-empty line is a message; stops at the end or at /quit."""
        for raw in lines:
            line = raw.strip()
            if not line:
                continue
            if line.lower() in QUIT_WORDS:
                break
            runner.run(self.send(line))
            if not self.as_json:
                self._print("")  # a blank line between exchanges

    def run_interactive(self, runner: asyncio.Runner) -> None:
        """The prompt loop: /quit or Ctrl-D leaves; Ctrl-C cancels a reply or leaves at the prompt."""
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  - line editing and history for input()
        while True:
            try:
                line = runner.run(self.read_line(PROMPT)).strip()
            except EOFError:
                click.echo("", err=True)
                return
            except KeyboardInterrupt:
                click.echo("", err=True)
                return
            if not line:
                continue
            if line.lower() in QUIT_WORDS:
                return
            try:
                runner.run(self.send(line))
            except KeyboardInterrupt:
                # asyncio.Runner cancelled the reply; the message itself is already stored.
                click.echo("\n(interrupted; your message is saved)", err=True)
            self._print("")

"""``agents-hub chat``: the terminal transport, on the same hub as Telegram.

Same router, memory, agents and chat commands; the scope is ``user:local`` unless
``--scope`` says otherwise. Three ways in: ``--message TEXT`` (one message, then exit),
piped standard input (each line is a message, and the lines between two lines of
``\"\"\"`` are one message; exit at end of input), or an interactive prompt (``/quit`` or
Ctrl-D leaves; Ctrl-C stops the reply being written, or leaves at the prompt). At the
prompt a pasted text of several lines (an email) is one message wherever the terminal
and readline support bracketed paste (most do); a line of ``\"\"\"`` opens a block of lines
typed one by one, which the next such line sends.

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
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, TextIO

import click

if TYPE_CHECKING:
    from scopehub.hub.orchestrator import Hub, Inbound, Reply

__all__ = ["BLOCK", "DEFAULT_SCOPE", "NOISY_LOGGERS", "QUIT_WORDS", "TerminalChat", "format_meta", "format_reply", "messages_of"]

DEFAULT_SCOPE = "user:local"
QUIT_WORDS = frozenset({"/quit", "/exit", "/q"})
PROMPT = "you> "
RETRY_FIRST, RETRY_MAX = 0.5, 5.0  # seconds between tries while the database is unavailable
MORE = "...> "
BLOCK = '"""'  # a line of it opens (and the next one closes) a message of several lines

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


def _why_waiting(exc: BaseException) -> tuple[str, str]:
    """What the person is told while their message waits: ``("busy", …)`` when another
    session holds a lock it needs (SQLite's write lock, PostgreSQL's lock timeout), else
    ``("unavailable", …)``; and the cause on one line (without the query's text)."""
    why = " ".join(str(exc).split("\nLINE ")[0].split()) or type(exc).__name__
    locked = getattr(exc, "sqlstate", None) == "55P03" or "database is locked" in why
    return ("busy" if locked else "unavailable"), why


class TerminalChat:
    """Feeds lines to the hub and prints replies; one event loop for the whole session."""

    def __init__(
        self, hub: Hub, scope: str, *, as_json: bool = False, out: TextIO | None = None, patience: float | None = None
    ) -> None:
        self.hub = hub
        self.scope = scope
        self.as_json = as_json
        self.out = out
        # Seconds a message is tried again while the database is unavailable; None: until
        # it is back (the interactive and piped chat). One ``--message`` gives up after it.
        self.patience = patience

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
        started = asyncio.get_running_loop().time()
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
                away, why = _why_waiting(exc)
                if self.patience is not None and asyncio.get_running_loop().time() - started >= self.patience:
                    from scopehub.memory import StoreUnavailable

                    kept = "it is stored but not answered" if stored is not None else "it was not stored"
                    raise StoreUnavailable(f"the database stayed {away} for {self.patience:.0f} s ({why}); {kept}") from exc
                if not told:
                    if self.patience is None:
                        click.echo(f"the database is {away}; your message is kept and will be answered ({why})", err=True)
                    else:
                        click.echo(f"the database is {away}; trying again for up to {self.patience:.0f} s ({why})", err=True)
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

    def run_lines(self, runner: asyncio.Runner, lines: Iterable[str]) -> None:
        """Each non-empty line is a message, and a block between two lines of ``\"\"\"`` is
        one message (a pasted email); stops at the end or at /quit."""
        for text in messages_of(lines):
            if text.lower() in QUIT_WORDS:
                break
            runner.run(self.send(text))
            if not self.as_json:
                self._print("")  # a blank line between exchanges

    def read_message(self) -> str:
        """One message from the person at the prompt (the main thread's ``input()``, so
        readline's line editing and bracketed paste work: a pasted email is one message).
        A line of ``\"\"\"`` opens a block that ends at the next such line."""
        first = input(PROMPT)
        if first.strip() != BLOCK:
            return first.strip()
        lines = []
        while (line := input(MORE)).strip() != BLOCK:
            lines.append(line)
        return "\n".join(lines).strip()

    def run_interactive(self, runner: asyncio.Runner | None = None) -> None:
        """The prompt loop: /quit or Ctrl-D leaves; Ctrl-C cancels a reply or leaves at the prompt.

        The hub runs on an event loop in a thread of its own, so that learning from the last
        message goes on while the person types, and the prompt reads in the main thread:
        Python's readline (history, editing, bracketed paste) serves only that thread.
        """
        enable_bracketed_paste()
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="hub-loop", daemon=True)
        thread.start()
        try:
            while True:
                try:
                    text = self.read_message()
                except (EOFError, KeyboardInterrupt):
                    click.echo("", err=True)
                    return
                if not text:
                    continue
                if text.lower() in QUIT_WORDS:
                    return
                future = asyncio.run_coroutine_threadsafe(self.send(text), loop)
                try:
                    future.result()
                except KeyboardInterrupt:
                    # Ctrl-C reaches the main thread: the reply is cancelled, the message is already stored.
                    future.cancel()
                    with contextlib.suppress(Exception, KeyboardInterrupt):
                        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(timeout=5)
                    click.echo("\n(interrupted; your message is saved)", err=True)
                self._print("")
        finally:
            # Learning still in flight finishes on the loop it started on, then the loop stops.
            with contextlib.suppress(Exception, KeyboardInterrupt):
                asyncio.run_coroutine_threadsafe(self.hub.drain(), loop).result()
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            if not thread.is_alive():
                loop.close()


def enable_bracketed_paste() -> bool:
    """Line editing and history for ``input()``, and bracketed paste: the terminal marks a
    paste, and readline takes its newlines as text, so a pasted email is one message.
    Python's readline leaves bracketed paste off (readline 8.2 here); False without readline."""
    try:
        import readline
    except ImportError:
        return False
    readline.parse_and_bind("set enable-bracketed-paste on")
    return True


def messages_of(lines: Iterable[str]) -> Iterator[str]:
    """The messages in piped lines: each non-empty line, or the lines between two lines of
    ``\"\"\"`` joined as one message (an unclosed block runs to the end of input)."""
    block: list[str] | None = None
    for raw in lines:
        line = raw.rstrip("\r\n")
        if line.strip() == BLOCK:
            if block is None:
                block = []
                continue
            text = "\n".join(block).strip()
            block = None
            if text:
                yield text
            continue
        if block is not None:
            block.append(line)
        elif line.strip():
            yield line.strip()
    if block is not None and "\n".join(block).strip():
        yield "\n".join(block).strip()

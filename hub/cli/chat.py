"""``agents-hub chat``: the terminal chat on the same hub as the Telegram bot."""

from __future__ import annotations

import asyncio
import logging

import click

from scopehub.hub.cli.options import scope_option, settings_of, store_of
from scopehub.hub.transports.terminal import NOISY_LOGGERS, TerminalChat

__all__ = ["chat_command"]


@click.command("chat")
@scope_option(help="whose memory: user:<id> or group:<id>")
@click.option("--message", "-m", "message", default=None, help="answer this one message and exit")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per reply (for scripts)")
@click.pass_context
def chat_command(ctx: click.Context, scope: str, message: str | None, as_json: bool) -> None:
    """Chat with the hub in the terminal (same agents, memory and commands as Telegram).

    Reads lines from standard input when it is not a terminal: each line is a message, and
    the lines between two lines of three double quotes are one message (a pasted email).
    Each reply is followed by
    `[agent ← also_sees] N tokens (full history M)`. With --message, the exit code is 1
    when the model call failed.
    """
    from scopehub.hub.app import build_hub, build_model

    if message is not None and not message.strip():
        raise click.BadParameter("the message is empty", param_hint="--message")
    settings = settings_of(ctx)
    if "log_level" not in settings.model_fields_set:
        # A chat is for people: only warnings unless HUB_LOG_LEVEL asks for more.
        logging.getLogger().setLevel(logging.WARNING)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))
    # Before reading any input: no model is one clear error (ModelNotConfigured, exit 2).
    model = build_model(settings)
    load = getattr(model, "load", None)
    if callable(load):
        load()  # the embedded model loads now, not during the first reply
    # litellm is imported where it is used (seconds of CPU), silenced there (import_litellm);
    # an OpenAI-compatible server is reached without it (hub/models/openai_compat.py).
    hub = build_hub(settings, store=store_of(ctx), model=model)
    hub.warm_up()  # tokenizer, imports and the embedded model's prompts now, not during the first reply
    # One --message gives up after a claim TTL while the database is unavailable (a script
    # must not hang); a chat keeps its messages until the database is back.
    chat = TerminalChat(hub, scope, as_json=as_json, patience=settings.claim_ttl if message is not None else None)
    stdin = click.get_text_stream("stdin")
    failed = False
    with asyncio.Runner() as runner:
        if message is not None:
            reply = runner.run(chat.send(message))
            failed = reply is not None and reply.kind == "error"
        elif not stdin.isatty():
            chat.run_lines(runner, stdin)
        else:
            click.echo(
                f"agents-hub chat · scope {scope} · model {getattr(model, 'name', '?')} · "
                f"{', '.join(hub.registry.names)}\n/help for commands, /quit or Ctrl-D to leave. "
                'A pasted text of several lines is one message; or type """ on a line, the lines, and """ again.',
                err=True,
            )
            chat.run_interactive()
        runner.run(hub.drain())
    if failed:
        ctx.exit(1)  # scripts must see that the model call failed (the apology is printed)

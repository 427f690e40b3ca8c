"""``agents-hub dispatch``: send files into the hub's inboxes, see what waits, drain a team's
outbox, and run the intake without a chat transport.

The root is ``--root``, else the hub's setting (``HUB_MAILDIR``, else a folder beside the
database: ``agents-hub-maildir`` next to ``agents-hub.db``).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import click

from scopehub.memory import InvalidScope

from .layout import MAX_FILE_BYTES, PRIORITIES
from .outbox import ack_outbox, list_outbox, read_outbox
from .send import send_dispatch
from .status import backlog, dlq_count

__all__ = ["dispatch_group"]

root_option = click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The Maildir root folder (default: HUB_MAILDIR, else <database>-maildir beside the database).",
    callback=lambda ctx, param, value: value if value is not None else _configured_root(ctx),
)


def _configured_root(ctx: click.Context) -> Path:
    from scopehub.hub.cli.options import settings_of
    from scopehub.hub.settings import maildir_root

    root = maildir_root(settings_of(ctx))
    if root.exists() and not root.is_dir():  # --root is checked by click; HUB_MAILDIR here
        raise click.BadParameter(f"{str(root)!r} is a file, not a folder", ctx=ctx, param_hint="HUB_MAILDIR")
    return root
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
team_option = click.option("--team", "-t", required=True, help="The outside team whose outbox this is.")


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


@click.group("dispatch")
def dispatch_group() -> None:
    """File dispatches between outside programs and the hub (Maildir: tmp/, new/, cur/)."""


@dispatch_group.command("send")
@root_option
@click.option("--scope", "-s", required=True, help="user:<id> (one customer) or group:<id> (one group).")
@click.option("--to", "to", required=True, help="The agent to deliver to, or 'hub' to let the hub route it.")
@click.option("--from", "sender", required=True, help="Who sends it (a simple name, e.g. cron).")
@click.option("--priority", "-p", type=click.Choice(PRIORITIES), default="normal", show_default=True, help="Triage order.")
@click.option("--subject", default="", help="A one-line subject (also the file name's slug).")
@click.option("--thread", default=None, help="A thread id to group related dispatches.")
@click.option("--kind", default=None, help="What sort of dispatch this is (free text, e.g. report).")
@click.option("--reply", is_flag=True, help="Ask for the answer back in outbox/<from>/.")
@json_option
@click.argument("body", type=click.File("rb"), metavar="FILE|-")
def send_command(
    root: Path,
    scope: str,
    to: str,
    sender: str,
    priority: str,
    subject: str,
    thread: str | None,
    kind: str | None,
    reply: bool,
    as_json: bool,
    body: Any,
) -> None:
    """Deliver the body read from FILE (or - for stdin) into the inbox of SCOPE/TO; prints its path."""
    raw = body.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise click.BadParameter("the body is over 1 MiB", param_hint="FILE")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.BadParameter(f"the body is not UTF-8 text ({exc.reason})", param_hint="FILE") from None
    try:
        path = send_dispatch(
            root,
            scope,
            to,
            sender=sender,
            body=text,
            subject=subject,
            priority=priority,
            thread=thread,
            kind=kind,
            reply=reply,
        )
    except (InvalidScope, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    assert path is not None
    if as_json:
        _echo_json({"path": str(path), "name": path.name})
    else:
        click.echo(str(path))


@dispatch_group.command("status")
@root_option
@json_option
def status_command(root: Path, as_json: bool) -> None:
    """What waits in each inbox and team outbox (count, age of the oldest, files abandoned in
    tmp/ for over an hour), and the dlq count."""
    rows = backlog(root)
    dead = dlq_count(root)
    if as_json:
        _echo_json({"inboxes": [row.as_dict() for row in rows], "dlq": dead})
        return
    if not rows:
        click.echo(f"no inboxes under {root}")
    else:
        width = max(len(row.box) for row in rows)
        click.echo(f"{'inbox'.ljust(width)}  {'waiting':>7}  oldest")
        for row in rows:
            left = f"  ({row.abandoned} abandoned in tmp/: a writer died mid-write)" if row.abandoned else ""
            click.echo(f"{row.box.ljust(width)}  {row.waiting:>7}  {_age(row.oldest_age)}{left}")
    click.echo(f"dlq: {dead} file(s)")


@dispatch_group.command("list")
@root_option
@team_option
@click.option("--all", "include_acked", is_flag=True, help="Also list acknowledged files (cur/).")
@json_option
def list_command(root: Path, team: str, include_acked: bool, as_json: bool) -> None:
    """The files waiting in a team's outbox (names sort by time; read them, then ack them)."""
    try:
        rows = list_outbox(root, team, include_acked=include_acked)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        _echo_json([{"name": name, "state": state} for name, state in rows])
        return
    for name, state in rows:
        click.echo(f"{name}  (acked)" if state == "cur" else name)


@dispatch_group.command("read")
@root_option
@team_option
@json_option
@click.argument("name")
def read_command(root: Path, team: str, as_json: bool, name: str) -> None:
    """Print one file of a team's outbox (it stays unacknowledged)."""
    try:
        item = read_outbox(root, team, name)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        data = item.as_dict()
        data.pop("text")
        _echo_json(data)
    else:
        click.echo(item.text, nl=not item.text.endswith("\n"))


@dispatch_group.command("ack")
@root_option
@team_option
@json_option
@click.argument("name")
def ack_command(root: Path, team: str, as_json: bool, name: str) -> None:
    """Mark one file of a team's outbox as handled (moves it from new/ to cur/)."""
    try:
        path, moved = ack_outbox(root, team, name)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        _echo_json({"path": str(path), "acked_now": moved})
    else:
        click.echo(str(path) if moved else f"{path} (already acked)")


@dispatch_group.command("run")
@click.option("--once", is_flag=True, help="Deliver what is waiting now, then exit (for cron and scripts).")
@click.option("--poll", is_flag=True, help="Poll every few seconds instead of using inotify.")
@root_option
@click.pass_context
def run_command(ctx: click.Context, once: bool, poll: bool, root: Path) -> None:
    """Deliver the inboxes' files to the hub's agents and write the asked-for replies.

    Each file is stored as a message of its scope before any model call and answered by
    its agent (a file in ``hub/`` is routed); the reply is stored in the scope's memory and,
    with ``reply: true``, written to ``outbox/<from>/``. Without --once it keeps watching.
    """
    import asyncio

    from scopehub.hub.cli.options import hub_of
    from scopehub.hub.transports.maildir.bridge import (
        RECURRING_CHECK,
        build_intake,
        send_recurring,
        start_watcher,
    )

    hub = hub_of(ctx, model_required=True)

    async def run() -> None:
        send_recurring(hub, root)
        if once:
            report = await build_intake(hub, root).drain_once()
            await hub.drain()
            click.echo(
                f"delivered {report.delivered}, rejected {report.rejected}, waiting {report.waiting}, failed {report.failed}"
            )
            return
        watcher = start_watcher(hub, root, force_polling=poll)
        click.echo(f"watching {root} ({watcher.mode}); Ctrl-C to stop", err=True)
        try:
            while True:
                await asyncio.sleep(RECURRING_CHECK)
                send_recurring(hub, root)
        finally:
            await watcher.stop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())

"""``agents-hub``: a thin click layer over the library.

Library code raises typed errors; :func:`main` turns them into one short line on
stderr and exit code 2 (no traceback for people).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from scopehub.hub.cli.faults import fault_line
from scopehub.hub.cli.options import echo_json, hub_of, json_option, scope_option, store_of
from scopehub.hub.errors import HubError
from scopehub.hub.wording import plural
from scopehub.memory import ImportReport, StoreError, read_chatlog

__all__ = ["cli", "main"]

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


class LazyGroup(click.Group):
    """A group whose subcommands live beside the features they drive and load on first use.

    Keeps ``agents-hub import`` from importing python-telegram-bot, litellm or the eval code.
    """

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})  # command name -> "module:attribute"

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            import importlib

            module_name, attribute = self.lazy[cmd_name].split(":")
            self.add_command(getattr(importlib.import_module(module_name), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)




@click.group(
    cls=LazyGroup,
    lazy={
        "facts": "scopehub.hub.cli.facts:facts_group",
        "forget": "scopehub.hub.cli.facts:forget_command",
        "search": "scopehub.hub.cli.search:search_command",
        "dispatch": "scopehub.hub.transports.maildir.cli:dispatch_group",
        "events": "scopehub.hub.cli.events:events_group",
        "claims": "scopehub.hub.cli.claims:claims_command",
        "chat": "scopehub.hub.cli.chat:chat_command",
        "telegram": "scopehub.hub.cli.telegram:telegram_command",
        "channels": "scopehub.hub.cli.team:channels_group",
        "memory": "scopehub.hub.cli.team:memory_group",
        "digest": "scopehub.hub.cli.digest:digest_group",
        "reflect": "scopehub.hub.cli.digest:reflect_command",
        "knowledge": "scopehub.hub.cli.digest:knowledge_group",
        "console": "scopehub.hub.cli.console:console_command",
        "migrate": "scopehub.hub.cli.migrate:migrate_command",
    },
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option("--db", type=click.Path(dir_okay=False), default=None, help="database: a SQLite file or a postgresql:// URL (default: HUB_DB or agents-hub.db)")
@click.version_option(package_name="scopehub")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """A team of specialist agents behind one hub, each sent only the memory it needs."""
    ctx.ensure_object(dict)["db"] = db


@cli.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--scope", "-s", default=None, help="scope for lines that carry none")
@click.option("--batch", default=2000, show_default=True, help="messages per transaction")
@click.pass_context
def import_command(ctx: click.Context, file: str, scope: str | None, batch: int) -> None:
    """Import a canonical JSONL chat log (idempotent by scope and id; safe to re-run)."""
    store = store_of(ctx)
    report = ImportReport()
    source = click.get_text_stream("stdin") if file == "-" else file
    try:
        store.import_records(read_chatlog(source, report), default_scope=scope, batch_size=batch, report=report)
    except UnicodeDecodeError as exc:
        kept = f"; {plural(report.added, 'message')} before it were imported" if report.added else ""
        raise click.ClickException(
            f"{file} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} cannot be read){kept}: save it as UTF-8 and import again"
        ) from None
    click.echo(f"{report.added:,} added, {report.skipped:,} already present, {len(report.invalid):,} invalid")
    for line, reason in report.invalid[:20]:
        click.echo(f"  line {line}: {reason}", err=True)
    if len(report.invalid) > 20:
        click.echo(f"  ... and {len(report.invalid) - 20} more", err=True)
    if report.invalid:
        ctx.exit(1)


@cli.command("context")
@scope_option()
@click.option("--agent", "-a", required=True, help="the agent whose context to show")
@click.option("--also", default="", help="comma-separated also_sees agents")
@json_option
@click.pass_context
def context_command(ctx: click.Context, scope: str, agent: str, also: str, as_json: bool) -> None:
    """Print exactly what AGENT would be sent for the scope's newest message from a person.

    Chat commands (/help, /usage ...) are never sent to an agent, so the newest message
    that is not one is taken. ``--json`` carries the provider messages as sent (system
    included), the tool schemas, the tokens per section, and the history and current
    message with their internal ``id`` and imported ``ext_id``.
    """
    hub = hub_of(ctx, must_exist=True)
    if agent not in hub.registry:
        raise click.BadParameter(f"unknown agent {agent!r}; agents: {', '.join(hub.registry.names)}", param_hint="--agent")
    also_sees = tuple(name.strip() for name in also.split(",") if name.strip())
    unknown = [name for name in also_sees if name not in hub.registry]
    if unknown:
        raise click.BadParameter(f"unknown agent(s) {', '.join(unknown)}", param_hint="--also")
    latest = hub.store.latest(scope, role="user")
    if latest is None:
        raise click.ClickException(f"scope {scope} has no message from a person")
    built = hub.context_for(agent, scope, latest, also_sees)
    if as_json:
        echo_json(
            {
                "agent": agent,
                "also_sees": list(also_sees),
                "scope": scope,
                "messages": built.messages,
                "tools": built.tools,
                "history": [
                    {"id": m.id, "ext_id": m.ext_id, "role": m.role, "agent": m.agent, "text": m.text} for m in built.history
                ],
                "message": {"id": latest.id, "ext_id": latest.ext_id, "role": latest.role, "agent": latest.agent, "text": latest.text},
                "tokens": built.tokens,
                "full_history_tokens": built.full_history_tokens,
            }
        )
        return
    click.echo(f"agent {agent}, also_sees [{', '.join(also_sees)}], scope {scope}, message #{latest.id}")
    for item in built.messages:
        click.echo(f"--- {item['role']}")
        click.echo(item["content"])
    tokens = built.tokens
    click.echo("--- tokens: " + ", ".join(f"{k} {v}" for k, v in tokens.items()))
    click.echo(f"--- full history would be {built.full_history_tokens} tokens")


@cli.command("usage")
@scope_option()
@json_option
@click.pass_context
def usage_command(ctx: click.Context, scope: str, as_json: bool) -> None:
    """Tokens sent against full history; provider input, cached and billed-equivalent tokens, cost; the digest."""
    from scopehub.hub.commands import format_digest_usage, format_usage, usage_figures
    from scopehub.memory import digest_usage

    store = store_of(ctx, must_exist=True)
    usage = store.usage(scope)
    digest = digest_usage(store, scope)
    if as_json:
        echo_json({**usage_figures(usage), "digest": digest})
        return
    click.echo(format_usage(usage))
    if digest["calls"] or any(digest["compactions"].values()) or digest["failed"]:
        click.echo(format_digest_usage(digest))


@cli.command("agents")
@json_option
@click.pass_context
def agents_command(ctx: click.Context, as_json: bool) -> None:
    """List every agent: name, description, tools, fixed tokens per call."""
    from scopehub.agents import agent_tools, discover_agents
    from scopehub.hub.context import agent_prompt, fixed_tokens
    from scopehub.hub.context.tokens import get_tokenizer

    registry = discover_agents()
    tokenizer = get_tokenizer()
    rows = []
    for spec in registry:
        prompt = agent_prompt(spec)
        # The same count every call records for persona + rules + tools.
        offered = sum(fixed_tokens(prompt, tokenizer, optional=True).values())
        base = sum(fixed_tokens(prompt, tokenizer, optional=prompt.always_optional).values())
        # The team tool of an agent without a channel comes only on the calls that may use it.
        with_team = sum(fixed_tokens(prompt, tokenizer, optional=True, team=True).values())
        rows.append(
            {
                "name": spec.name,
                "description": spec.description,
                "tools": [t.name for t in agent_tools(spec)],
                "search_memory": "always" if prompt.always_optional else "when needed",
                "team": "when needed" if prompt.team_tools else "always",
                "fixed_tokens": offered,
                "fixed_tokens_without_search": base,
                "team_tokens_when_offered": with_team - offered,
            }
        )
    if as_json:
        echo_json(rows)
    else:
        for row in rows:
            click.echo(f"{row['name']:<12} {row['fixed_tokens']:>4} tokens  {row['description']}")
            notes = [] if row["search_memory"] == "always" else [f"search_memory when needed; {row['fixed_tokens_without_search']} tokens without it"]
            if row["team"] == "when needed":
                notes.append(f"team when needed: +{row['team_tokens_when_offered']} tokens on those calls")
            note = f" ({'; '.join(notes)})" if notes else ""
            click.echo(f"{'':<12}      tools: {', '.join(row['tools'])}{note}")
        if rows:
            mean = sum(row["fixed_tokens"] for row in rows) / len(rows)
            click.echo(f"mean fixed tokens per call: {mean:.1f} with search_memory offered (team only when needed)")
    for module, reason in registry.errors.items():
        click.echo(f"warning: agent module {module} not loaded: {reason}", err=True)


@cli.group(
    "eval",
    cls=LazyGroup,
    lazy={
        "tokens": "scopehub.eval.replay:tokens_command",
        "awareness": "scopehub.eval.awareness_folds:awareness_command",
        "routing": "scopehub.eval.routing:routing_command",
        "simulate": "scopehub.eval.simulate:simulate_command",
        "search": "scopehub.eval.search:search_eval_command",
        "faults": "scopehub.eval.faults:faults_command",
        "tools": "scopehub.eval.tools:tools_command",
        "lessons": "scopehub.eval.lessons:lessons_command",
        "digest": "scopehub.eval.digest:digest_eval_command",
        "local": "scopehub.eval.local:local_command",
        "phrasings": "scopehub.eval.local_intents:phrasings_command",
    },
)
def eval_group() -> None:
    """Evaluations on public dialogue datasets (token savings, routing, search, tool offer, faults, digest) scripted replays (lessons); the embedded model's first session (local)."""


@cli.group(
    "bench",
    cls=LazyGroup,
    lazy={
        "search": "scopehub.eval.search:search_bench_command",
        "events": "scopehub.eval.events_bench:events_bench_command",
        "console": "scopehub.eval.console_bench:console_bench_command",
        "workers": "scopehub.eval.workers:workers_bench_command",
        "hub": "scopehub.eval.hub_bench:hub_bench_command",
        "import": "scopehub.eval.import_bench:import_bench_command",
        "page": "scopehub.eval.bench_page:page_command",
    },
)
def bench_group() -> None:
    """Benchmarks that print figures."""


def main(argv: list[str] | None = None) -> None:
    """Console entry point: typed errors become one line and exit code 2."""
    try:
        code = cli.main(args=argv, prog_name="agents-hub", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)  # ctx.exit(1) returns its code here instead of exiting
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except (HubError, StoreError) as exc:
        # One line: a driver's message may carry its own line breaks (psycopg adds a hint).
        click.echo(f"error: {fault_line(exc)}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        # A database or file fault (locked, read-only, disk full, connection lost) is one
        # line for people, never a traceback; anything else is a bug and shows as one.
        line = fault_line(exc)
        if line is None:
            raise
        click.echo(f"error: {line}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()

"""``agents-hub claims``: the work in flight, as the hub's claims record it."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import click

from scopehub.hub.cli.options import echo_json, json_option, scope_option, store_of
from scopehub.memory import Claim, expired_claims, live_claims, parse_holder

__all__ = ["claims_command"]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds")


def _as_json(claim: Claim, now: float) -> dict[str, Any]:
    identity = parse_holder(claim.holder)
    return {
        "scope": claim.scope,
        "key": claim.key,
        "holder": claim.holder,
        "host": identity.host if identity else None,
        "pid": identity.pid if identity else None,
        "note": claim.note,
        "acquired": _iso(claim.acquired),
        "expires": _iso(claim.expires),
        "expires_in_s": round(claim.expires - now, 1),
    }


def _holder(claim: Claim) -> str:
    identity = parse_holder(claim.holder)
    return f"{identity.host}:{identity.pid}" if identity else claim.holder


@click.command("claims")
@scope_option(every_scope=True, help="one scope (default: every scope)")
@click.option("--left", is_flag=True, help="claims left by their holder instead: run out, or their process is gone")
@json_option
@click.pass_context
def claims_command(ctx: click.Context, scope: str | None, left: bool, as_json: bool) -> None:
    """List the live claims: who is doing what right now (answers, reminders, background jobs).

    A claim is live until its TTL runs out; one whose process on this machine is gone
    is not live (the next worker takes it over at once).
    """
    store = store_of(ctx, must_exist=True)
    now = time.time()
    if left:
        found = [c for c in expired_claims(store, now=now, limit=1000) if scope is None or c.scope == scope]
    else:
        found = live_claims(store, scope=scope, now=now)
    if as_json:
        echo_json([_as_json(c, now) for c in found])
        return
    if not found:
        where = f" in {scope}" if scope else ""
        click.echo(f"no {'left' if left else 'live'} claims{where}")
        return
    for claim in found:
        when = f"expired {_iso(claim.expires)}" if claim.expires <= now else f"expires in {claim.expires - now:.0f} s"
        click.echo(f"{claim.scope:<16} {claim.key:<24} {_holder(claim):<28} {when:<20} {claim.note}")

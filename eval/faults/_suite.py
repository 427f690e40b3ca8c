"""The fault suite: every scenario by family, the run and its report, the command."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from .. import _report
from .._report import format_table, write_json
from . import (
    background,
    busy,
    concurrency,
    coordination,
    crashes,
    fail_open,
    hostile,
    isolation,
    maildir,
    model,
    outage,
    tables,
    workers,
)
from ._outcome import (
    COUNTS,
    Outcome,
    Scenario,
)

log = logging.getLogger(__name__)


# Every scenario by family, in the order the report lists them. Adding one: write its
# function in its family's module and add it to that module's SCENARIOS.
REGISTRY: dict[str, Scenario] = {
    **crashes.SCENARIOS,
    **concurrency.SCENARIOS,
    **model.SCENARIOS,
    **hostile.SCENARIOS,
    **isolation.SCENARIOS,
    **fail_open.SCENARIOS,
    **tables.SCENARIOS,
    **coordination.SCENARIOS,
    **background.SCENARIOS,
    **busy.SCENARIOS,
    **workers.SCENARIOS,
    **outage.SCENARIOS,
    **maildir.SCENARIOS,
}
SCENARIOS = tuple(REGISTRY)


def run_faults(
    workdir: Path,
    *,
    quick: bool = False,
    seed: int = 0,
    only: Sequence[str] = (),
    echo: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the scenarios; returns the report.

    ``{"ok": bool, "failed": [scenario, ...], "seconds": float, "scenarios": {name: {"verified":
    {unit: count}, "lost": n, "duplicated": n, "leaked": n, "crashed": n, "seconds": s,
    "notes": [...]}}}``. Nothing is summed across scenarios: their units differ.
    """
    scenarios: dict[str, Outcome] = {}
    for name in SCENARIOS:
        if only and name not in only:
            continue
        if echo:
            echo(f"{name} ...")
        scenario = REGISTRY[name]
        kwargs = dict(scenario.quick if quick else scenario.heavy)
        if name == "hostile_input" and echo is not None:
            kwargs["progress"] = True
        try:
            outcome = scenario.run(workdir / name, seed=seed, **kwargs)
            outcome.name = name
        except Exception as exc:  # a broken scenario is reported, not allowed to hide the others
            log.exception("scenario %s failed", name)
            outcome = Outcome(name)
            outcome.fail("crashed", f"the scenario itself failed: {type(exc).__name__}: {exc}")
        scenarios[name] = outcome
        if echo:
            echo(
                f"{name}: {outcome.verified_text()}; "
                + ", ".join(f"{c} {getattr(outcome, c)}" for c in COUNTS)
                + f" ({outcome.seconds:.1f} s)"
            )
    failed = [name for name, outcome in scenarios.items() if not outcome.ok]
    return {
        "ok": not failed,
        "failed": failed,
        "seconds": round(sum(o.seconds for o in scenarios.values()), 1),
        "scenarios": {name: outcome.as_dict() for name, outcome in scenarios.items()},
    }


def format_faults(report: dict[str, Any]) -> str:
    """The report as a table (each scenario's failures, then what it verified, in its own units) plus its notes."""
    rows = [
        [name, *(s[c] for c in COUNTS), round(s["seconds"], 1), "; ".join(f"{n:,} {unit}" for unit, n in s["verified"].items()) or "nothing"]
        for name, s in report["scenarios"].items()
    ]
    lines = [format_table(["scenario", *COUNTS, "seconds", "verified"], rows, title="Faults and hostile input")]
    for name, scenario in report["scenarios"].items():
        lines.append(f"\n{name}:")
        lines.extend(f"  - {note}" for note in scenario["notes"])
    if report["ok"]:
        verdict = f"nothing lost, duplicated, leaked or crashed in {len(report['scenarios'])} scenario(s)"
    else:
        verdict = f"FAILED: {', '.join(report['failed'])} (see the counts above)"
    lines.append(f"\n{verdict}")
    return "\n".join(lines)


@click.command("faults")
@_report.report_option
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="write the report as JSON here")
@click.option("--quick", is_flag=True, help="the small versions the test suite runs (about a minute; the full run takes over an hour: every scenario but hostile_input about 10 minutes, hostile_input's 100,000 examples about 55)")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of every random choice and of hypothesis")
@click.option("--scenario", "-k", "only", multiple=True, type=click.Choice(SCENARIOS), help="run only these (repeatable)")
@click.option("--workdir", type=click.Path(file_okay=False), default=None, help="keep the scenarios' databases here (default: a temporary directory)")
def faults_command(json_out: str | None, quick: bool, seed: int, only: tuple[str, ...], workdir: str | None) -> None:
    """Crash, concurrency, model-fault, hostile-input, isolation and fail-open scenarios: what was verified and lost.

    Exits with status 1 when anything was lost, duplicated, leaked or crashed.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # The scenarios provoke failures on purpose; the hub's logs of them are not the report.
    logging.getLogger().addHandler(logging.NullHandler())
    with contextlib.ExitStack() as stack:
        if workdir is None:
            base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="agents-hub-faults-")))
        else:
            base = Path(workdir)
            base.mkdir(parents=True, exist_ok=True)
        report = run_faults(base, quick=quick, seed=seed, only=only, echo=lambda line: click.echo(line, err=True))
    click.echo(format_faults(report))
    if json_out:
        write_json(json_out, report)
        click.echo(f"wrote {json_out}", err=True)
    if not report["ok"]:
        # sys.exit, not ctx.exit: hub.cli.main runs click with standalone_mode=False, where
        # ctx.exit(1) comes back as a return value it drops (exit status 0; see the report).
        sys.exit(1)

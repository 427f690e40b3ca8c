"""The start-up part of ``agents-hub bench hub --start``: a new ``agents-hub chat`` process, timed.

Two commands, run in turn (A B A B ...), each three times after one run that warms the
caches: ``agents-hub chat`` with nothing to read (start, build the hub, reach the point
where it would show the prompt, exit) and with one message (the same plus the first
reply from the loopback fake model). CPU is the child's user + system time as the
operating system accounts it; wall is the parent's clock. Compiled bytecode is cached in
a directory of the bench's own (``PYTHONPYCACHEPREFIX``), as an installed package has
it: a checkout run with ``PYTHONDONTWRITEBYTECODE`` would compile every module at every
start instead.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import _report
from .hub_bench_model import respond

__all__ = ["measure_start"]

FIRST_MESSAGE = "add buy milk to my tasks"


def _run(command: list[str], env: dict[str, str], stdin: str, cwd: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, text=True, env=env, cwd=cwd, capture_output=True, timeout=300)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {done.returncode}: {done.stderr[-800:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def measure_start(workdir: Path, *, runs: int = 3) -> dict[str, Any]:
    """CPU and wall seconds of a new chat process: to the prompt, and to its first reply."""
    from .workers import _fakes_module

    _, openai_server = _fakes_module()
    workdir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_") and k != "PYTHONDONTWRITEBYTECODE"}
    command = [sys.executable, "-m", "scopehub.hub.cli", "chat", "--scope", "user:start"]
    results: dict[str, list[tuple[float, float]]] = {"to the prompt": [], "to the first reply": []}
    with openai_server.FakeOpenAI(default=respond(openai_server)) as model:
        env.update(
            {
                "HUB_MODEL": "openai/fake",
                "HUB_API_BASE": model.base_url,
                "HUB_API_KEY": "sk-fake",
                "HUB_DB": str(workdir / "start.db"),
                "HUB_MAILDIR": str(workdir / "start-maildir"),
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "PYTHONPYCACHEPREFIX": str(workdir / "pycache"),
            }
        )
        _run(command, env, FIRST_MESSAGE + "\n", workdir)  # compiles and caches; creates the database
        for _ in range(runs):
            results["to the prompt"].append(_run(command, env, "", workdir))
            results["to the first reply"].append(_run(command, env, FIRST_MESSAGE + "\n", workdir))
    rows = []
    figures: dict[str, Any] = {}
    for name, samples in results.items():
        cpu = statistics.median(s[0] for s in samples)
        wall = statistics.median(s[1] for s in samples)
        figures[name] = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "runs": [[round(c, 3), round(w, 3)] for c, w in samples]}
        rows.append([name, round(cpu, 3), round(wall, 3), min(s[0] for s in samples), max(s[0] for s in samples)])
    figures["first reply adds cpu_s"] = round(figures["to the first reply"]["cpu_s"] - figures["to the prompt"]["cpu_s"], 3)
    figures["text"] = _report.format_table(
        ["agents-hub chat", "cpu s (median)", "wall s (median)", "cpu min", "cpu max"],
        rows,
        title=f"start-up of a new process ({runs} runs each, in turn, after one warm-up; bytecode cached)",
    )
    return figures

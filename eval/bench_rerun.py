"""``agents-hub bench page --rerun``: run again the command each report records, then rebuild the page.

Every report in ``docs/benchmarks/`` holds the command line that wrote it. Rerunning it
as recorded would not work everywhere: the datasets sit at ``../shared/data`` on the
machine that wrote most reports, a few reports were written from another checkout, and
the database comparisons ran in temporary folders and a temporary PostgreSQL server. So
each command is adapted before it runs, and only in these ways:

- a path with ``shared/data/`` in it points into ``$HUB_DATA_DIR`` (default
  ``../shared/data`` beside the checkout), the path below that kept;
- ``--report`` writes to the report's own file in the docs folder being rebuilt;
- a SQLite ``--db`` in a folder that no longer exists goes to a new temporary folder
  (same file name); a ``postgresql://`` URL is replaced by ``--postgres URL``, and
  without it the command is skipped with the reason (nothing is run against a server
  nobody named).

Commands run one at a time (figures of two benchmarks running side by side would be
each other's load), from the checkout's root, with the ``agents-hub`` next to the running
Python. Their output goes to standard error; standard output gets one line per command.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Rerun", "data_dir", "plan_reruns", "run_reruns", "scratch_folder"]

_DATA_MARK = ("shared", "data")
_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")


def data_dir(checkout: Path) -> Path:
    """Where the public datasets are: ``$HUB_DATA_DIR``, else ``../shared/data`` beside the checkout."""
    configured = os.environ.get("HUB_DATA_DIR")
    return Path(configured) if configured else checkout.resolve().parent / "shared" / "data"


@dataclass(frozen=True)
class Rerun:
    """One report's command, adapted to run here; ``skip`` says why it cannot (then nothing runs)."""

    report: Path
    recorded: str
    words: tuple[str, ...]
    last_seconds: float | None
    skip: str | None = None

    @property
    def command(self) -> str:
        """The adapted command as it may be printed (a URL's password hidden)."""
        return _PASSWORD.sub(r"\1***@", shlex.join(self.words))


def _shown_from(path: Path, checkout: Path) -> str:
    """``path`` as the reports record it: relative to the checkout the commands run in when it sits
    beside the checkout (``../shared/data/...``), else absolute."""
    shown = os.path.relpath(path.resolve(), checkout.resolve())
    return str(path.resolve()) if shown.startswith(os.pardir + os.sep + os.pardir) else shown


def _in_data(word: str, data: Path, checkout: Path) -> str:
    """``word`` with a ``.../shared/data/rest`` path moved under ``data`` (other words unchanged)."""
    parts = Path(word).parts
    for at in range(len(parts) - 1):
        if parts[at : at + 2] == _DATA_MARK:
            return _shown_from(data.joinpath(*parts[at + 2 :]), checkout)
    return word


def _adapt(
    words: list[str], report: Path, data: Path, checkout: Path, postgres: str | None, scratch: Path
) -> tuple[list[str], str | None]:
    adapted: list[str] = []
    skip = None
    index = 0
    while index < len(words):
        word = words[index]
        value = words[index + 1] if index + 1 < len(words) else None
        if word == "--report" and value is not None:
            adapted += [word, _shown_from(report, checkout)]
            index += 2
            continue
        if word == "--db" and value is not None:
            if value.startswith(("postgresql://", "postgres://")):
                if postgres is None:
                    skip = "needs a PostgreSQL server: pass --postgres URL"
                adapted += [word, postgres or value]
            elif ("/" in value or value.endswith(".db")) and not Path(value).parent.exists():
                adapted += [word, str(scratch / Path(value).name)]
            else:
                adapted += [word, value]
            index += 2
            continue
        adapted.append(_in_data(word, data, checkout))
        index += 1
    return adapted, skip


def plan_reruns(
    reports_dir: Path,
    *,
    checkout: Path,
    data: Path,
    scratch: Path,
    only: Sequence[str] = (),
    postgres: str | None = None,
) -> list[Rerun]:
    """The reports in ``reports_dir`` (those matching a glob of ``only``, when given), each with its command
    adapted to run from ``checkout``; SQLite databases whose folder is gone go to ``scratch``."""
    planned = []
    for path in sorted(reports_dir.glob("*.json")):
        if only and not any(fnmatch.fnmatch(path.name, pattern) or fnmatch.fnmatch(path.stem, pattern) for pattern in only):
            continue
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            recorded = str(report["command"])
        except (OSError, ValueError, KeyError, TypeError):
            planned.append(Rerun(path, "", (), None, skip="not a report written by --report (no command)"))
            continue
        words = shlex.split(recorded)
        if words[:1] != ["agents-hub"]:
            planned.append(Rerun(path, recorded, tuple(words), None, skip="the command is not an agents-hub command"))
            continue
        adapted, skip = _adapt(words, path, data, checkout, postgres, scratch)
        if skip is None and any("***" in word for word in adapted):
            skip = "the recorded command hides a password: pass --postgres URL"
        seconds = report.get("seconds")
        planned.append(Rerun(path, recorded, tuple(adapted), float(seconds) if isinstance(seconds, int | float) else None, skip))
    return planned


def _executable() -> str:
    beside = Path(sys.executable).with_name("agents-hub")
    return str(beside) if beside.exists() else (shutil.which("agents-hub") or "agents-hub")


def scratch_folder() -> Path:
    """A new temporary folder for the databases of commands whose recorded folder is gone."""
    return Path(tempfile.mkdtemp(prefix="bench-rerun-"))


def run_reruns(planned: Sequence[Rerun], *, cwd: Path, echo: Callable[[str], None]) -> list[Rerun]:
    """Run each planned command in turn (skipped ones are named); returns those that failed or were skipped."""
    missed = []
    executable = _executable()
    for rerun in planned:
        if rerun.skip:
            echo(f"skipped {rerun.report.name}: {rerun.skip}")
            missed.append(rerun)
            continue
        started = time.perf_counter()
        done = subprocess.run([executable, *rerun.words[1:]], cwd=cwd, stdout=2, stderr=2, check=False)  # fd 2: the output is not ours
        seconds = time.perf_counter() - started
        if done.returncode == 0:
            echo(f"ran {rerun.report.name} in {seconds:.1f} s")
        else:
            echo(f"failed {rerun.report.name}: exit status {done.returncode} after {seconds:.1f} s")
            missed.append(rerun)
    return missed

"""The documentation's quoted outputs are what the commands print, and README's commands are CI's.

A fenced block in README.md or docs/ preceded by ``<!-- check ... -->`` is run here:

- a ``console`` block: each ``$ command`` line runs in the session's folder (a plain
  ``agents-hub ...`` in process, through the CLI's own ``main``; anything else through
  bash), and what it prints must be the lines that follow it, up to the next ``$``;
- ``run CMD``: the block is what CMD prints;
- ``file PATH``: the block is saved as PATH (executable when it starts with ``#!``);
- a ``python`` block: run with this checkout's Python; it must exit 0 (its asserts hold).

The comment's other lines set up the run: ``session NAME`` (blocks of one page with the
same name share a folder, a database and a model), ``model tool NAME {json}`` / ``model
text TEXT`` (the fake model's next answers, in order; then it says "ok"), ``env K=V``,
``exit N`` (the status every command of the block must end with, default 0) and ``stream
stderr`` (compare standard error instead of standard output).

The model is the loopback fake of tests/fakes/openai_server/, reached through litellm
(``HUB_MODEL=openai/fake``); everything else is the product's default configuration, in
an empty folder. Only what cannot repeat is normalised: dates and times, and hexadecimal
ids such as a Maildir file's suffix. Trailing blanks at the end of an output are ignored.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.fakes.openai_server import FakeOpenAI, text, tool_call

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(p for p in (ROOT / "docs").rglob("*.md") if "_pending" not in p.parts)])

CHECKED = re.compile(
    r"<!-- check(?P<directives>[^\n]*?(?:\n.*?)?)-->\n(?:[ \t]*\n)*```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$",
    re.DOTALL | re.MULTILINE,
)
VARIABLE = (
    (re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}[:-]\d{2}(?:[:-]\d{2})?Z?)?"), "<date>"),
    (re.compile(r"\b[0-9a-f]{10,}\b"), "<hex>"),
)
SHELL = re.compile(r"[|&;<>$`(){}*?~]")


@dataclass
class Example:
    """One checked block: where it is, what it sets up and what it shows."""

    page: Path
    line: int
    lang: str
    body: str
    session: str | None = None
    file: str | None = None
    run: str | None = None
    model: list[object] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    exit: int = 0
    stream: str = "stdout"

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def parse(page: Path) -> list[Example]:
    """Every checked block of a page, in order."""
    source = page.read_text(encoding="utf-8")
    found = []
    for match in CHECKED.finditer(source):
        example = Example(page, source.count("\n", 0, match.start("body")) + 1, match["lang"], match["body"])
        for raw in match["directives"].splitlines():
            word, _, rest = raw.strip().partition(" ")
            if not word:
                continue
            if word == "session":
                example.session = rest.strip()
            elif word == "file":
                example.file = rest.strip()
            elif word == "run":
                example.run = rest.strip()
            elif word == "model":
                kind, _, value = rest.partition(" ")
                if kind == "tool":
                    name, _, arguments = value.partition(" ")
                    example.model.append(tool_call(name, json.loads(arguments or "{}")))
                elif kind == "text":
                    example.model.append(text(value))
                else:
                    raise ValueError(f"{page}: model tool NAME {{json}} or model text TEXT, got {raw!r}")
            elif word == "env":
                key, _, value = rest.partition("=")
                example.env[key.strip()] = value.strip()
            elif word == "exit":
                example.exit = int(rest)
            elif word == "stream":
                example.stream = rest.strip()
            else:
                raise ValueError(f"{page}: unknown check directive {raw!r}")
        found.append(example)
    return found


def sessions() -> Iterator[tuple[str, list[Example]]]:
    for page in PAGES:
        named: dict[str, list[Example]] = {}
        for example in parse(page):
            if example.session is None:
                yield example.where, [example]
            else:
                named.setdefault(example.session, []).append(example)
        for name, examples in named.items():
            yield f"{examples[0].where} ({name})", examples


SESSIONS = dict(sessions())


def normalise(output: str) -> list[str]:
    for pattern, placeholder in VARIABLE:
        output = pattern.sub(placeholder, output)
    lines = [line.rstrip() for line in output.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def commands(body: str) -> Iterator[tuple[str, str]]:
    """``(command, expected output)`` pairs of a console block; ``\\`` continues a command."""
    command: str | None = None
    expected: list[str] = []
    lines = iter(body.splitlines())
    for line in lines:
        if line.startswith("$ "):
            if command is not None:
                yield command, "\n".join(expected)
            command, expected = line[2:], []
            while command.endswith("\\"):
                command = command[:-1] + next(lines).strip()
        elif command is not None:
            expected.append(line)
    if command is not None:
        yield command, "\n".join(expected)


class Session:
    """A folder, the environment a person would have there, and the fake model."""

    def __init__(self, folder: Path, llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
        self.folder = folder
        self.llm = llm
        monkeypatch.chdir(folder)  # settings read .env from the working directory; there is none
        self.env = {
            **os.environ,
            "HUB_MODEL": "openai/fake",
            "HUB_API_BASE": llm.base_url,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT),
        }
        for name in ("HUB_DB", "HUB_MAILDIR"):  # the defaults: beside the working directory
            self.env.pop(name, None)

    def run(self, command: str, example: Example) -> tuple[int, str, str]:
        env = {**self.env, **example.env}
        words = shlex.split(command) if not SHELL.search(command) else []
        if words[:1] == ["agents-hub"]:
            return self._in_process(words[1:], env)
        done = subprocess.run(
            ["bash", "-c", command], cwd=self.folder, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        return done.returncode, done.stdout, done.stderr

    def _in_process(self, argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
        from scopehub.hub.cli import main

        runner = CliRunner()
        changed = {key: value for key, value in env.items() if os.environ.get(key) != value}
        removed = {key: None for key in os.environ if key not in env}
        with runner.isolation(env={**changed, **removed}) as (out, err, _):
            try:
                main(argv)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
        return code, stdout, stderr


def check(session: Session, example: Example) -> list[str]:
    """Run one example; the differences found, as readable lines (none: it holds)."""
    session.llm.script(*example.model)
    if example.file:
        path = session.folder / example.file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(example.body, encoding="utf-8")
        if example.body.startswith("#!"):
            path.chmod(0o755)
        return []
    if example.lang == "python" and example.run is None:
        script = session.folder / "example.py"
        script.write_text(example.body, encoding="utf-8")
        code, stdout, stderr = session.run(f"python {script.name}", example)
        return [] if code == 0 else [f"{example.where}: the example failed (exit {code}):", *stderr.splitlines()[-15:]]
    pairs = [(example.run, example.body)] if example.run is not None else list(commands(example.body))
    problems: list[str] = []
    for command, expected in pairs:
        code, stdout, stderr = session.run(command, example)
        shown = stderr if example.stream == "stderr" else stdout
        if code != example.exit:
            problems += [f"{example.where}: `{command}` exited {code}, not {example.exit}:", *stderr.splitlines()[-10:]]
        want, got = normalise(expected), normalise(shown)
        if want != got:
            problems += [f"{example.where}: `{command}` printed something else (- the docs, + the command):"]
            problems += list(difflib.unified_diff(want, got, "docs", "command", lineterm="", n=1))[2:]
    return problems


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Session]:
    with FakeOpenAI() as llm:
        yield Session(tmp_path, llm, monkeypatch)


@pytest.mark.parametrize("name", list(SESSIONS))
def test_a_quoted_output_is_what_the_command_prints(name: str, session: Session) -> None:
    problems = [problem for example in SESSIONS[name] for problem in check(session, example)]
    assert not problems, "\n".join(problems)


def test_the_docs_check_examples_on_several_pages() -> None:
    # Guards the parser: a change that stopped finding the marked blocks would pass every check above.
    pages = {example.page.name for examples in SESSIONS.values() for example in examples}
    assert {"quickstart.md", "terminal-chat.md", "agents.md", "memory.md", "configuration.md", "maildir.md", "lessons.md"} <= pages
    assert sum(len(examples) for examples in SESSIONS.values()) >= 12


def _steps(command: str) -> list[str]:
    """A test command's steps, without the virtualenv's path: ``["pip install -e '.[dev]'", ...]``."""
    steps = []
    for part in re.split(r"\s*&&\s*|\n", command):
        part = re.sub(r"^(?:\.venv(?:-ci)?/bin/)?(?:python -m )?", "", part.strip())
        part = re.sub(r"\s+--quiet\b|^NO_MKDOCS_2_WARNING=1\s+", "", part).replace('".[dev]"', "'.[dev]'")
        if part and not part.startswith(("#", "python3 -m venv", ".")):
            steps.append(part)
    return steps


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"## Test it\n\n```bash\n(.*?)\n```", readme, re.DOTALL)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_steps = [step for step in _steps(ci) if step.split()[0] in ("pip", "ruff", "mkdocs", "pytest")]
    assert _steps(block) == ci_steps == [
        "pip install --upgrade pip",
        "pip install -e '.[dev]'",
        "ruff check .",
        "mkdocs build --strict",
        "pytest",
    ]


def test_readme_agent_example_is_a_working_agent(tmp_path: Path) -> None:
    import asyncio

    from scopehub.agents import discover_agents, load_agent_file
    from scopehub.hub.models import ModelResponse, ToolCall
    from scopehub.hub.models.testing import ScriptedModel
    from scopehub.hub.orchestrator import Deps, Hub, Inbound
    from scopehub.hub.settings import load_settings
    from scopehub.memory import Store

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"## Add an agent\n.*?```python\n(.*?)```", readme, re.DOTALL)
    path = tmp_path / "weather.py"
    path.write_text(code, encoding="utf-8")
    registry = load_agent_file(path, discover_agents())
    assert "weather" in registry.names and not registry.errors
    model = ScriptedModel(steps=[ModelResponse(tool_calls=(ToolCall("c1", "forecast", '{"city": "Paris"}'),)), "Sunny."])
    with Store(":memory:") as store:
        hub = Hub(Deps(store=store, settings=load_settings(), model=model), registry)
        reply = asyncio.run(hub.handle(Inbound(scope="user:1", text="will it rain in Paris?")))
    assert reply.agent == "weather"  # the router found it from its description and examples
    tool_turn = model.calls[1].messages[-1]  # and its tool ran, on the model's arguments
    assert tool_turn["role"] == "tool" and tool_turn["content"].startswith("Paris")


def test_every_variable_the_docs_name_is_one_the_code_reads() -> None:
    from scopehub.hub.settings import Settings

    settings = {field.alias or f"HUB_{name.upper()}" for name, field in Settings.model_fields.items()}
    configuration = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    outside = set(re.findall(r"^\| `([A-Z_]+)` \|", configuration.split("## Read outside the settings model")[1], re.MULTILINE))
    known = settings | outside | {"HUB_TEST_POSTGRES_URL"}  # the tests' own, CONTRIBUTING and Scaling out
    named = {
        (variable, page.relative_to(ROOT).as_posix())
        for page in [*PAGES, ROOT / "CONTRIBUTING.md"]
        for variable in re.findall(r"\b(?:HUB|TELEGRAM)_[A-Z0-9_]+", page.read_text(encoding="utf-8"))
    }
    assert sorted((v, p) for v, p in named if v not in known) == []

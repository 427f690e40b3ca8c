"""`agents-hub chat`: one-shot, piped and interactive chat on the real hub, against the
loopback OpenAI-compatible fake; the no-model error; the output format."""

from __future__ import annotations

import asyncio
import builtins
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from scopehub.hub.cli import cli, main
from scopehub.hub.orchestrator import Reply
from scopehub.hub.transports.terminal import (
    TerminalChat,
    enable_bracketed_paste,
    format_meta,
    format_reply,
    messages_of,
)
from scopehub.memory import Store
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.helpers import checkout_env

META = re.compile(r"^\[(?P<agent>[a-z_]+)(?: ← (?P<also>[a-z_, ]+))?\] (?P<total>[\d,]+) tokens \(full history (?P<full>[\d,]+)\)$")


@pytest.fixture
def llm(monkeypatch, tmp_path):
    """The fake model server, with the hub pointed at it and a fresh database."""
    with FakeOpenAI() as server:
        monkeypatch.setenv("HUB_MODEL", "openai/fake")
        monkeypatch.setenv("HUB_API_BASE", server.base_url)
        monkeypatch.setenv("HUB_DB", str(tmp_path / "hub.db"))
        monkeypatch.setenv("HUB_MODEL_RETRIES", "0")
        yield server


def chat(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, ["chat", *args], input=input, catch_exceptions=False)


def stored(tmp_path: Path, scope: str = "user:local") -> list[tuple[str, str | None, str]]:
    with Store(tmp_path / "hub.db") as store:
        return [(m.role, m.agent, m.text) for m in store.messages(scope)]


def meta_lines(output: str) -> list[re.Match]:
    return [m for m in (META.match(line) for line in output.splitlines()) if m]


def test_one_message_runs_the_tool_loop_and_shows_agent_and_tokens(llm, tmp_path):
    llm.script(tool_call("add_task", {"title": "buy milk"}), text("Added buy milk to your tasks."))

    result = chat("--message", "add buy milk to my tasks")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "Added buy milk to your tasks."
    meta = META.match(lines[1])
    assert meta and meta["agent"] == "tasks" and meta["also"] is None
    total, full = int(meta["total"].replace(",", "")), int(meta["full"].replace(",", ""))
    # the first message of a chat has no history: scoping saves nothing yet; the line shows what was recorded
    with Store(tmp_path / "hub.db") as store:
        (call,) = store.calls("user:local")
    assert total == full == call["total"] == call["full_history_tokens"] > 0
    # what the model was sent: the tasks agent's persona and tools, then the tool's result
    first, second = llm.requests[:2]
    assert "tasks agent" in first["messages"][0]["content"]
    assert first["messages"][-1] == {"role": "user", "content": "add buy milk to my tasks"}
    assert "add_task" in [t["function"]["name"] for t in first["tools"]]
    tool_turn = second["messages"][-1]
    assert tool_turn["role"] == "tool" and "buy milk" in tool_turn["content"]
    # what was stored: the message and the reply, both tagged for the tasks agent
    assert stored(tmp_path) == [
        ("user", "tasks", "add buy milk to my tasks"),
        ("agent", "tasks", "Added buy milk to your tasks."),
    ]


def test_piped_lines_are_messages_and_commands_work(llm, tmp_path):
    llm.script(text("Added."), text("You have: buy milk."))

    result = chat(input="add buy milk to my tasks\n\n/help\nwhat is on my todo list\n")

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Added.\n[tasks]" in out
    assert "/remember <fact>" in out and "\n[hub] command\n" in out
    assert "You have: buy milk.\n[tasks]" in out
    assert [m["agent"] for m in meta_lines(out)] == ["tasks", "tasks"]
    # the follow-up was sent the earlier exchange (and, as part of the tail, the /help line)
    follow_up = [m["content"] for m in llm.requests[1]["messages"][1:]]
    assert follow_up == ["add buy milk to my tasks", "Added.", "what is on my todo list"]  # /help is not history
    assert [(role, agent) for role, agent, _ in stored(tmp_path)] == [
        ("user", "tasks"),
        ("agent", "tasks"),
        ("user", "hub"),  # a command is stored, tagged for the hub, never sent to an agent
        ("user", "tasks"),
        ("agent", "tasks"),
    ]


def test_chat_commands_answer_without_a_model_call(llm, tmp_path):
    result = chat(input="/agents\n/usage\n/search milk\n")

    assert result.exit_code == 0, result.output
    assert "/tasks - " in result.stdout and "Tokens sent: 0" in result.stdout
    assert result.stdout.count("[hub] command") == 3
    assert llm.requests == []


def test_facts_commands_in_the_chat(llm, tmp_path):
    result = chat(input="/remember my sister is called Ana\n/facts\n")
    assert result.exit_code == 0, result.output
    assert "Remembered" in result.stdout and "Ana" in result.stdout.split("Facts I keep:", 1)[-1]


def test_scope_option_keeps_memories_apart(llm, tmp_path):
    chat("--scope", "group:42", "--message", "tell me a joke")
    assert stored(tmp_path, "group:42")[0][2] == "tell me a joke"
    assert stored(tmp_path, "user:local") == []
    bad = CliRunner().invoke(cli, ["chat", "--scope", "nobody", "--message", "hi"])
    assert bad.exit_code == 2 and "--scope" in bad.output


def test_json_output_is_one_object_per_reply(llm):
    llm.script(text("Hello!"))
    result = chat("--json", input="hi there\n/help\n")
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["kind"] for row in rows] == ["agent", "command"]
    assert rows[0]["text"] == "Hello!" and rows[0]["agent"]
    sections = ("persona", "rules", "tools", "facts", "history", "message")
    assert rows[0]["tokens"]["total"] == sum(rows[0]["tokens"][name] for name in sections) > 0
    assert rows[0]["tokens"]["history"] == 0 and rows[0]["full_history_tokens"] == rows[0]["tokens"]["total"]  # nothing before it


def test_a_failing_model_is_a_reply_not_a_crash(llm, tmp_path):
    from tests.fakes.openai_server import error

    llm.script(error(500))
    result = chat("--message", "add buy milk to my tasks")
    assert result.exit_code == 1  # a script must see the failure
    assert "can't reach the language model" in result.stdout
    assert result.stdout.splitlines()[-1].endswith(" · error")
    assert stored(tmp_path)[0][2] == "add buy milk to my tasks"  # the message is kept


def test_no_model_is_one_clear_error_before_reading_input(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # the `local` extra is absent
    monkeypatch.setenv("HUB_DB", str(tmp_path / "hub.db"))

    with pytest.raises(SystemExit) as exit_info:
        main(["chat", "--message", "hello"])

    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no model configured")
    assert "HUB_MODEL" in err and "pip install 'scopehub[local]'" in err
    assert "ollama_chat/" in err and "pip install -e '.[local]'" in err  # as README says; a checkout's command
    assert "Traceback" not in err
    assert not (tmp_path / "hub.db").exists()  # nothing was read or stored


def test_console_script_pipes_lines_and_logs_to_stderr(llm, tmp_path):
    script = Path(sys.executable).with_name("agents-hub")
    if not script.exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    llm.script(text("Added buy milk."))
    # The script imports scopehub; the link on PYTHONPATH makes that this checkout.
    env = checkout_env(tmp_path, {**os.environ, "HUB_LOG_LEVEL": "INFO"})

    done = subprocess.run(
        [str(script), "chat"], input="add buy milk to my tasks\n/help\n", capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Added buy milk."
    assert META.match(lines[1])["agent"] == "tasks"
    assert "[hub] command" in lines
    assert "Traceback" not in done.stderr
    assert " INFO " not in done.stdout  # logs never mix into the replies
    assert llm.requests[0]["messages"][-1]["content"] == "add buy milk to my tasks"


def test_metadata_line_format():
    reply = Reply(text="Done.", agent="tasks", also_sees=("inbox", "notes"), tokens={"total": 412}, full_history_tokens=1930)
    assert format_meta(reply) == "[tasks ← inbox, notes] 412 tokens (full history 1,930)"
    assert format_reply(reply) == "Done.\n[tasks ← inbox, notes] 412 tokens (full history 1,930)"
    assert META.match(format_meta(reply))["also"] == "inbox, notes"
    assert format_meta(Reply(text="x", kind="command", agent="hub")) == "[hub] command"
    failed = Reply(text="Sorry", kind="error", agent="tasks", tokens={"total": 5}, full_history_tokens=5)
    assert format_meta(failed) == "[tasks] 5 tokens (full history 5) · error"


def _interactive(monkeypatch, tmp_path, inputs, model):
    from scopehub.hub.app import build_hub
    from scopehub.hub.settings import load_settings

    feed = iter(inputs)
    prompts: list[str] = []

    def fake_input(prompt=""):
        prompts.append(prompt)
        item = next(feed)
        if isinstance(item, BaseException):
            raise item
        return item

    monkeypatch.setattr(builtins, "input", fake_input)
    hub = build_hub(load_settings(db=tmp_path / "hub.db"), model=model)
    TerminalChat(hub, "user:local").run_interactive()
    messages = [m.text for m in hub.store.messages("user:local", limit=50) if m.role == "user"]
    hub.store.close()
    return messages, prompts


def test_interactive_quit_and_ctrl_d_leave_cleanly(monkeypatch, tmp_path, capsys):
    from scopehub.hub.models.testing import ScriptedModel

    _interactive(monkeypatch, tmp_path, ["/help", "/quit", "never read"], ScriptedModel())
    assert "[hub] command" in capsys.readouterr().out
    _interactive(monkeypatch, tmp_path, ["", EOFError()], ScriptedModel())
    _interactive(monkeypatch, tmp_path, [KeyboardInterrupt()], ScriptedModel())


def test_interactive_ctrl_c_during_a_reply_returns_to_the_prompt(monkeypatch, tmp_path, capsys):
    """Ctrl-C reaches the main thread (where the prompt waits for the reply): the reply is
    cancelled, the message stays stored, and the next message is answered."""
    import _thread

    from scopehub.hub.models.testing import FunctionModel

    async def answer(messages, tools):
        if messages[-1]["content"] == "hello":
            _thread.interrupt_main()  # what the terminal does on Ctrl-C
            await asyncio.sleep(30)  # cancelled long before
        return "Hello again."

    messages, _ = _interactive(monkeypatch, tmp_path, ["hello", "hello?", EOFError()], FunctionModel(answer))
    captured = capsys.readouterr()
    assert "(interrupted; your message is saved)" in captured.err
    assert "Hello again." in captured.out and "Traceback" not in captured.err
    assert messages == ["hello", "hello?"]


def test_a_block_between_triple_quotes_is_one_message(monkeypatch, tmp_path, capsys):
    from scopehub.hub.models.testing import FunctionModel

    seen: list[str] = []

    def answer(messages, tools):
        seen.append(messages[-1]["content"])
        return "Got it."

    email = ["From: Ram <ram@example.com>", "Subject: contract", "", "please sign by Friday"]
    messages, prompts = _interactive(monkeypatch, tmp_path, ['"""', *email, '"""', "thanks", EOFError()], FunctionModel(answer))
    assert messages == ["\n".join(email), "thanks"]
    assert prompts[:2] == ["you> ", "...> "]


def test_piped_input_sends_a_block_between_triple_quotes_as_one_message():
    lines = ["add milk\n", '"""\n', "From: Ram\n", "\n", "please sign\n", '"""\n', "\n", "thanks\n", '"""\n', "unclosed\n"]
    assert list(messages_of(lines)) == ["add milk", "From: Ram\n\nplease sign", "thanks", "unclosed"]


def test_background_work_goes_on_while_the_person_types(monkeypatch, tmp_path):
    """The prompt reads in the main thread while the hub's loop runs in its own: learning
    from the last message is not held up until the next line is entered."""
    import threading

    from scopehub.hub.app import build_hub
    from scopehub.hub.models.testing import ScriptedModel
    from scopehub.hub.settings import load_settings

    learnt = threading.Event()
    hub = build_hub(load_settings(db=tmp_path / "hub.db"), model=ScriptedModel(["Noted."]))

    async def after_send(reply):
        learnt.set()  # runs on the hub's loop while the prompt below still waits

    monkeypatch.setattr(hub, "after_send", after_send)
    monkeypatch.setattr(hub.after_reply, "after_send", after_send)
    feed = iter(["my name is Sam", None])

    def slow_input(prompt: str = "") -> str:
        item = next(feed)
        if item is None:
            assert learnt.wait(5), "the hub's loop stood still while waiting for input"
            raise EOFError
        return item

    monkeypatch.setattr(builtins, "input", slow_input)
    TerminalChat(hub, "user:local").run_interactive()
    hub.store.close()
    assert learnt.is_set()


def test_bracketed_paste_is_turned_on_for_the_prompt(monkeypatch):
    readline = pytest.importorskip("readline")
    bound: list[str] = []
    monkeypatch.setattr(readline, "parse_and_bind", bound.append)
    assert enable_bracketed_paste()
    assert "set enable-bracketed-paste on" in bound

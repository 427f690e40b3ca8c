"""A lesson learnt from a 👎, end to end, printed as a transcript (the example of docs/coordination/lessons.md, which tests/test_docs.py checks).

``python -m tests.fakes.lesson_demo [WORKDIR]`` runs the real ``agents-hub telegram``
command in a subprocess against two loopback fakes on 127.0.0.1, nothing on the network:

- the Bot API (:class:`tests.fakes.bot_api.FakeBotAPI`), through python-telegram-bot's own
  client, long polling with the hub's ``allowed_updates`` (message_reaction included);
- an OpenAI-compatible model server (:class:`tests.fakes.openai_server.FakeOpenAI`), reached
  through litellm as ``HUB_MODEL=openai/gpt-4o-mini`` with ``HUB_API_BASE``. It is scripted:
  an agent call answers with the shopping list unless its context carries a lesson about
  the work list; the lesson call (the hub's lesson prompt) answers with a lesson in JSON.

The person asks for "my list", gets the shopping list, reacts 👎, and asks again. The
script prints the chat, ``agents-hub memory show`` and the lessons section of the next call
exactly as the model server received it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scopehub.hub.lessons import LESSON_PROMPT
from tests.fakes.bot_api import FakeBotAPI
from tests.fakes.openai_server import FakeOpenAI, Step, text

TOKEN = "123456:demo-token"
CHAT = 42
LESSON = {
    "lesson": "When the person asks for 'my list', they mean the work tasks, not the shopping list.",
    "kind": "failure",
    "importance": "high",
    "topic": "task lists",
}


def _system(request: dict[str, Any]) -> list[str]:
    out = []
    for message in request.get("messages", []):
        if message.get("role") != "system":
            continue
        content = message.get("content")
        if isinstance(content, list):  # content blocks
            content = "".join(block.get("text", "") for block in content if isinstance(block, dict))
        out.append(str(content))
    return out


def respond(request: dict[str, Any]) -> Step:
    """The scripted model: lessons from the lesson prompt, the mistake until a lesson is in context."""
    system = _system(request)
    if system and system[0] == LESSON_PROMPT:
        return text(json.dumps(LESSON))
    if request.get("response_format"):  # fact extraction and other JSON jobs: nothing to add
        return text('{"facts": []}')
    if any("work tasks" in part for part in system[1:]):
        return text("Your work tasks: send the quarterly report.")
    return text("Your shopping list: milk, eggs.")


def wait(check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise SystemExit("timed out waiting for the bot")


def main(workdir: Path) -> None:
    db = workdir / "hub.db"
    with FakeBotAPI(token=TOKEN) as tg, FakeOpenAI(default=respond) as llm:
        env = {
            **os.environ,
            "TELEGRAM_BOT_TOKEN": TOKEN,
            "TELEGRAM_BASE_URL": tg.base_url,
            "HUB_MODEL": "openai/gpt-4o-mini",
            "HUB_API_BASE": llm.base_url,
            "HUB_API_KEY": "sk-loopback",
            "HUB_DB": str(db),
            "HUB_MAILDIR": str(workdir / "maildir"),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        bot = subprocess.Popen(
            [sys.executable, "-m", "scopehub.hub.cli", "telegram"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            tg.push_message(CHAT, "what's on my list?")
            (first,) = wait(lambda: tg.sent(CHAT)[:1], timeout=120)  # the start: the router's embedder may load first
            print(f"person : what's on my list?\nbot    : {first['text']!r}")
            tg.push_reaction(CHAT, first["message_id"], "👎")
            print("person : 👎 (a reaction on that reply; the bot answers nothing)")
            # The lesson is learnt after the reply, off the request path: wait for its model call.
            wait(lambda: any(_system(r)[:1] == [LESSON_PROMPT] for r in llm.requests))
            time.sleep(1.0)
            tg.push_message(CHAT, "what's on my list?")
            second = wait(lambda: tg.sent(CHAT)[1:2])[0]
            print(f"person : what's on my list?\nbot    : {second['text']!r}")
            print(f"(messages the bot sent in the chat: {len(tg.sent(CHAT))})")
        finally:
            bot.terminate()
            bot.wait(timeout=30)
        agent_calls = [r for r in llm.requests if _system(r)[:1] != [LESSON_PROMPT] and not r.get("response_format")]
        lesson_call = next(r for r in llm.requests if _system(r)[:1] == [LESSON_PROMPT])
    print("\n$ agents-hub memory show --scope user:42 --agent tasks")
    shown = subprocess.run(
        [sys.executable, "-m", "scopehub.hub.cli", "--db", str(db), "memory", "show", "--scope", f"user:{CHAT}", "--agent", "tasks"],
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        check=True,
    )
    print(shown.stdout.rstrip())
    print("\nthe lesson model was asked (user part of its call):")
    print(lesson_call["messages"][-1]["content"])
    print("\nthe tasks agent's next call, its second system message as the model server received it:")
    print(_system(agent_calls[-1])[1])


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="lesson_demo_")))

"""The real ``agents-hub telegram`` process, polling the loopback Bot API: an update
python-telegram-bot cannot read stops nothing (no getUpdates hot loop, later chats answered,
SIGTERM still stops it), and the process writes nothing to stdout and no traceback."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from tests.fakes.bot_api import FakeBotAPI
from tests.fakes.openai_server import FakeOpenAI, text
from tests.fakes.telegram_probe import bot_env
from tests.helpers import CHECKOUT_MISMATCH, checkout_env, checkout_python
from tests.hub.test_telegram_guard import poll_without_persistent_id

TOKEN = "123456:process-token"


def wait(check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError("the bot did not get there")


def test_a_poison_update_neither_stops_polling_nor_sigterm_and_logs_stay_quiet(tmp_path: Path) -> None:
    with FakeBotAPI(token=TOKEN) as tg, FakeOpenAI(default=lambda request: text("Noted.")) as llm:
        env = bot_env(tmp_path, tg, llm, TOKEN, HUB_ROUTER_EMBEDDER="none")
        tg.push_update(poll_without_persistent_id(tg, 42))  # waiting before the bot even starts
        tg.push_message(42, "add buy milk to my tasks")
        with (tmp_path / "out").open("w") as out, (tmp_path / "err").open("w") as err:
            code = "from scopehub.hub.cli import main; main(['telegram'])"
            bot = subprocess.Popen(checkout_python(code), env=checkout_env(tmp_path, env), stdout=out, stderr=err, cwd=tmp_path)
            try:
                wait(lambda: tg.sent(42) or bot.poll() is not None, 180)
                assert bot.poll() is None, (tmp_path / "err").read_text()[-2000:]
                polls = len(tg.calls("getUpdates"))
                tg.push_message(43, "add eggs to my tasks")  # another chat, after the poison
                wait(lambda: tg.sent(43), 30)
                time.sleep(2.0)
                assert len(tg.calls("getUpdates")) - polls < 20  # long polling, not a hot loop
            finally:
                bot.send_signal(signal.SIGTERM)
                status = bot.wait(timeout=60)  # SIGTERM stops it
    assert status == 0, "the child imported another scopehub" if status == CHECKOUT_MISMATCH else status
    assert (tmp_path / "out").read_text() == ""  # stdout carries nothing (litellm's lines included)
    log = (tmp_path / "err").read_text()
    assert "Traceback" not in log and "never awaited" not in log
    unreadable = [line for line in log.splitlines() if "could not be read" in line]
    assert len(unreadable) == 1 and "persistent_id" in unreadable[0]  # one line, with its reason

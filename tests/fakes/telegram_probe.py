"""The Telegram bot tried as a person (and an operator) would: the real ``agents-hub telegram``
process against the loopback fakes, in polling and in webhook mode, printed as a transcript.

``python -m tests.fakes.telegram_probe [--mode polling|webhook|both] [--retry-after 75] [WORKDIR]``

Nothing reaches the network: the Bot API is :class:`tests.fakes.bot_api.FakeBotAPI` (through
python-telegram-bot's own client), the model :class:`tests.fakes.openai_server.FakeOpenAI`
(through litellm, streaming and transcription included). Each step prints what the person
sent and what came back, with the figures an operator would look at: latencies, the
getUpdates rate around an unreadable update, how long a 429 held a reply, how SIGTERM ended
the process, and what the process wrote to stdout and stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.fakes.bot_api import FakeBotAPI
from tests.fakes.lesson_demo import wait
from tests.fakes.openai_server import FakeOpenAI, Step, text

TOKEN = "123456:probe-token"
OWNER, CHAT, GROUP, ADMIN, MEMBER = 42, 42, -100, 8, 7


def respond(request: dict[str, Any]) -> Step:
    """The scripted model: JSON jobs get nothing to add; a question gets a yes-or-no question back."""
    if request.get("response_format"):
        return text('{"facts": []}')
    last = str(request["messages"][-1].get("content", ""))
    if "remind" in last:
        return text("I found two reminders called 'call mum'. Should I cancel reminder #2?")
    return text("Noted: " + " ".join(f"word{n}" for n in range(24)) + ".")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def say(who: str, line: str) -> None:
    print(f"{who:>7} : {line}")


def bot_env(workdir: Path, tg: FakeBotAPI, llm: FakeOpenAI, token: str = TOKEN, **settings: str) -> dict[str, str]:
    """The environment of a bot process on the fakes: nothing of the developer's settings, a database in ``workdir``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "TELEGRAM_"))}
    return env | {
        "TELEGRAM_BOT_TOKEN": token,
        "TELEGRAM_BASE_URL": tg.base_url,
        "HUB_MODEL": "openai/gpt-4o-mini",
        "HUB_API_BASE": llm.base_url,
        "HUB_API_KEY": "sk-loopback",
        "HUB_DB": str(workdir / "hub.db"),
        "HUB_MAILDIR": str(workdir / "maildir"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        **settings,
    }


class Bot:
    """One ``agents-hub telegram`` process and what it wrote."""

    def __init__(self, workdir: Path, tg: FakeBotAPI, llm: FakeOpenAI, *, webhook_port: int | None = None, **env: str) -> None:
        self.workdir = workdir
        self.out = (workdir / "stdout.log").open("w+")
        self.err = (workdir / "stderr.log").open("w+")
        command = [sys.executable, "-m", "scopehub.hub.cli", "telegram"]
        if webhook_port is not None:
            command += ["--webhook-url", f"http://127.0.0.1:{webhook_port}/hook", "--listen", "127.0.0.1", "--port", str(webhook_port)]
        settings = bot_env(workdir, tg, llm, HUB_TRANSCRIBE_MODEL="openai/whisper-1", **env)
        self.process = subprocess.Popen(command, env=settings, stdout=self.out, stderr=self.err, cwd=workdir)

    def stop(self) -> tuple[float, int]:
        """SIGTERM; seconds until it exited and its exit status."""
        sent = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
            print("  (SIGTERM did not stop it within 60 s: killed)")
        return time.monotonic() - sent, code

    def logs(self) -> tuple[str, str]:
        self.out.flush()
        self.err.flush()
        return (self.workdir / "stdout.log").read_text(), (self.workdir / "stderr.log").read_text()


def report_logs(bot: Bot) -> None:
    stdout, stderr = bot.logs()
    lines = stderr.splitlines()
    print(
        f"  stdout: {len(stdout)} bytes; stderr: {len(lines)} lines, {stderr.count('Traceback')} tracebacks, "
        f"{stderr.count('never awaited')} 'never awaited' warnings, {sum('LiteLLM' in line for line in lines)} litellm lines"
    )
    for line in lines:
        if " WARNING " in line or " ERROR " in line:
            print(f"  log: {line[24:][:160]}")


def buttons(message: dict[str, Any]) -> dict[str, str]:
    return {b["text"]: b["callback_data"] for row in (message.get("reply_markup") or {}).get("inline_keyboard", []) for b in row}


def polling(workdir: Path, retry_after: int) -> None:
    print("\n== polling: agents-hub telegram ==")
    with FakeBotAPI(token=TOKEN) as tg, FakeOpenAI(default=respond, stream_chunk_delay=0.05, transcribe=lambda n, c, f: "remind me to call mum") as llm:
        tg.set_member(GROUP, ADMIN, "administrator")
        bot = Bot(workdir, tg, llm)
        first = time.monotonic()
        tg.push_message(CHAT, "add buy milk to my tasks")
        reply = wait(lambda: tg.sent(CHAT)[:1], 180, "the first answer")[0]
        say("person", "add buy milk to my tasks")
        say("bot", f"{reply['text'][:70]!r}... after {time.monotonic() - first:.1f}s (start included), {len(tg.drafts(CHAT))} drafts streamed first")

        # An update PTB cannot read (a poll without persistent_id): skipped and kept; the rest goes on.
        poison = tg.make_update(CHAT, None)
        poison["message"]["poll"] = {"id": "p1", "question": "lunch?", "options": [{"text": "pizza", "voter_count": 0}], "total_voter_count": 0,
                                     "is_closed": False, "is_anonymous": True, "type": "regular", "allows_multiple_answers": False}  # fmt: skip
        before, at = len(tg.calls("getUpdates")), time.monotonic()
        tg.push_update(poison)
        tg.push_message(CHAT, "note that the wifi password is hunter2")
        wait(lambda: len(tg.sent(CHAT)) >= 2, what="the answer after the unreadable update")
        time.sleep(2.0)
        rate = (len(tg.calls("getUpdates")) - before) / (time.monotonic() - at)
        say("person", "(a poll without persistent_id), then: note that the wifi password is hunter2")
        say("bot", f"{tg.sent(CHAT)[1]['text'][:50]!r}...; getUpdates {rate:.1f}/s meanwhile")

        calls = len(llm.requests)
        tg.push_message(CHAT, "\u200b\u200b")
        tg.push_message(CHAT, "/help")
        wait(lambda: len(tg.sent(CHAT)) >= 3)
        say("person", "(only zero-width characters), then /help")
        say("bot", f"/help answered; model requests for the invisible message: {len(llm.requests) - calls - 0}")

        tg.push_media(CHAT, "voice", content=b"OggS fake opus")
        voice = wait(lambda: tg.sent(CHAT)[3:4], what="the voice note's answer")[0]
        say("person", "(a voice note)")
        say("bot", f"{voice['text']!r} with buttons {list(buttons(voice))}")
        tg.push_callback_query(CHAT, buttons(voice)["Yes"], message_id=voice["message_id"])
        answered = wait(lambda: tg.sent(CHAT)[4:5])[0]
        say("person", "(presses Yes)")
        say("bot", f"{answered['text'][:60]!r}...; press answered: {tg.calls('answerCallbackQuery')[-1]}")

        tg.push_message(GROUP, "/forget 1", user_id=MEMBER)
        tg.push_message(GROUP, "/forget all", user_id=ADMIN)
        confirm = wait(lambda: tg.sent(GROUP)[1:2])[0]
        say("member", "/forget 1   (in a group)")
        say("bot", repr(tg.sent(GROUP)[0]["text"]))
        say("admin", "/forget all")
        say("bot", f"{confirm['text'][:60]!r}... buttons {list(buttons(confirm))}")
        tg.push_callback_query(GROUP, buttons(confirm)["Erase everything"], message_id=confirm["message_id"], user_id=MEMBER)
        wait(lambda: len(tg.calls("answerCallbackQuery")) >= 2)
        say("member", f"(presses Erase everything) -> {tg.calls('answerCallbackQuery')[-1]['text']!r}")

        tg.push_message(CHAT, "/settings")
        shown = wait(lambda: tg.sent(CHAT)[5:6])[0]
        say("person", "/settings")
        say("bot", f"{shown['text'].splitlines()[1:4]} with {len(buttons(shown))} buttons")

        # A 429 asking for `retry_after` seconds on the reply.
        tg.fail_next("sendMessage", 429, retry_after=retry_after)
        asked = time.monotonic()
        tg.push_message(CHAT, "add bread to my tasks")
        wait(lambda: len(tg.sent(CHAT)) >= 7, timeout=retry_after + 240, what="the rate-limited reply")
        sends = [e for e in tg.log if e["method"] == "sendMessage"]
        limited = next(e for e in reversed(sends) if e["status"] == 429)
        say("person", f"add bread to my tasks   (Telegram answers the reply with 429, retry after {retry_after} s)")
        say("bot", f"delivered {sends[-1]['at'] - limited['at']:.1f}s after the 429 ({time.monotonic() - asked:.1f}s after the message)")

        seconds, code = bot.stop()
        print(f"  SIGTERM: exited after {seconds:.1f}s with status {code}")
        report_logs(bot)


def webhook(workdir: Path) -> None:
    print("\n== webhook: agents-hub telegram --webhook-url (no TELEGRAM_WEBHOOK_SECRET) ==")
    import httpx

    def slow_first(request: dict[str, Any]) -> Step:
        from tests.fakes.openai_server import delay

        last = str(request["messages"][-1].get("content", ""))
        if "shopping list" in last:
            return delay(1.0, text("Your shopping list: milk, eggs."))
        return respond(request)

    with FakeBotAPI(token=TOKEN) as tg, FakeOpenAI(default=slow_first) as llm:
        port = free_port()
        bot = Bot(workdir, tg, llm, webhook_port=port, HUB_STREAM="off")
        url = f"http://127.0.0.1:{port}/hook"
        wait(lambda: tg.webhook_url, 180, "setWebhook")
        secret = tg.webhook_secret or ""
        print(f"  setWebhook: {tg.webhook_url} with a secret of {len(secret)} characters")
        forged = tg.make_update(CHAT, "add buy milk to my tasks")
        statuses = [httpx.post(url, json=forged, headers=h, timeout=10).status_code for h in ({}, {"X-Telegram-Bot-Api-Secret-Token": "guess"})]
        time.sleep(1.0)
        say("forger", f"POST without the secret, then with a guess: {statuses}; sent to the chat: {len(tg.sent(CHAT))}")
        at = time.monotonic()
        status = tg.post_to_webhook(tg.make_update(CHAT, "what's on my shopping list?"))
        time.sleep(0.3)
        tg.post_to_webhook(tg.make_update(CHAT, "add bread to the list"))
        wait(lambda: len(tg.sent(CHAT)) >= 2, what="both answers")
        second = next(r for r in llm.requests if str(r["messages"][-1].get("content", "")).endswith("add bread to the list"))
        sees = any(m.get("role") == "assistant" and "milk, eggs" in str(m.get("content")) for m in second["messages"])
        say("person", f"what's on my shopping list?  (HTTP {status}), and 0.3 s later: add bread to the list")
        say("bot", f"{[m['text'][:40] for m in tg.sent(CHAT)]} in {time.monotonic() - at:.1f}s; the second call saw the first reply: {sees}")
        poison = tg.make_update(CHAT, None)
        poison["message"]["poll"] = {"id": "p1", "question": "?", "options": [{"text": "a", "voter_count": 0}], "total_voter_count": 0,
                                     "is_closed": False, "is_anonymous": True, "type": "regular", "allows_multiple_answers": False}  # fmt: skip
        say("telegram", f"an unreadable update -> HTTP {tg.post_to_webhook(poison)}; healthz -> {httpx.get(f'http://127.0.0.1:{port}/healthz').status_code}")
        seconds, code = bot.stop()
        print(f"  SIGTERM: exited after {seconds:.1f}s with status {code}")
        report_logs(bot)
    rows = subprocess.run(
        [sys.executable, "-m", "scopehub.hub.cli", "--db", str(workdir / "hub.db"), "usage", "--scope", f"user:{CHAT}", "--json"],
        capture_output=True, text=True, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )  # fmt: skip
    if rows.returncode == 0:
        figures = json.loads(rows.stdout)
        print(f"  agents-hub usage: {figures.get('messages')} messages, {figures.get('agent_calls')} agent calls")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", nargs="?", type=Path, default=None)
    parser.add_argument("--mode", choices=("polling", "webhook", "both"), default="both")
    parser.add_argument("--retry-after", type=int, default=5, help="seconds the 429 on a reply asks for (the probe's was 75)")
    args = parser.parse_args()
    root = args.workdir or Path(tempfile.mkdtemp(prefix="telegram_probe_"))
    if args.mode in ("polling", "both"):
        (root / "polling").mkdir(parents=True, exist_ok=True)
        polling(root / "polling", args.retry_after)
    if args.mode in ("webhook", "both"):
        (root / "webhook").mkdir(parents=True, exist_ok=True)
        webhook(root / "webhook")


if __name__ == "__main__":
    main()

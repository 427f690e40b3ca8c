"""Telegram's side of ``agents-hub bench workers`` and the multi-worker fault scenarios: posting
each chat's updates to the workers behind a round-robin proxy, and counting what the Bot
API received (answered, lost, duplicated, out of order, latencies).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .workers_rig import WEBHOOK_PATH, WEBHOOK_SECRET, Fakes

__all__ = ["REPLY_RE", "Dispatcher", "Tally", "make_updates", "tally", "wait_replies"]

log = logging.getLogger(__name__)

# The fake model's answer names the message it answers ("re: message 3 of chat 100001: ...").
REPLY_RE = re.compile(r"message (\d+) of chat (-?\d+)")


# -- posting and counting -----------------------------------------------------------------------


class Dispatcher:
    """Telegram behind a round-robin proxy: each chat's updates in order, every chat at once.

    An update is posted again, to the next worker, when a worker is down or answers
    with an error (Telegram retries failed deliveries; nginx tries the next upstream).
    ``posted[(chat, n)]`` is when message ``n`` of ``chat`` was first posted.
    """

    def __init__(
        self, ports: Sequence[int], *, secret: str | None = WEBHOOK_SECRET, connections: int = 64, give_up: float = 180.0
    ) -> None:
        self.ports = list(ports)
        self.give_up = give_up  # seconds an update is retried before it counts as undelivered
        self.undelivered: list[tuple[int, int]] = []
        self.secret = secret
        self.connections = connections
        self.posted: dict[tuple[int, int], float] = {}
        self.retries = 0
        # Every attempt: (when it was sent, seconds until the worker answered, HTTP status; 0 = no answer).
        self.attempts: list[tuple[float, float, int]] = []
        self._next = 0
        self._lock = threading.Lock()

    def _port(self) -> int:
        with self._lock:
            port = self.ports[self._next % len(self.ports)]
            self._next += 1
        return port

    def _client(self) -> Any:
        # aiohttp, not httpx: httpx's pool looks at every connection for every request, and
        # with every chat posting at once that was most of this process's CPU, taken from
        # the workers on the same cores (py-spy: 91% of the rig's samples at 200 chats).
        import aiohttp

        connector = aiohttp.TCPConnector(limit=self.connections, limit_per_host=0)
        # No bound on waiting for a free connection (as before): 30 s to connect, 30 s for the answer.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30.0, sock_read=30.0)
        return aiohttp.ClientSession(connector=connector, timeout=timeout)

    async def post(self, client: Any, chat: int, number: int, update: dict[str, Any]) -> bool:
        """Post one update until a worker says it is stored (200); False when it gave up."""
        import aiohttp

        headers = {"Content-Type": "application/json"}
        if self.secret:
            headers["X-Telegram-Bot-Api-Secret-Token"] = self.secret
        body = json.dumps(update).encode()
        self.posted.setdefault((chat, number), time.time())
        attempt = 0
        deadline = time.monotonic() + self.give_up
        while True:
            if time.monotonic() > deadline:
                log.error("update %s of chat %s was refused for %.0f s; giving up", number, chat, self.give_up)
                self.undelivered.append((chat, number))
                return False
            port = self._port()
            sent = time.time()
            try:
                async with client.post(f"http://127.0.0.1:{port}/{WEBHOOK_PATH}", data=body, headers=headers) as response:
                    await response.read()
                    status = response.status
                self.attempts.append((sent, time.time() - sent, status))
                if status == 200:
                    return True
            except (aiohttp.ClientError, TimeoutError):
                self.attempts.append((sent, time.time() - sent, 0))
            attempt += 1
            self.retries += 1
            await asyncio.sleep(min(2.0, 0.05 * attempt))

    async def run(self, updates: dict[int, list[tuple[int, dict[str, Any]]]]) -> None:
        """Post every chat's updates, one after another per chat, all chats at once."""
        async with self._client() as client:

            async def chat_stream(chat: int, items: list[tuple[int, dict[str, Any]]]) -> None:
                for number, update in items:
                    await self.post(client, chat, number, update)

            await asyncio.gather(*(chat_stream(chat, items) for chat, items in updates.items()))

    async def run_paced(self, fakes: Fakes, chats: Sequence[int], stop: threading.Event, think: tuple[float, float], seed: int = 0) -> dict[int, int]:
        """Every chat writes a message, waits ``think`` seconds (uniform), and so on until ``stop``; returns messages per chat."""
        import random

        rng = random.Random(seed)
        sent: dict[int, int] = {}
        async with self._client() as client:

            async def chat_stream(chat: int) -> None:
                number = 0
                await asyncio.sleep(rng.uniform(0, think[1]))
                while not stop.is_set():
                    update = fakes.update(chat, f"message {number} of chat {chat}: tell me something")
                    await self.post(client, chat, number, update)
                    number += 1
                    sent[chat] = number
                    await asyncio.sleep(rng.uniform(*think))

            await asyncio.gather(*(chat_stream(chat) for chat in chats))
        return sent


@dataclass
class Tally:
    """What the Bot API received for the posted messages."""

    expected: int = 0
    answered: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    other_sends: int = 0  # apologies and the like: not an answer to a numbered message
    latencies: list[float] = field(default_factory=list)
    first_post: float = 0.0
    last_reply: float = 0.0

    @property
    def seconds(self) -> float:
        return max(1e-9, self.last_reply - self.first_post)

    @property
    def throughput(self) -> float:
        return self.answered / self.seconds

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def tally(
    arrivals: Sequence[tuple[int, str, float]], posted: dict[tuple[int, int], float], chats: Sequence[int], messages: int | dict[int, int]
) -> Tally:
    """Count lost, duplicated and out-of-order replies, and the latencies, for ``chats``.

    ``messages``: how many each chat sent (numbered from 0), the same for all or per chat.
    """
    wanted = set(chats)
    per_chat = messages if isinstance(messages, dict) else dict.fromkeys(wanted, messages)
    out = Tally(expected=sum(per_chat.get(chat, 0) for chat in wanted), first_post=min(posted.values(), default=0.0))
    seen: dict[int, list[int]] = defaultdict(list)
    first_reply: dict[tuple[int, int], float] = {}
    for chat, text, at in arrivals:
        if chat not in wanted:
            continue
        match = REPLY_RE.search(text)
        if match is None or int(match.group(2)) != chat:
            out.other_sends += 1
            continue
        number = int(match.group(1))
        seen[chat].append(number)
        first_reply.setdefault((chat, number), at)
        out.last_reply = max(out.last_reply, at)
    for chat in wanted:
        numbers = seen.get(chat, [])
        counts = Counter(numbers)
        out.duplicated += sum(n - 1 for n in counts.values() if n > 1)
        out.lost += sum(1 for number in range(per_chat.get(chat, 0)) if number not in counts)
        top = -1
        for number in numbers:
            if number < top:
                out.out_of_order += 1
            top = max(top, number)
    out.answered = len(first_reply)
    out.latencies = [at - posted[key] for key, at in first_reply.items() if key in posted]
    return out


def wait_replies(fakes: Fakes, expected: int, chats: set[int], *, quiet: float = 20.0, limit: float = 900.0) -> None:
    """Wait until ``expected`` replies arrived for ``chats``, or nothing arrived for ``quiet`` seconds."""
    started = last_change = time.monotonic()
    count = -1
    while time.monotonic() - started < limit:
        now_count = sum(1 for chat, text, _ in list(fakes.arrivals) if chat in chats and REPLY_RE.search(text))
        if now_count != count:
            count, last_change = now_count, time.monotonic()
        if count >= expected or time.monotonic() - last_change > quiet:
            return
        time.sleep(0.2)


def make_updates(fakes: Fakes, chats: Sequence[int], messages: int) -> dict[int, list[tuple[int, dict[str, Any]]]]:
    return {chat: [(n, fakes.update(chat, f"message {n} of chat {chat}: tell me something")) for n in range(messages)] for chat in chats}

"""A streamed answer from ``openai/<name>`` with an ``api_base`` goes straight to the server too
(hub/models/openai_compat.py ``stream_chat``): the server receives what litellm sent it, the
hub is shown the same texts as the answer is written and reads back the same answer,
and failures are retried or raised as through litellm."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from scopehub.hub.errors import ModelError, ModelUnavailable
from scopehub.hub.models import LiteLLMModel
from scopehub.hub.models.litellm_model import from_openai_stream
from tests.fakes.openai_server import FakeOpenAI, delay, error, text, tool_call, tool_calls
from tests.hub.test_openai_compat import MESSAGES, TOOLS

BASE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "served-name"}


def chunk(delta: dict[str, Any] | None = None, *, finish: str | None = None, usage: dict | None = None, index: int = 0) -> dict:
    body = dict(BASE, choices=[] if delta is None else [{"index": index, "delta": delta, "finish_reason": finish}])
    if usage is not None:
        body["usage"] = usage
    return body


USAGE = {"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46}
SPLIT_CALL = [  # one tool call's arguments in pieces, then a second call, as OpenAI streams them
    chunk({"role": "assistant", "content": None, "tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "add_task", "arguments": ""}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"title": '}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"gas"}'}}]}),
    chunk({"tool_calls": [{"index": 1, "id": "c2", "type": "function", "function": {"name": "add_task", "arguments": '{"title": "rent"}'}}]}),
    chunk({}, finish="tool_calls"),
    chunk(usage=USAGE),
]
STREAMS = {
    "text with usage": [chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo, ünï 🎉"}), chunk({}, finish="stop"), chunk(usage=USAGE)],
    "text then a tool call": [chunk({"role": "assistant", "content": "Let me add it. "}), *SPLIT_CALL],
    "split tool calls": SPLIT_CALL,
    "cached tokens": [chunk({"content": "hi"}), chunk({}, finish="stop"), chunk(usage=dict(USAGE, prompt_tokens_details={"cached_tokens": 30}))],
    "no usage (litellm counts)": [chunk({"role": "assistant", "content": "counted by the tokenizer"}), chunk({}, finish="stop")],
    "reasoning beside the text": [chunk({"role": "assistant", "reasoning_content": "thinking"}), chunk({"content": "answer"}), chunk({}, finish="stop"), chunk(usage=USAGE)],
    "a usage chunk on every chunk": [chunk({"content": "a"}, usage=dict(USAGE, completion_tokens=1)), chunk({"content": "b"}, finish="stop", usage=USAGE)],
}

LITELLMS_OWN = {"no usage (litellm counts)", "reasoning beside the text", "a usage chunk on every chunk"}


class _SSE(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the body ends when the connection closes
    stream: ClassVar[list[dict]] = []
    received: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        self.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for item in self.stream:
            self.wfile.write(f"data: {json.dumps(item)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def sse_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SSE)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def stream_once(base_url: str, direct: bool, **kwargs: Any):
    """(texts shown while it was written, the answer) of one streamed call."""
    shown: list[str] = []

    async def on_text(so_far: str) -> None:
        shown.append(so_far)

    model = LiteLLMModel("openai/fake", api_base=base_url, api_key="k", retries=0, direct=direct)
    answer = asyncio.run(model.stream(MESSAGES, on_text=on_text, **kwargs))
    return shown, answer


@pytest.mark.parametrize("name", list(STREAMS))
def test_a_stream_shows_and_reads_what_litellm_shows_and_reads(sse_server, name):
    base_url = sse_server
    _SSE.stream, _SSE.received = STREAMS[name], []
    through_litellm = stream_once(base_url, direct=False, tools=TOOLS)
    directly = stream_once(base_url, direct=True, tools=TOOLS)
    assert directly == through_litellm
    assert _SSE.received[1] == _SSE.received[0]  # the same request body
    assert directly[1].content or directly[1].tool_calls  # an answer was read, not two empty ones
    # The plain streams are assembled here; the others are handed to litellm's own builder.
    assert (from_openai_stream(STREAMS[name], "openai/fake") is None) == (name in LITELLMS_OWN)


@pytest.mark.parametrize(
    "answer",
    [text(" ".join(f"word{n}" for n in range(40))), tool_call("add_task", {"title": "gas"}), tool_calls([("a", {"x": 1}), ("b", {"y": [2]})], content="two calls")],
)
def test_the_fake_servers_streams_are_read_alike(answer):
    seen = {}
    for direct in (False, True):
        with FakeOpenAI(default=lambda request: answer) as llm:
            seen[direct] = (stream_once(llm.base_url, direct, tools=TOOLS), llm.requests)
    assert seen[True] == seen[False]
    assert seen[True][1][0]["stream"] is True and seen[True][1][0]["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    "steps, retries, raised, requests",
    [
        ([error(400, {"error": {"message": "bad field"}})], 2, ModelError, 1),  # refused: not tried again
        ([error(500), error(500)], 1, ModelUnavailable, 2),
        ([error(503), text("second time")], 1, None, 2),  # nothing was shown yet: tried again
        ([delay(2.0, text("late"))], 0, ModelUnavailable, 1),  # longer than the timeout
    ],
)
def test_a_failed_stream_is_retried_or_raised_as_through_litellm(steps, retries, raised, requests):
    for direct in (False, True):
        with FakeOpenAI() as llm:
            llm.script(*steps)
            model = LiteLLMModel("openai/fake", api_base=llm.base_url, retries=retries, backoff=0.01, timeout=0.5, direct=direct)

            async def ignore(_: str) -> None:
                pass

            call = model.stream([{"role": "user", "content": "hi"}], on_text=ignore)
            if raised is None:
                assert asyncio.run(call).content == "second time"
            else:
                with pytest.raises(raised):
                    asyncio.run(call)
            assert len(llm.requests) == requests, direct

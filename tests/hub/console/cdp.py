"""A headless Chromium driven over the DevTools protocol (aiohttp's websocket client): open
a page, read it, fill and submit its forms, click its links, as an operator would.

Only what the browser test needs: navigation waits for the page's load event, scripts are
evaluated by DevTools (the console's pages themselves run none), screenshots are PNG.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp

__all__ = ["BROWSERS", "FLAGS", "Browser", "find_browser"]

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class Browser:
    """One Chromium process with one tab."""

    def __init__(self, executable: str, profile: Path) -> None:
        self.executable, self.profile = executable, profile
        self._ids = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._loads: asyncio.Queue[str] = asyncio.Queue()

    async def __aenter__(self) -> Browser:
        self.process = subprocess.Popen(
            [self.executable, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0", "--window-size=1280,1000", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "HOME": str(self.profile)},
        )
        port = await asyncio.wait_for(asyncio.to_thread(self._devtools_port), 60)
        self.http = aiohttp.ClientSession()
        async with self.http.get(f"http://127.0.0.1:{port}/json/list") as response:
            page = next(t for t in await response.json() if t["type"] == "page")
        self.ws = await self.http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        await self.call("Page.enable")
        await self.call("Runtime.enable")
        return self

    def _devtools_port(self) -> int:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            found = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if found:
                return int(found.group(1))
        raise RuntimeError("chromium exited before it listened for DevTools")

    async def __aexit__(self, *exc: object) -> None:
        self._reader.cancel()
        await self.ws.close()
        await self.http.close()
        self.process.terminate()
        await asyncio.to_thread(self.process.wait, 20)

    async def _read(self) -> None:
        async for message in self.ws:
            data = json.loads(message.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            elif data.get("method") == "Page.loadEventFired":
                self._loads.put_nowait("load")

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._ids += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[self._ids] = future
        await self.ws.send_str(json.dumps({"id": self._ids, "method": method, "params": params}))
        answer = await asyncio.wait_for(future, 60)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    async def _navigation(self, start: Any) -> None:
        while not self._loads.empty():
            self._loads.get_nowait()
        await start
        await asyncio.wait_for(self._loads.get(), 60)

    async def goto(self, url: str) -> None:
        await self._navigation(self.call("Page.navigate", url=url))

    async def eval(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def follow(self, expression: str) -> None:
        """Evaluate ``expression`` (a click, a form's submit) and wait for the page it leads to."""
        await self._navigation(self.eval(expression))

    async def click(self, selector: str) -> None:
        await self.follow(f"document.querySelector({json.dumps(selector)}).click()")

    async def click_link(self, text: str) -> None:
        """Click the first link whose text is ``text``."""
        js = f"[...document.querySelectorAll('a')].find(a => a.textContent.trim() === {json.dumps(text)}).click()"
        await self.follow(js)

    async def fill(self, selector: str, value: str) -> None:
        await self.eval(f"document.querySelector({json.dumps(selector)}).value = {json.dumps(value)}")

    async def submit(self, form: str, **fields: str) -> None:
        """Fill the named fields of the form at ``form`` and press its submit button."""
        for name, value in fields.items():
            await self.fill(f"{form} [name={json.dumps(name)}]", value)
        await self.click(f"{form} button[type=submit]")

    async def html(self) -> str:
        return await self.eval("document.documentElement.outerHTML")

    async def url(self) -> str:
        return await self.eval("location.href")

    async def width(self, width: int, height: int = 1000) -> None:
        await self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    async def screenshot(self, path: Path) -> None:
        shot = await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))

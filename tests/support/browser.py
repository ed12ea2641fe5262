"""Headless Chromium driven over the Chrome DevTools Protocol on a pipe (``--remote-debugging-pipe``:
JSON messages ending in NUL, Chromium reads fd 3 and writes fd 4), so no websocket client is needed.

The page under test has no script; the test drives it as a user would (fill a field, tick a box,
press a button) through ``Runtime.evaluate``, and records every request and console message."""

from __future__ import annotations

import json
import os
import select
import subprocess
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"


class Browser:
    def __init__(self, profile: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def as_fd_3_and_4() -> None:
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=as_fd_3_and_4,
            pass_fds=(3, 4),
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if not select.select([self._from_chrome], [], [], 120)[0]:  # a hang guard, not a timing check
                raise RuntimeError("chromium sent nothing for 120 s")
            chunk = os.read(self._from_chrome, 65536)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(self, method: str, *, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer["result"]
                return result
            self.events.append(answer)

    def wait_for(self, method: str, since: int) -> dict[str, Any]:
        """The first event ``method`` recorded after ``len(self.events) == since``, reading until it comes."""
        while True:
            for event in self.events[since:]:
                if event.get("method") == method:
                    return event
            self.events.append(self._read())

    def open(self, url: str) -> int:
        """Load ``url``; the HTTP status of the document."""
        mark = len(self.events)
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired", mark)
        return self._document_status(mark)

    def act(self, script: str) -> int:
        """Run ``script`` (which submits a form), wait for the page it leads to; that page's HTTP status."""
        mark = len(self.events)
        self.js(script)
        self.wait_for("Page.loadEventFired", mark)
        return self._document_status(mark)

    def _document_status(self, since: int) -> int:
        documents = [
            e["params"]["response"]["status"]
            for e in self.events[since:]
            if e.get("method") == "Network.responseReceived" and e["params"].get("type") == "Document"
        ]
        assert documents, "no document was loaded"
        return int(documents[-1])

    def js(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def html(self) -> str:
        return str(self.js("document.documentElement.outerHTML"))

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def console(self) -> list[str]:
        """Console messages, exceptions and browser log entries (a CSP violation is one)."""
        found = []
        for e in self.events:
            if e.get("method") == "Log.entryAdded":
                found.append(e["params"]["entry"]["text"])
            elif e.get("method") in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown"):
                found.append(json.dumps(e["params"])[:500])
        return found

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)

"""One headless Chromium for many pages: the browser is started once and driven over its
DevTools protocol (`--remote-debugging-pipe`, the pipe Puppeteer and Playwright use), and each
test browses in a browser context of its own (its own cookies and storage, as a fresh
`--user-data-dir` had). What a page gives is what `chromium --dump-dom` and `--screenshot` gave:
the DOM serialised once the page has loaded (or once its virtual time ran out), and a PNG of a
window of the given size."""

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# as the `--dump-dom` and `--screenshot` runs were started, less what only a one-shot run needs
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# what `chromium --dump-dom` prints: the document as serialised once it has loaded
DUMP_DOM = "document.documentElement.outerHTML"


class BrowserError(AssertionError):
    pass


class Browser:
    """A headless Chromium and its DevTools pipe: fd 3 takes our commands, fd 4 gives its
    answers and events, each a JSON message ended by a NUL byte."""

    def __init__(self, *flags: str, timeout: float = 90):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="agentlake-chromium-")
        self._log = open(Path(self.profile) / "stderr.log", "wb")  # a file: an unread pipe would fill and stall it
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def pipes_at_3_and_4():  # the numbers Chromium reads and writes; copied first, either may be 3 or 4
            r, w = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(r, 3)
            os.dup2(w, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        # close_fds off, or the pipes would be closed after they were put at 3 and 4; Python opens
        # every other file not inheritable, so the browser gets these two and its standard ones
        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, *flags, f"--user-data-dir={self.profile}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
            preexec_fn=pipes_at_3_and_4, close_fds=False)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []
        self.call("Browser.getVersion")  # answered once the browser is up

    # -- the protocol ----------------------------------------------------------------------

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise BrowserError(f"Chromium did not answer within {self.timeout} s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError(f"Chromium exited ({self.process.poll()}): {self.stderr()}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: str | None = None, **params) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to_browser, data):]
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            if "method" in answer:
                self._events.append(answer)

    def wait_for(self, method: str, session: str, **match) -> dict:
        """The next event `method` of the page `session` whose parameters have the values in
        `match`, the events before it dropped."""
        deadline = time.monotonic() + self.timeout
        while True:
            for i, event in enumerate(self._events):
                params = event.get("params", {})
                if event["method"] == method and event.get("sessionId") == session and \
                        all(params.get(k) == v for k, v in match.items()):
                    del self._events[:i + 1]
                    return params
            self._events.clear()
            event = self._read(deadline)
            if "method" in event:
                self._events.append(event)

    def stderr(self) -> str:
        return (Path(self.profile) / "stderr.log").read_text(errors="replace")[-2000:]

    def context(self) -> "Context":
        return Context(self)

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        self._log.close()
        shutil.rmtree(self.profile, ignore_errors=True)


class Context:
    """A browser context: one test's cookies and storage, as a fresh profile directory had,
    and a tab in it."""

    def __init__(self, browser: Browser):
        self.browser = browser
        self.id = browser.call("Target.createBrowserContext", disposeOnDetach=True)["browserContextId"]
        target = browser.call("Target.createTarget", url="about:blank", browserContextId=self.id)["targetId"]
        self.session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable")
        self.call("Page.setLifecycleEventsEnabled", enabled=True)  # a load names its navigation

    def call(self, method: str, **params) -> dict:
        return self.browser.call(method, self.session, **params)

    def load(self, url: str, virtual_time_budget: int | None = None) -> str | None:
        """Open `url` and wait for its load event, or (a budget given) until the page's virtual
        time has run that many milliseconds, as `--virtual-time-budget` does: the clock waits
        while a request is pending and runs ahead while the page is idle. Returns the network
        error that kept the page from loading (where `chromium --dump-dom` exited non-zero), or None."""
        if virtual_time_budget is not None:
            self.call("Emulation.setVirtualTimePolicy", policy="pause")  # no time passes before the page's
        navigated = self.call("Page.navigate", url=url)
        if "errorText" in navigated:
            return f"{url}: {navigated['errorText']}"
        if virtual_time_budget is None:  # this navigation's load, not the blank page's before it
            self.browser.wait_for("Page.lifecycleEvent", self.session, name="load", frameId=navigated["frameId"],
                                  loaderId=navigated["loaderId"])
        else:
            self.call("Emulation.setVirtualTimePolicy", policy="pauseIfNetworkFetchesPending",
                      budget=virtual_time_budget)
            self.browser.wait_for("Emulation.virtualTimeBudgetExpired", self.session)
        return None

    def dom(self, url: str, virtual_time_budget: int | None = None) -> tuple[str | None, str]:
        """The network error that kept the page from loading (or None), and the DOM as Chromium
        built it (`--dump-dom`)."""
        error = self.load(url, virtual_time_budget)
        return error, "" if error else self.call("Runtime.evaluate", expression=DUMP_DOM,
                                                 returnByValue=True)["result"]["value"]

    def screenshot(self, url: str, png: Path, width: int = 1440, height: int = 1800) -> None:
        """The page in a window of that size, scrollbars hidden (`--screenshot --window-size`)."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self.call("Emulation.setScrollbarsHidden", hidden=True)
        try:
            error = self.load(url)
            if error:
                raise BrowserError(error)
            data = self.call("Page.captureScreenshot", format="png")["data"]
        finally:
            self.call("Emulation.clearDeviceMetricsOverride")
            self.call("Emulation.setScrollbarsHidden", hidden=False)
        png.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.browser.call("Target.disposeBrowserContext", browserContextId=self.id)
        except BrowserError:
            pass

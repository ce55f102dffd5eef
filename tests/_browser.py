"""A page loaded in a real headless Chromium (the distribution's `chromium`, which .ci/run
installs), driven over the DevTools protocol: what the console said, the exceptions thrown,
every request that left the page, whether each image decoded, the load time and a screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)


@dataclass
class Rendered:
    console: list[dict] = field(default_factory=list)     # level, text
    exceptions: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)      # URLs other than the page, data:
    images: list[dict] = field(default_factory=list)       # decoded, width, height
    load_s: float = float("nan")
    screenshot: bytes = b""


def _devtools_port(proc: subprocess.Popen, deadline: float) -> int:
    """The port Chromium's stderr announces. A thread reads stderr to its end, so a browser
    that stays silent cannot block past the deadline and one that logs much never fills the
    pipe and stalls."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for raw in iter(proc.stderr.readline, b""):
            lines.put(raw.decode(errors="replace"))
        lines.put(None)  # stderr closed: the browser has ended

    threading.Thread(target=read, daemon=True).start()
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            raise RuntimeError(f"chromium ended (exit status {proc.wait(timeout=10)}) before "
                               "it announced its DevTools endpoint")
        if "DevTools listening on ws://" in line:
            return int(line.split("ws://")[1].split("/")[0].rsplit(":", 1)[1])
    raise RuntimeError("chromium did not announce its DevTools endpoint in time")


def _devtools_json(port: int, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/{path}", timeout=10) as r:
        return json.load(r)


def _connect(port: int, timeout: float, origin: str | None = None):
    """The page's DevTools websocket. No Origin header is sent: Chromium 111 and later refuse
    a DevTools connection whose origin is not allowed by --remote-allow-origins, and accept
    one without an origin, as the earlier versions do. `origin` sends one (the test of the
    refusal's message)."""
    import websocket

    target = next(t for t in _devtools_json(port, "list") if t["type"] == "page")
    try:
        return websocket.create_connection(target["webSocketDebuggerUrl"], timeout=timeout,
                                           suppress_origin=origin is None,
                                           **({"origin": origin} if origin else {}))
    except websocket.WebSocketException as exc:
        version = _devtools_json(port, "version").get("Browser", "an unknown Chromium")
        status = getattr(exc, "status_code", None)
        raise RuntimeError(f"{version} refused the DevTools websocket on port {port}"
                           f"{f' (HTTP {status})' if status else ''}: "
                           f"{str(exc).splitlines()[0][:200]}") from None


@contextlib.contextmanager
def chromium(width: int = 1200, height: int = 1600, timeout: float = 90.0):
    """A headless Chromium in its own process group and profile; yields its DevTools port."""
    # Chromium's helper processes may still write into the profile as it is removed
    with tempfile.TemporaryDirectory(prefix="topkscope-chromium-",
                                     ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)  # its own process group: the helpers end with it
        try:
            yield _devtools_port(proc, time.monotonic() + timeout)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


def render(page: Path, width: int = 1200, height: int = 1600, timeout: float = 90.0
           ) -> Rendered:
    """Load `page` (a local file) and wait for its load event; the page's console messages,
    exceptions and outgoing requests, each image's decode, the load time, a PNG screenshot."""
    deadline = time.monotonic() + timeout
    with chromium(width, height, timeout) as port:
        ws = _connect(port, timeout)
        try:
            return _drive(ws, Path(page).resolve().as_uri(), deadline)
        finally:
            ws.close()


def _drive(ws, url: str, deadline: float) -> Rendered:
    out = Rendered()
    ids = iter(range(1, 1 << 30))

    def send(method: str, **params) -> int:
        i = next(ids)
        ws.send(json.dumps({"id": i, "method": method, "params": params}))
        return i

    def until(check) -> dict:
        while time.monotonic() < deadline:
            msg = json.loads(ws.recv())
            method = msg.get("method")
            if method == "Runtime.consoleAPICalled":
                p = msg["params"]
                out.console.append({"level": p["type"], "text": " ".join(
                    str(a.get("value", a.get("description", ""))) for a in p["args"])})
            elif method == "Log.entryAdded":
                e = msg["params"]["entry"]
                out.console.append({"level": e["level"], "text": e["text"]})
            elif method == "Runtime.exceptionThrown":
                out.exceptions.append(msg["params"]["exceptionDetails"].get("text", ""))
            elif method == "Network.requestWillBeSent":
                req = msg["params"]["request"]["url"]
                if req != url and not req.startswith("data:"):
                    out.requests.append(req)
            if check(msg):
                return msg
        raise TimeoutError("the page did not finish in time")

    for domain in ("Page", "Runtime", "Log", "Network"):
        i = send(f"{domain}.enable")
        until(lambda m, i=i: m.get("id") == i)
    start = time.monotonic()
    send("Page.navigate", url=url)
    until(lambda m: m.get("method") == "Page.loadEventFired")
    out.load_s = time.monotonic() - start
    i = send("Runtime.evaluate", awaitPromise=True, returnByValue=True, expression=(
        "Promise.all(Array.from(document.images).map(img => img.decode().then("
        "() => ({decoded: true, width: img.naturalWidth, height: img.naturalHeight}), "
        "() => ({decoded: false, width: img.naturalWidth, height: img.naturalHeight}))))"))
    out.images = until(lambda m: m.get("id") == i)["result"]["result"]["value"]
    i = send("Page.captureScreenshot", format="png")
    out.screenshot = base64.b64decode(until(lambda m: m.get("id") == i)["result"]["data"])
    return out


def screenshot(page: Path, out: Path, width: int = 1200, height: int = 1500) -> float:
    """A screenshot of `page` (its first screen), shrunk as the gallery's figures are, written
    to `out`; returns the page's load time in seconds. The README's picture of the report:

        python -m tests._browser results/demo/report.html docs/gallery/report.png
    """
    from topkscope.io import write_bytes_atomic
    from topkscope.publish.gallery import shrunk_png

    shown = render(page, width, height)
    with tempfile.TemporaryDirectory() as scratch:
        raw = Path(scratch) / "shot.png"
        raw.write_bytes(shown.screenshot)
        write_bytes_atomic(out, shrunk_png(raw))
    return shown.load_s


if __name__ == "__main__":
    import sys

    seconds = screenshot(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"{sys.argv[2]}: {Path(sys.argv[2]).stat().st_size / 1e3:.0f} kB; the page loaded "
          f"in {seconds:.2f} s")

"""A small client of Chromium's DevTools protocol over its WebSocket, standard library only:
enough to open a page in headless Chromium, evaluate JavaScript in it (to read its DOM) and
take a screenshot. The dashboard's browser test (tests/test_dashboard_browser.py) and `make
pictures` (tools/readme_picture.py) drive the browser with it; docs/design/dashboard.md says
why this rather than --dump-dom (a page with a live event stream never finishes loading).

    with Browser() as b:
        b.open(url)
        b.wait_for("document.body.dataset.updates > 2", timeout=60)
        png = b.screenshot(1200, 900)
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# What Chromium needs to run headless as root on a machine without outside network: no
# sandbox (root), no GPU, and none of its own background connections (updates, sync, QUIC),
# which a closed network refuses.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--mute-audio"]


class WebSocket:
    """A client WebSocket (RFC 6455): text frames out (masked), frames in (unmasked, maybe in
    pieces); answers pings. Blocking, with a timeout on every read."""

    def __init__(self, url, timeout=60.0):
        u = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        path = u.path + (f"?{u.query}" if u.query else "")
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
                           "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("the browser closed the WebSocket handshake")
            head += chunk
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(f"WebSocket handshake refused: {head[:200]!r}")

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the browser closed the WebSocket")
            buf += chunk
        return buf

    def _frame(self, opcode, payload):
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + body)

    def send(self, text):
        self._frame(0x1, text.encode())

    def recv(self):
        parts = []
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            op = b0 & 0x0F
            if op == 0x9:  # ping
                self._frame(0xA, data)
                continue
            if op == 0x8:
                raise ConnectionError("the browser closed the WebSocket")
            parts.append(data)
            if b0 & 0x80:
                return b"".join(parts).decode()

    def close(self):
        try:
            self._frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()


class Browser:
    """Headless Chromium on a DevTools port of its own, one page, driven over the protocol."""

    def __init__(self, timeout=90.0):
        if CHROMIUM is None:
            raise RuntimeError("headless Chromium is not installed (Debian package `chromium`)")
        self.timeout = timeout
        self.dir = tempfile.mkdtemp(prefix="tg-chromium-")
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # not the ASan runtime
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self.dir}",
                                      "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
                                      "about:blank"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        self.ws = None
        self._id = 0
        try:
            port = self._devtools_port()
            deadline = time.monotonic() + timeout
            while True:  # the page target appears once the browser has opened about:blank
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            if not pages:
                raise RuntimeError("headless Chromium opened no page")
            self.ws = WebSocket(pages[0]["webSocketDebuggerUrl"], timeout=timeout)
        except BaseException:
            self.close()
            raise

    def _devtools_port(self):
        """The port Chromium prints on stderr: "DevTools listening on ws://127.0.0.1:PORT/..."."""
        deadline = time.monotonic() + self.timeout
        seen = []
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline().decode(errors="replace")
            if not line and self.proc.poll() is not None:
                break
            seen.append(line)
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:  # the rest of its stderr is read and dropped (a full pipe would stop it)
                threading.Thread(target=self._drain, daemon=True).start()
                return int(m.group(1))
        raise RuntimeError("headless Chromium did not start its DevTools server: " + "".join(seen)[-2000:])

    def _drain(self):
        try:
            while self.proc.stderr.read(65536):
                pass
        except (OSError, ValueError):
            pass

    def call(self, method, **params):
        """Sends one command and returns its result (events that come meanwhile are skipped)."""
        self._id += 1
        me = self._id
        self.ws.send(json.dumps({"id": me, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == me:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def open(self, url, width=1200, height=900):
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        self.call("Page.navigate", url=url)

    def eval(self, expression):
        """The value of a JavaScript expression in the page (JSON-able), or None on an error."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in r:
            return None
        return r.get("result", {}).get("value")

    def wait_for(self, expression, timeout=60.0, every=0.2):
        """Polls until the expression is truthy; returns its value (AssertionError at the
        deadline, naming it)."""
        deadline = time.monotonic() + timeout
        while True:
            v = self.eval(expression)
            if v:
                return v
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never had {expression!r} within {timeout} s")
            time.sleep(every)

    def screenshot(self, path=None):
        """The page as PNG bytes (written to path if given)."""
        data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        if path is not None:
            with open(path, "wb") as fh:
                fh.write(data)
        return data

    def close(self):
        if self.ws is not None:
            self.ws.close()
            self.ws = None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

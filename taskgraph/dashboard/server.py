"""The dashboard's HTTP server: the standard library's ThreadingHTTPServer, bounded.

Routes (every one but /static/ refused with 403 without the token, when the dashboard has
one):

* ``/``: the page (static/index.html); ``/static/<name>``: a file of the package's static/
  folder, looked up by name in a table made at start (no path is ever joined from a request,
  so ``..`` and absolute paths find nothing: 404);
* ``/events``: the live updates as server-sent events (a snapshot first, then an update
  every PUBLISH seconds);
* ``/api/state``: the snapshot as JSON; ``/api/trace/<id>``: a trace's summary;
  ``/trace/<id>.svg``: its executed graph (Graphviz); ``/trace/<id>.tgtrace``: the file.

Bounds: at most MAX_CONNECTIONS connections at once (more get 503 at once); every socket has
a timeout (a client that never reads makes its writer fail after SEND_TIMEOUT, and the
thread ends); each event stream has a queue of at most QUEUE messages, and a client that
falls behind has its queue emptied and gets a fresh snapshot instead (the sampler never
waits for a client). ``close()`` ends every stream, stops the server and closes its port.
"""
from __future__ import annotations

import hmac
import http.server
import ipaddress
import json
import os
import re
import socket
import tempfile
import threading
import urllib.parse

from taskgraph.trace.viz import GraphvizError

__all__ = ["Server", "STATIC"]

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
MAX_CONNECTIONS = 32
QUEUE = 8
SEND_TIMEOUT = 10.0
READ_TIMEOUT = 10.0
HEARTBEAT = 5.0
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
          ".txt": "text/plain; charset=utf-8"}
# The page's scripts and styles are files of its own: no inline script runs, whatever a task
# name or an error message holds.
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors *; base-uri 'none'; form-action 'none'")


def _static_files():
    """{name: path} of the files served under /static/ (read once: the table is the whitelist)."""
    out = {}
    for root, _, files in os.walk(STATIC):
        for f in files:
            path = os.path.join(root, f)
            out[os.path.relpath(path, STATIC).replace(os.sep, "/")] = path
    return out


def is_loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class _Client:
    """One event stream's bounded queue."""

    def __init__(self):
        self.cond = threading.Condition()
        self.msgs = []
        self.resync = False
        self.closed = False

    def put(self, data):
        with self.cond:
            if len(self.msgs) >= QUEUE:  # it cannot keep up: drop, and send a snapshot next
                self.msgs.clear()
                self.resync = True
            else:
                self.msgs.append(data)
            self.cond.notify()

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify()


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 16

    def __init__(self, addr, handler, owner):
        self.owner = owner
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.address_family = family
        super().__init__(addr, handler)

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):  # too many at once: refused, no thread
            try:
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                b"Connection: close\r\n\r\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "taskgraph-dashboard"
    protocol_version = "HTTP/1.1"
    timeout = READ_TIMEOUT

    def log_message(self, format, *args):  # quiet: a dashboard does not write to stderr
        pass

    # ----------------------------------------------------------------- replies
    def _send(self, code, body=b"", ctype="text/plain; charset=utf-8", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", _CSP)
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, obj):
        self._send(200, json.dumps(obj, separators=(",", ":")).encode(), "application/json")

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        owner = self.server.owner
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if owner.token is not None and not url.path.startswith("/static/"):
            # (the static files are the package's own, the same for everyone)
            given = (query.get("token") or [""])[0]
            if not hmac.compare_digest(given.encode(), owner.token.encode()):
                self._send(403, b"taskgraph dashboard: a token is needed (the URL it printed)")
                return
        path = url.path
        if path in ("/", "/index.html"):
            self._file("index.html")
        elif path.startswith("/static/"):
            self._file(path[len("/static/"):])
        elif path == "/events":
            self._events()
        elif path == "/api/state":
            self._json(owner.model.snapshot())
        else:
            m = re.fullmatch(r"/(api/trace|trace)/(\d{1,9})(\.svg|\.tgtrace)?", path)
            if m is None:
                self._send(404, b"not found")
            else:
                self._trace(m.group(1), int(m.group(2)), m.group(3))

    def _file(self, name):
        path = self.server.owner.files.get(name)
        if path is None:
            self._send(404, b"not found")
            return
        with open(path, "rb") as fh:
            body = fh.read()
        self._send(200, body, _TYPES.get(os.path.splitext(name)[1], "application/octet-stream"))

    def _trace(self, kind, tid, suffix):
        model = self.server.owner.model
        tr = model.trace(tid)
        if tr is None:
            self._send(404, b"no such trace (the dashboard keeps the newest few)")
        elif kind == "api/trace" and suffix is None:
            self._json(model.trace_info(tid))
        elif kind == "trace" and suffix == ".svg":
            try:
                svg = str(tr.visualize())
            except GraphvizError:
                self._send(404, b"Graphviz is not installed: no picture")
                return
            self._send(200, svg.encode(), "image/svg+xml")
        elif kind == "trace" and suffix == ".tgtrace":
            with tempfile.TemporaryDirectory() as d:
                p = os.path.join(d, "t.tgtrace")
                tr.save(p)
                with open(p, "rb") as fh:
                    body = fh.read()
            self._send(200, body, "application/octet-stream", [
                ("Content-Disposition", f'attachment; filename="taskgraph-{tid}.tgtrace"')])
        else:
            self._send(404, b"not found")

    def _events(self):
        owner = self.server.owner
        client = _Client()
        if not owner.add_client(client):
            self._send(503, b"the dashboard is closing")
            return
        self.close_connection = True
        try:
            self.connection.settimeout(SEND_TIMEOUT)  # a client that never reads: the write fails
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self._event(owner.model.snapshot())
            while True:
                with client.cond:
                    if not client.msgs and not client.resync and not client.closed:
                        client.cond.wait(HEARTBEAT)
                    if client.closed:
                        return
                    msgs, client.msgs = client.msgs, []
                    resync, client.resync = client.resync, False
                if resync:
                    self._event(owner.model.snapshot())
                elif msgs:
                    for data in msgs:
                        self._raw(data)
                else:
                    self._raw(b": keep-alive\n\n")
        except (OSError, ValueError):  # gone, or too slow to read: this thread ends
            return
        finally:
            owner.drop_client(client)

    def _event(self, msg):
        self._raw(encode_event(msg))

    def _raw(self, data):
        self.wfile.write(data)
        self.wfile.flush()


def encode_event(msg):
    """One server-sent event holding msg as JSON (one line: json.dumps escapes newlines)."""
    return b"data: " + json.dumps(msg, separators=(",", ":")).encode() + b"\n\n"


class Server:
    """Serves the model's page and updates on host:port (0: a free port) in a thread."""

    def __init__(self, model, host, port, token):
        self.model, self.token = model, token
        self.files = _static_files()
        self._clients = set()
        self._lock = threading.Lock()
        self._closing = False
        self.httpd = _HTTPServer((host, port), _Handler, self)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name=f"taskgraph-dashboard-{self.port}", daemon=True)
        self._thread.start()

    def add_client(self, client):
        with self._lock:
            if self._closing:
                return False
            self._clients.add(client)
            return True

    def drop_client(self, client):
        with self._lock:
            self._clients.discard(client)

    def clients(self):
        with self._lock:
            return len(self._clients)

    def publish(self, msg):
        """Hands an update to every event stream (never waits for one)."""
        data = encode_event(msg)
        with self._lock:
            clients = list(self._clients)
        for c in clients:
            c.put(data)

    def close(self):
        with self._lock:
            self._closing = True
            clients = list(self._clients)
        for c in clients:
            c.close()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join()

"""The Dashboard object: a model (model.py) fed by the schedulers' live feeds, and a server
(server.py) that shows it in a browser, for as long as it is open."""
from __future__ import annotations

import atexit
import html
import secrets
import threading
import weakref

from taskgraph import scheduler as _scheduler
from taskgraph.dashboard.model import Model
from taskgraph.dashboard.server import Server, is_loopback
from taskgraph.executor import Executor
from taskgraph.trace import tracing as _tracing

__all__ = ["Dashboard", "dashboard"]

_open = weakref.WeakSet()


class Dashboard:
    """A live view of taskgraph's workers in the browser, served at ``url`` while it is open.

    Made by ``taskgraph.dashboard()``; see there. Attributes: ``url`` (with the token, if
    any), ``host``, ``port``, ``token``, ``closed``. Methods: ``close()`` (idempotent),
    ``snapshot()`` (what the page shows, as a dict). A context manager: the block's end closes
    it. In a notebook it displays as a link and the page in a frame."""

    def __init__(self, scheduler=None, *, host="127.0.0.1", port=0, token=None, window=10.0):
        sched = scheduler.scheduler if isinstance(scheduler, Executor) else scheduler
        if sched is not None and not isinstance(sched, _scheduler.Scheduler):
            raise TypeError("dashboard() takes a taskgraph.Scheduler, a taskgraph.Executor or "
                            f"None (every scheduler), got {type(scheduler).__name__} "
                            f"{scheduler!r:.80}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an int from 0 (a free one) to 65535, got {port!r}")
        if isinstance(window, bool) or not isinstance(window, (int, float)) or not 1 <= window <= 600:
            raise ValueError(f"window must be a number of seconds from 1 to 600, got {window!r}")
        if token is not None and (not isinstance(token, str) or not token):
            raise ValueError("token must be a non-empty str or None")
        if token is None and not is_loopback(host):
            token = secrets.token_urlsafe(24)  # reachable from other machines: Jupyter's rule
        self.host, self.token, self.scheduler = host, token, sched
        self.closed = False
        self._lock = threading.Lock()
        self.model = Model(window=window)
        if sched is not None:
            if sched.closed:
                raise ValueError(f"{sched!r} is closed")
            self.model.add(sched)
        else:
            for s in list(_scheduler._live):
                if not s.closed:
                    self.model.add(s)
        self._server = Server(self.model, host, port, token)
        self.port = self._server.port
        self.model.publish = self._server.publish
        _scheduler.watchers.append(self._on_scheduler)
        _tracing.closed_hooks.append(self.model.add_trace)
        self.model.start()
        _open.add(self)
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}/" + (f"?token={token}" if token else "")

    def _on_scheduler(self, sched, event):
        if event == "open" and self.scheduler is None:
            self.model.add(sched)
        elif event == "closed" and (self.scheduler is None or sched is self.scheduler):
            self.model.closed(sched)
            if sched is self.scheduler:  # its dashboard goes with it
                self.close()

    def close(self):
        """Stops the server (its port is closed when this returns), the sampler and the feeds.
        Idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        for hooks, f in ((_scheduler.watchers, self._on_scheduler),
                         (_tracing.closed_hooks, self.model.add_trace)):
            try:
                hooks.remove(f)
            except ValueError:
                pass
        self._server.close()
        self.model.close()
        _open.discard(self)

    def snapshot(self) -> dict:
        """What the page shows now: lanes (workers), progress per task name, the stream's
        items and buckets in the window, memory, traces (the JSON the page receives)."""
        return self.model.snapshot()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<taskgraph.Dashboard {self.url}{' closed' if self.closed else ''}>"

    def _repr_html_(self):
        u = html.escape(self.url, quote=True)
        if self.closed:
            return f"<p>taskgraph dashboard (closed): {u}</p>"
        return (f'<p><a href="{u}" target="_blank">taskgraph dashboard: {u}</a></p>'
                f'<iframe src="{u}" width="100%" height="720" style="border:1px solid #ddd">'
                "</iframe>")


def dashboard(scheduler=None, *, host="127.0.0.1", port=0, token=None, window=10.0) -> Dashboard:
    """Opens a live dashboard of taskgraph's workers in the browser and returns it; its
    ``url`` is where to look::

        with tg.dashboard() as d:
            print(d.url)          # http://127.0.0.1:PORT/
            tg.compute(...)

    ``scheduler``: None (every scheduler of the process, open now or made later: computes,
    fork-join, ``tg.map``, ``taskgraph.Executor``, ``taskgraph.dask.get``), or one Scheduler
    or Executor (closing it closes the dashboard). ``host``: the loopback address unless told
    otherwise; any other address needs the token (made for you unless given), which the URL
    carries. ``port``: 0 picks a free one. ``window``: seconds of the task stream shown.
    RuntimeError if another dashboard watches one of these schedulers. The dashboard stays
    open until ``close()``, the ``with`` block's end, or the interpreter's exit; a trace block
    (``with tg.trace()``) that closes while it is open shows there with its summary, picture
    and file. docs/dashboard.md."""
    return Dashboard(scheduler, host=host, port=port, token=token, window=window)


@atexit.register
def _close_all():
    for d in list(_open):
        try:
            d.close()
        except Exception:  # pragma: no cover - best effort at exit
            pass

"""A live dashboard in the browser, served by the process that runs the tasks. ``live`` holds
the Dashboard object and ``dashboard()``, which opens one; ``model`` keeps what the page shows,
taken by a sampler thread from the workers' live feeds (C rings the workers fill, summed up in
C) and bounded in size; ``server`` serves the page, its static files and the updates (server-
sent events) with the standard library's HTTP server, bounded in connections, queues and
time. The page itself (``static/``) is plain JavaScript and a canvas, with no library."""
from taskgraph.dashboard.live import Dashboard, dashboard

__all__ = ["Dashboard", "dashboard"]

"""The documentation's addresses, for messages: a wheel does not ship docs/, so what a user
reads (warnings, summaries, the HTML report) links to the pages by URL. Each link names a
page and a heading that exist (tests/test_docs.py checks them)."""
from __future__ import annotations

__all__ = ["doc", "README_INSTALL", "WORK_INFLATION", "WALL_CLOCK_CAVEAT", "WORK_SPAN"]

_BASE = "https://github.com/taskgraph-ft/taskgraph/blob/main/"


def doc(page: str, anchor: str = "") -> str:
    """The URL of `page` (a path in the repository), at the heading whose GitHub anchor is
    `anchor`."""
    return _BASE + page + (f"#{anchor}" if anchor else "")


README_INSTALL = doc("README.md", "use-it-in-your-project")
WORK_INFLATION = doc("docs/performance.md", "5-work-inflation-when-the-tasks-themselves-get-slower")
WALL_CLOCK_CAVEAT = doc("docs/trace.md", "caveat-wall-clock-times-on-shared-machines")
WORK_SPAN = doc("docs/trace.md", "work-span-parallelism")

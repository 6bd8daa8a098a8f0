"""What the benchmark scripts share: the environment recorded with each result file, and
writing it."""
from __future__ import annotations

import json
import os
import platform
import sys

import taskgraph as tg


def environment(quick):
    """The facts a figure depends on, stored beside it."""
    return {"python": sys.version.split()[0], "gil_enabled": tg.gil_enabled(),
            "machine": platform.machine(), "cpus": tg.usable_cpus(), "quick": quick}


def write_results(path, results, quick):
    """Writes {"env": ..., **results} to path as JSON (the directories made as needed)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        json.dump({"env": environment(quick), **results}, fh, indent=1)
    print(f"wrote {path}")

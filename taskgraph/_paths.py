"""File-name arguments of the functions that write or read files (tg.save/tg.load, Trace.save,
Trace.load, Trace.to_chrome_trace, write_trace_files)."""
from __future__ import annotations

import os


def fspath(path, what):
    """os.fspath(path), refusing what is not a file name (open() would take an int for a file
    descriptor, and close it). Raises TypeError naming `what` (the function called)."""
    try:
        return os.fspath(path)
    except TypeError:
        raise TypeError(f"{what}: path must be a str or os.PathLike, got {type(path).__name__} "
                        f"{path!r:.80}") from None

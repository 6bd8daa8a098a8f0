"""dask's own tests, run with taskgraph.dask.get as dask's scheduler (`make test-dask`).

taskgraph.dask.get is meant to pass dask's test modules wherever dask's threaded scheduler
passes them. This runs a representative part of them from the installed dask's own test files
(imported by path from the dask package, never copied): the delayed and local-scheduler
modules, array core and dataframe, without the tests dask marks slow (about 1,300 tests, a
minute or two on 2 cores). The scheduler is set for the whole session with
``dask.config.set(scheduler=taskgraph.dask.get)``; a test that picks its own scheduler keeps
it, as it would with the threaded one. ``--scheduler threads`` runs the same tests on dask's
threaded scheduler, to compare.

Excluded, by name, with the reason: none. (Each test here that passes with the threaded
scheduler passes with taskgraph's: the one that did not, dataframe's
test_head_npartitions_warn, caught a defect, fixed: a task's warnings did not reach the
caller's warnings.catch_warnings on 3.14t, whose warnings live in a context variable; every
dask task now runs in a copy of the caller's context, as the threaded scheduler runs it.)

Usage: python tools/dask_suite.py [--scheduler taskgraph|threads] [pytest arguments...]
Exit status: pytest's.
"""
import argparse
import os
import sys

MODULES = [
    "tests/test_delayed.py",
    "tests/test_local.py",
    "array/tests/test_array_core.py",
    "dataframe/tests/test_dataframe.py",
]
EXCLUDED = {}  # "path::test": "why" (none: see the module's docstring)


class UseScheduler:
    """A pytest plugin: the session's dask scheduler."""

    def __init__(self, which):
        self.which = which
        self.cm = None

    def pytest_configure(self, config):
        import dask
        if self.which == "taskgraph":
            import taskgraph.dask
            scheduler = taskgraph.dask.get
        else:
            scheduler = self.which
        self.cm = dask.config.set(scheduler=scheduler)
        self.cm.__enter__()

    def pytest_unconfigure(self, config):
        if self.cm is not None:
            self.cm.__exit__(None, None, None)

    def pytest_report_header(self, config):
        return f"dask's tests with scheduler={self.which}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scheduler", default="taskgraph", choices=["taskgraph", "threads"])
    args, rest = ap.parse_known_args(argv)
    import dask
    import pytest
    for needed in ("numpy", "pandas", "pyarrow"):
        __import__(needed)  # an ImportError here says what make setup did not install
    root = os.path.dirname(dask.__file__)
    paths = [os.path.join(root, m) for m in MODULES]
    deselect = [f"--deselect={os.path.join(root, k)}" for k in EXCLUDED]
    return pytest.main(["-q", "-p", "no:cacheprovider", "-m", "not slow", "--timeout", "300",
                        "-rfE", *deselect, *rest, *paths], plugins=[UseScheduler(args.scheduler)])


if __name__ == "__main__":
    sys.exit(main())

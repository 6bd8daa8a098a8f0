"""The C core, loaded once: ``core`` is ``taskgraph._core``.

``taskgraph._core`` is the extension written against the CPython C API (csrc/py/), with the
plain-C scheduler core (csrc/*.c) compiled into it: Task, Node, the worker loop, joins, graph
submission, trace recording, and also what is not per task: an Engine creates, shuts down and
frees its own pool and reads its counters, a Recorder hands its records over as bytes, the
module gives the records' clock. It is the only binding the package uses at run time
(docs/design/native.md); no address crosses between Python and C.

Constants (task states, stat names, result codes, the trace record's layout) come from
``core``; nothing here repeats them as numbers. On import:

* if the extension is missing or was built for another interpreter, an ImportError says what
  happened (most often: Python was started in a source checkout, whose ``taskgraph/`` folder,
  with no extension built in it, shadows the installed package) and the command that works;
* if the GIL is on (a GIL build of CPython, or a free-threaded one where something re-enabled
  it), a single ``GILWarning`` explains that tasks run correctly but without parallel
  speed-up, and how to get the GIL off.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import warnings

from taskgraph._links import README_INSTALL

def _not_built(e) -> str:
    """What to tell a user whose import of the extension failed with e, and what to run."""
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.dirname(here)
    py = f"{sys.executable} ({sys.version.split()[0]})"
    checkout = os.path.isfile(os.path.join(tree, "setup.py")) and os.path.isdir(
        os.path.join(tree, "csrc"))
    if not checkout:
        return (f"taskgraph's C extension (taskgraph._core) is missing or not built for {py} "
                f"in {here}: reinstall taskgraph with this interpreter's pip ({e})")
    from importlib.machinery import PathFinder
    elsewhere = [p for p in sys.path
                 if os.path.realpath(p or os.getcwd()) != os.path.realpath(tree)]
    spec = PathFinder.find_spec("taskgraph", elsewhere)
    build = f"{sys.executable} -m pip install -e {tree}"
    if spec is not None and spec.origin and os.path.dirname(spec.origin) != here:
        return (f"this `import taskgraph` found the source folder {here} (Python looks in the "
                f"current directory, {tree}, before the installed packages), which has no C "
                f"extension built for {py}; the installed taskgraph is "
                f"{os.path.dirname(spec.origin)}. Run Python from another directory, or build "
                f"the extension in the source folder: `{build}` ({e})")
    return (f"taskgraph was imported from its source folder {here}, which has no C extension "
            f"built for {py}: build it there with `{build}` (or `make setup` for the project's "
            f"own venvs) ({e})")


try:
    from taskgraph import _core as core
except ImportError as e:  # pragma: no cover - exercised only on a broken install
    raise ImportError(_not_built(e)) from e

__all__ = ["core", "GILWarning", "gil_enabled", "FREE_THREADED_BUILD"]

#: True when this interpreter was built with --disable-gil (3.13t, 3.14t, ...).
FREE_THREADED_BUILD = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


class GILWarning(RuntimeWarning):
    """Warned once at import when the GIL is enabled: no parallel speed-up is possible."""


def gil_enabled() -> bool:
    """Whether the GIL is on right now (always True on a GIL build)."""
    probe = getattr(sys, "_is_gil_enabled", None)
    return True if probe is None else bool(probe())


def _check_gil() -> None:
    if not gil_enabled():
        return
    if FREE_THREADED_BUILD:
        why = ("it is on in this free-threaded interpreter (forced by -X gil=1 or PYTHON_GIL=1, "
               "or re-enabled by an extension module imported before taskgraph that does not "
               "declare free-threading support)")
        fix = ("run Python with -X gil=0 or PYTHON_GIL=0 (or drop the module that turned "
               "the GIL on)")
    else:
        why = f"this CPython {sys.version.split()[0]} is a GIL build"
        fix = ("install taskgraph into a venv of a free-threaded CPython, 3.13t or newer (the "
               "interpreter named python3.13t or python3.14t; uv, pyenv and the python.org "
               "installers provide one: " + README_INSTALL + ")")
    warnings.warn(
        f"taskgraph: the GIL is enabled: {why}. Tasks run correctly but one at a time, so there "
        f"is no parallel speed-up. To fix: {fix}.",
        GILWarning,
        stacklevel=_importer_level(),
    )


def _importer_level() -> int:
    """The stacklevel of the first frame outside taskgraph: the user's import line (the
    import machinery's frames are skipped by warnings itself, and not counted)."""
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    level, f = 1, sys._getframe(2)  # stacklevel 1 is _check_gil, whose caller is f
    while f is not None:
        name = f.f_code.co_filename
        if not ("importlib" in name and "_bootstrap" in name):  # as warnings skips them
            level += 1
            if not os.path.abspath(name).startswith(here):
                break
        f = f.f_back
    return level


_check_gil()

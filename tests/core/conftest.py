"""Checks of the C scheduler core driven from Python through a test-only cffi binding
(tests/core/_binding.py), built once per session in build/cffi-core-<interpreter>/.

On a free-threaded interpreter these tests run in a session of their own (``make test-core``,
``TASKGRAPH_CORE_SESSION=1 python -m pytest tests/core``); tests/conftest.py leaves this
directory out of the main session there, with a notice. They need cffi 2 (3.14t, the GIL
builds): cffi 2 refuses CPython 3.13t, and cffi 1.17 would turn the GIL on there."""
import os
import sys

import pytest

pytest.importorskip("cffi", minversion="2", reason="the core's checks need cffi 2 (not on 3.13t)")

sys.path.insert(0, os.path.dirname(__file__))
import _binding  # noqa: E402


@pytest.fixture(scope="session")
def core_binding():
    """The built binding: ``.ffi`` and ``.lib``."""
    return _binding.build(_binding.default_build_dir())


@pytest.fixture(scope="session")
def ffi(core_binding):
    return core_binding.ffi


@pytest.fixture(scope="session")
def lib(core_binding):
    return core_binding.lib

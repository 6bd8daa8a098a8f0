"""Checks of the C scheduler core driven from Python through a test-only cffi binding
(tests/core/_binding.py), built once per session in build/cffi-core-<interpreter>/.

On a free-threaded CPython 3.13 importing cffi 1.17 (and loading the binding) turns the GIL
on unless it was forced off, so these tests run in a session of their own there:
``make test-core`` (``python -X gil=0 -m pytest tests/core``). tests/conftest.py leaves this
directory out of the main session in that case, with a notice."""
import os
import sys

import pytest

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

# The C extension taskgraph._core: the scheduler core (csrc/*.c, plain C11) and the per-task
# path written against the CPython C API (csrc/py/*.c), in one shared object: the package's
# only binding of the core (docs/design/native.md). The tests' cffi binding of the core is
# built by tests/core/_binding.py. Everything else is in pyproject.toml.
import glob
import os
import platform
import sys

from setuptools import Extension, setup

CORE = sorted(glob.glob("csrc/*.c"))
FACE = sorted(glob.glob("csrc/py/*.c"))
# TASKGRAPH_CFLAGS adds flags for special builds (the AddressSanitizer build of `make
# test-asan` passes -fsanitize=address,undefined there).
extra = os.environ.get("TASKGRAPH_CFLAGS", "").split()
# TLS descriptors for the per-thread state (TG_TLS, read a few times per task): the dynamic
# linker resolves each access to a few instructions where static TLS room is left for a
# module loaded later (it is, almost always), and falls back to the general form otherwise,
# so loading never fails; the default dialect calls __tls_get_addr on every access (about 10
# instructions each, 5-7 per fork-join task). x86-64 Linux (GCC and clang know the flag).
tls = ["-mtls-dialect=gnu2"] if platform.machine() in ("x86_64", "AMD64") and sys.platform.startswith("linux") else []
# TASKGRAPH_TEST_BUILD=1 compiles in the fault sites the tests arm (core._arm_fault,
# tests/test_faults.py): `make setup`'s editable install and tools/asan.sh set it; the sdist and
# the wheels (`make dist`, a user's pip install) are built without it.
macros = [("TG_FAULTS", "1")] if os.environ.get("TASKGRAPH_TEST_BUILD") == "1" else []

setup(ext_modules=[Extension(
    "taskgraph._core",
    sources=CORE + FACE,
    include_dirs=["csrc"],
    define_macros=macros,
    depends=sorted(glob.glob("csrc/*.h") + glob.glob("csrc/py/*.h")),
    extra_compile_args=["-std=gnu11", "-O2", "-flto", "-fvisibility=hidden", "-Wall", "-Wextra",
                        "-Wno-unused-parameter", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type"] + tls + extra,
    extra_link_args=["-O2", "-flto=auto"] + tls + [f for f in extra if f.startswith("-fsanitize")],
)])

# The C extension taskgraph._core: the scheduler core (csrc/*.c, plain C11) and the per-task
# path written against the CPython C API (csrc/py/*.c), in one shared object: the package's
# only binding of the core (docs/design/native.md). The tests' cffi binding of the core is
# built by tests/core/_binding.py. Everything else is in pyproject.toml.
import glob
import os

from setuptools import Extension, setup

CORE = ["csrc/deque.c", "csrc/graph.c", "csrc/pool.c", "csrc/trace.c"]
FACE = sorted(glob.glob("csrc/py/*.c"))
# TASKGRAPH_CFLAGS adds flags for special builds (the AddressSanitizer build of `make
# test-asan` passes -fsanitize=address,undefined there).
extra = os.environ.get("TASKGRAPH_CFLAGS", "").split()

setup(ext_modules=[Extension(
    "taskgraph._core",
    sources=CORE + FACE,
    include_dirs=["csrc"],
    depends=sorted(glob.glob("csrc/*.h") + glob.glob("csrc/py/*.h")),
    extra_compile_args=["-std=gnu11", "-O2", "-fvisibility=hidden", "-Wall", "-Wextra",
                        "-Wno-unused-parameter", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type"] + extra,
    extra_link_args=[f for f in extra if f.startswith("-fsanitize")],
)])

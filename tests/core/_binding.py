"""A test-only cffi binding of the C scheduler core (csrc/deque.c, graph.c, injector.c, pool.c, sleep.c, spare.c, thief.c, trace.c),
for checks of the core driven from Python (tests/core/, benchmarks/deque_binding.py). The
runtime never uses it: taskgraph binds the core through its C-API extension only.

The declarations are not written by hand: ``cdef_from_headers`` reads them from the core's
headers (functions, enums, typedefs). cffi cannot parse ``_Atomic``: a struct with atomic
members is declared with its other members only and ``...;`` (cffi's API mode asks the
compiler for its size and layout), so Python can allocate one (``ffi.new("tg_task *")``).
``static inline`` functions and ``extern`` variables are left out. The binding is built in
cffi's API mode against the real headers, so the compiler checks every declaration.

It needs cffi 2: free-threaded CPython 3.14 (where cffi keeps the GIL off) and the GIL builds.
cffi 2 refuses CPython 3.13t, and cffi 1.17 would turn the GIL on there. On a free-threaded
interpreter the tests that use it run in a pytest session of their own (``make test-core``;
tests/conftest.py leaves them out of the main session there).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSRC = os.path.join(ROOT, "csrc")
HEADERS = ["contend.h", "counters.h", "deque.h", "graph.h", "injector.h", "pool.h", "schedstat.h", "sleep.h",
           "sparestate.h", "thief.h", "trace.h"]
SOURCES = ["contend.c", "deque.c", "graph.c", "injector.c", "pool.c", "schedstat.c", "sleep.c", "spare.c",
           "thief.c", "trace.c"]
# Callbacks the tests give to the core (cffi's extern "Python"): tg_task_finish's ready().
TEST_CALLBACKS = 'extern "Python" void tgtest_ready(void *ctx, tg_task *t);\n'


def _strip(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def _top_level(text: str):
    """The top-level declarations of a stripped header, with static inline bodies removed."""
    out, cur, depth, i = [], [], 0, 0
    while i < len(text):
        c = text[i]
        cur.append(c)
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and "".join(cur).lstrip().startswith("static"):
                cur = []  # a static inline function: not part of the binding
        elif c == ";" and depth == 0:
            decl = " ".join("".join(cur).split())
            if decl != ";":
                out.append(decl)
            cur = []
        i += 1
    return out


def _struct_without_atomics(decl: str) -> str:
    """A struct typedef with members cffi cannot declare (_Atomic, pthread types) becomes its
    other members plus `...;`."""
    head, body, tail = decl[:decl.index("{")], decl[decl.index("{") + 1:decl.rindex("}")], decl[decl.rindex("}") + 1:]
    members = [m.strip() for m in body.split(";") if m.strip()]
    kept = [m + ";" for m in members if "_Atomic" not in m and "pthread_" not in m]
    if len(kept) == len(members):
        return decl
    return f"{head}{{ {' '.join(kept)} ...; }}{tail}"


def cdef_from_headers(headers=HEADERS) -> str:
    """cffi declarations for the core, read from its headers."""
    decls = []
    for h in headers:
        with open(os.path.join(CSRC, h)) as f:
            text = _strip(f.read())
        for d in _top_level(text):
            if d.startswith(("extern ", "static ")):
                continue
            if re.fullmatch(r"struct \w+ ?;", d):  # a bare forward declaration
                continue
            if d.startswith("typedef struct") and "{" in d:
                d = _struct_without_atomics(d)
            decls.append(d)
    return "\n".join(decls) + "\n"


def _free_threaded() -> bool:
    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def build(build_dir: str):
    """Builds (or reuses) the binding in build_dir and returns its module (``.ffi``, ``.lib``).
    The module's name carries a hash of the sources, headers and declarations, so a change to
    any of them builds a new one."""
    import cffi  # only here: the runtime and the main test session never import it

    cdef = cdef_from_headers() + TEST_CALLBACKS
    h = hashlib.sha1(cdef.encode())
    for name in HEADERS + SOURCES:
        with open(os.path.join(CSRC, name), "rb") as f:
            h.update(f.read())
    h.update(sys.version.encode())
    modname = f"_tgcore_test_{h.hexdigest()[:12]}"
    os.makedirs(build_dir, exist_ok=True)
    path = next((os.path.join(build_dir, f) for f in os.listdir(build_dir)
                 if f.startswith(modname + ".") and f.endswith((".so", ".pyd"))), None)
    if path is None:
        ffi = cffi.FFI()
        ffi.cdef(cdef)
        ffi.set_source(
            modname,
            "".join(f'#include "{h}"\n' for h in HEADERS),
            sources=[os.path.join(CSRC, s) for s in SOURCES],
            include_dirs=[CSRC],
            extra_compile_args=["-std=gnu11", "-O1", "-pthread"],
            extra_link_args=["-pthread"],
            # the limited API does not exist on free-threaded builds before 3.15
            define_macros=[("_CFFI_NO_LIMITED_API", None)] if _free_threaded() else [],
        )
        path = ffi.compile(tmpdir=build_dir, verbose=False)
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def default_build_dir() -> str:
    tag = sys.implementation.cache_tag + ("t" if _free_threaded() else "")
    return os.path.join(ROOT, "build", f"cffi-core-{tag}")

"""The bare floor of the fork-join path (benchmarks/floor.c), built for the running interpreter.

    from _floor import load_floor
    floor = load_floor()        # the module, or None (the reason is printed)
    node = floor.spawn(fn, *args); node.result()

Compiled once per interpreter and source text into build/floor-<key>/ with the compiler and
flags the interpreter was built with (sysconfig), as setuptools would; nothing is installed.
Benchmark-only: taskgraph never loads it."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "floor.c")


def load_floor():
    """Builds (if needed) and imports benchmarks/floor.c; None, with the reason printed, when
    there is no compiler or the build fails."""
    with open(SOURCE, "rb") as fh:
        src = fh.read()
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    key = hashlib.sha256(src + sys.version.encode() + suffix.encode()).hexdigest()[:12]
    out_dir = os.path.join(os.path.dirname(HERE), "build", f"floor-{key}")
    target = os.path.join(out_dir, "floor" + suffix)
    if not os.path.exists(target):
        os.makedirs(out_dir, exist_ok=True)
        ldshared = shlex.split(sysconfig.get_config_var("LDSHARED") or "cc -shared")
        ccshared = shlex.split(sysconfig.get_config_var("CCSHARED") or "-fPIC")
        tmp = f"{target}.{os.getpid()}.tmp"  # a build running beside us writes its own file
        cmd = ldshared + ccshared + ["-O2", "-std=gnu11", "-I", sysconfig.get_paths()["include"],
                                     SOURCE, "-o", tmp]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except OSError as e:
            print(f"  (the floor extension was not built: {e})")
            return None
        if r.returncode != 0:
            print(f"  (the floor extension was not built: {' '.join(cmd)}: {r.stderr.strip()[:500]})")
            return None
        os.replace(tmp, target)
    spec = importlib.util.spec_from_file_location("floor", target)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

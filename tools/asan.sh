#!/usr/bin/env bash
# make test-asan: the Python tests against an AddressSanitizer + UBSan build of the extension
# (taskgraph._core), on both project interpreters:
#
#   tools/asan.sh VENV [pytest args...]
#
# The interpreter is not instrumented, so libasan is preloaded. On a GIL build
# PYTHONMALLOC=malloc sends every Python object through malloc, so a use-after-free of a
# Node, an argument or a result (a reference-counting bug in csrc/py) is caught by ASan.
# Free-threaded 3.13 must allocate objects with mimalloc (its collector walks mimalloc's
# heaps): there PYTHONMALLOC=debug adds CPython's debug hooks (freed memory is poisoned,
# API misuse is fatal) while ASan checks every allocation of our own C code. Leak detection
# is off: the interpreter keeps memory until exit by design; tests/test_leaks.py checks ours.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=$ROOT/${1:?usage: tools/asan.sh VENV [pytest args]}
shift
PY=$VENV/bin/python
[ -x "$PY" ] || { echo "no interpreter at $PY"; exit 1; }
TAG=$("$PY" -c 'import sys, sysconfig; print(sys.implementation.cache_tag + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))')
OUT=$ROOT/build/asan-$TAG
cd "$ROOT"
mkdir -p "$OUT/taskgraph"
# The package: the sources of it and of its sub-packages and their data files (the
# dashboard's page), linked, next to the instrumented extension (the links of an earlier
# layout removed first: a stale module must not import).
find "$OUT/taskgraph" -type l -delete
while IFS= read -r f; do
  mkdir -p "$OUT/$(dirname "$f")"
  ln -sf "$ROOT/$f" "$OUT/$f"
done < <(find taskgraph -type f -not -path '*/__pycache__/*' -not -name '*.so' -not -name '*.o')
TASKGRAPH_TEST_BUILD=1 TASKGRAPH_CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
  "$PY" setup.py -q build_ext --build-lib "$OUT" --build-temp "$OUT/tmp" >"$OUT/build.log" 2>&1 \
  || { cat "$OUT/build.log"; exit 1; }
if "$PY" -c 'import sysconfig, sys; sys.exit(0 if sysconfig.get_config_var("Py_GIL_DISABLED") else 1)'; then
  MALLOC=debug
else
  MALLOC=malloc
fi
export PYTHONPATH="$OUT" PYTHONMALLOC=$MALLOC LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
export ASAN_OPTIONS="detect_leaks=0 halt_on_error=1 abort_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1"
export TASKGRAPH_SANITIZED=1  # tests scale their sizes down (as the C tests do under make sanitize)
cd "$OUT"  # not the source tree: its taskgraph/ would come first on sys.path
"$PY" -W ignore -c "import taskgraph, sys; assert '$OUT' in taskgraph._core.__file__, taskgraph._core.__file__"
echo "== Python tests against the AddressSanitizer build of taskgraph._core ($("$PY" -V), PYTHONMALLOC=$MALLOC)"
export TASKGRAPH_REQUIRE_DASK=1  # make setup installs the dask extra: its tests must run
exec "$PY" -m pytest -q -rs -p no:cacheprovider --rootdir "$ROOT" -c "$ROOT/pyproject.toml" "$ROOT/tests" "$@"

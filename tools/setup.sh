#!/usr/bin/env bash
# make setup: provide a free-threaded CPython, the project venvs and Graphviz. Idempotent:
# a second run with nothing to do prints one line. See README.md "Work on taskgraph itself".
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TASKGRAPH_CACHE:-$HOME/.cache/taskgraph}
PREFIX=$CACHE/cpython-3.13t
VENV=$ROOT/.venv
GILVENV=$ROOT/.venv-gil
QUIET_DONE=1
mkdir -p "$CACHE"

say() { printf 'setup: %s\n' "$*"; QUIET_DONE=0; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

is_free_threaded() {  # $1 = interpreter; true if it is a free-threaded build
  "$1" -X gil=0 -c 'import sys, sysconfig; sys.exit(0 if sysconfig.get_config_var("Py_GIL_DISABLED") else 1)' 2>/dev/null
}

# ---------------------------------------------------------------- 1. the interpreter
build_cpython_313t() {
  exec 9>"$CACHE/build.lock"; flock 9            # two setups at once build only once
  [ -x "$PREFIX/bin/python3.13t" ] && [ -f "$PREFIX/.complete" ] && return 0
  command -v apt-get >/dev/null || die "no free-threaded Python found and no apt-get to fetch CPython's source; install python3.13t or python3.14t, or set TASKGRAPH_PYTHON"
  say "no free-threaded CPython found: building CPython 3.13 (--disable-gil) into $PREFIX (about 4 minutes on 2 cores)"
  local src=$CACHE/src d uri o
  mkdir -p "$src"
  if ! ls "$src"/python3.13_*.orig.tar.xz >/dev/null 2>&1; then
    say "fetching Debian's python3.13 source package"
    d=$(mktemp -d); mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
    uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [ -n "$uri" ] || uri=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
    [ -n "$uri" ] || die "cannot find an apt mirror in this machine's apt sources"
    # The suite that has python3.13's source: this machine's own release (VERSION_CODENAME in
    # /etc/os-release) if it has it, else the current stable or testing release (by their
    # aliases, so no release name is written here).
    local suite codename got=""
    codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
    o="-o Dir::Etc::sourcelist=$d/sources.list -o Dir::Etc::sourceparts=- -o Dir::State::Lists=$d/lists -o Dir::Cache=$d/cache"
    : >"$CACHE/apt.log"
    for suite in $codename stable testing; do
      echo "deb-src $uri $suite main" > "$d/sources.list"
      apt-get $o update >>"$CACHE/apt.log" 2>&1 || continue
      apt-cache $o showsrc python3.13 2>/dev/null | grep -q '^Package: python3.13$' || continue
      (cd "$src" && apt-get $o source --download-only --tar-only python3.13 >>"$CACHE/apt.log" 2>&1) \
        && { got=$suite; break; }
    done
    [ -n "$got" ] || die "could not download python3.13's source from suites '$codename stable testing' (see $CACHE/apt.log)"
    say "fetched python3.13's source from suite $got"
    rm -rf "$d"
  fi
  local tarball; tarball=$(ls "$src"/python3.13_*.orig.tar.xz | head -1)
  rm -rf "$src/build"; mkdir -p "$src/build"
  tar -xJf "$tarball" -C "$src/build" --strip-components=1
  local log=$CACHE/build.log
  say "configuring (log: $log)"
  (cd "$src/build" && ./configure --disable-gil --prefix="$PREFIX" --with-ensurepip=install >"$log" 2>&1) \
    || die "configure failed, see $log"
  say "compiling with make -j$(nproc)"
  (cd "$src/build" && make -j"$(nproc)" >>"$log" 2>&1) & local pid=$!
  while kill -0 $pid 2>/dev/null; do
    sleep 20; kill -0 $pid 2>/dev/null && say "  ... still compiling: $(find "$src/build" -name '*.o' | wc -l) object files so far"
  done
  wait $pid || die "make failed, see $log"
  say "installing into $PREFIX"
  (cd "$src/build" && make install >>"$log" 2>&1) || die "make install failed, see $log"
  is_free_threaded "$PREFIX/bin/python3.13t" || die "the built interpreter is not free-threaded"
  touch "$PREFIX/.complete"
  rm -rf "$src/build"
  say "built $("$PREFIX/bin/python3.13t" -VV | head -1)"
}

find_python() {
  if [ -n "${TASKGRAPH_PYTHON:-}" ]; then
    is_free_threaded "$TASKGRAPH_PYTHON" || die "TASKGRAPH_PYTHON=$TASKGRAPH_PYTHON is not a free-threaded CPython"
    echo "$TASKGRAPH_PYTHON"; return
  fi
  local c p
  for c in python3.15t python3.14t python3.13t; do
    p=$(command -v $c 2>/dev/null) || continue
    is_free_threaded "$p" && { echo "$p"; return; }
  done
  if [ -x "$PREFIX/bin/python3.13t" ] && [ -f "$PREFIX/.complete" ]; then echo "$PREFIX/bin/python3.13t"; return; fi
  if command -v uv >/dev/null 2>&1 && uv python install 3.14t >/dev/null 2>&1; then
    p=$(uv python find 3.14t 2>/dev/null) && is_free_threaded "$p" && { echo "$p"; return; }
  fi
  build_cpython_313t >&2
  echo "$PREFIX/bin/python3.13t"
}

# ---------------------------------------------------------------- 2. the venvs
# A venv made by an older setup had a bash launcher as bin/python (it added -X gil=0 because
# cffi, then a run-time dependency, turned the GIL on in 3.13t). The runtime no longer imports
# cffi: bin/python is the plain venv interpreter again; this removes the launcher in place.
drop_old_launcher() {  # $1 = venv, $2 = real interpreter
  grep -qs "taskgraph venv launcher" "$1/bin/python" || return 0
  say "replacing the old GIL launcher in $(basename "$1") by the plain interpreter"
  local f
  for f in "$1"/bin/python "$1"/bin/python3 "$1"/bin/python3.*; do
    grep -qs "taskgraph venv launcher" "$f" && rm -f "$f"
  done
  "$2" -m venv --upgrade "$1" || die "could not repair $1"
}

stamp_of() { cat "$ROOT/pyproject.toml" "$ROOT/setup.py" "$ROOT"/csrc/*.[ch] "$ROOT"/csrc/py/*.[ch] 2>/dev/null | sha1sum | cut -c1-16; }

install_into() {  # $1 = venv, $2 = cffi requirement, $3 = extras
  local v=$1 pip="$1/bin/python -m pip --disable-pip-version-check -q"
  $pip install --upgrade pip >"$v/install.log" 2>&1 || true
  # cffi is for the tests only (tests/core: the test binding of the C core); the version the
  # test extra asks for is installed first, because on 3.13t cffi 1.17.1 must be built from
  # source and cffi 2 refuses that interpreter.
  $pip install "$2" "setuptools>=77" wheel >"$v/install.log" 2>&1 || die "pip could not install $2 into $v"
  # --no-build-isolation: no download of build tools. TASKGRAPH_TEST_BUILD=1: the in-place
  # extension the tests use has the fault sites they arm (setup.py; wheels never have them).
  TASKGRAPH_TEST_BUILD=1 $pip install --no-build-isolation -e "$ROOT[$3]" >"$v/install.log" 2>&1 || { cat "$v/install.log" >&2; die "installing taskgraph into $v failed"; }
}

make_venv() {  # $1 = venv, $2 = interpreter, $3 = free-threaded? (1/0), $4 = extras
  local v=$1 py=$2 ft=$3 real want stamp
  real=$("$py" -X gil=0 -c 'import sys, os; print(os.path.realpath(sys.executable))' 2>/dev/null || "$py" -c 'import sys, os; print(os.path.realpath(sys.executable))')
  want="$real $(stamp_of) $4 plain-interpreter test-build"
  if [ -f "$v/.taskgraph-stamp" ] && [ "$(cat "$v/.taskgraph-stamp")" = "$want" ]; then return 0; fi
  say "preparing $(basename "$v") from $real"
  [ -f "$v/.taskgraph-interp" ] && [ "$(cat "$v/.taskgraph-interp")" != "$real" ] && rm -rf "$v"
  drop_old_launcher "$v" "$real"
  [ -x "$v/bin/python" ] || { "$real" -m venv "$v" || die "could not create $v"; }
  echo "$real" > "$v/.taskgraph-interp"
  # The test extra's cffi: cffi 1.17.1 (< 2) before 3.14, cffi 2 from 3.14 on.
  local cffi="cffi>=2"
  "$v/bin/python" -c 'import sys; sys.exit(0 if sys.version_info < (3, 14) else 1)' && cffi="cffi>=1.17.1,<2"
  install_into "$v" "$cffi" "$4"
  echo "$want" > "$v/.taskgraph-stamp"
}

PY=$(find_python)
make_venv "$VENV" "$PY" 1 "test,progress,dask"
GILPY=$(command -v python3.11 || command -v python3 || true)
if [ -n "$GILPY" ] && ! is_free_threaded "$GILPY"; then
  make_venv "$GILVENV" "$GILPY" 0 "test,dask"
fi

# ---------------------------------------------------------------- 3. Graphviz and Chromium
# Graphviz's dot draws the pictures; headless Chromium renders the HTML report and a notebook
# page in the tests (tests/helpers.py; they are skipped without it, so CI installs it here:
# about 110 MB to download, 410 MB on disk, without the recommended packages).
want=()
command -v dot >/dev/null 2>&1 || want+=(graphviz)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || want+=(chromium)
if [ ${#want[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing ${want[*]} with apt-get (log: $CACHE/apt-tools.log)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}") >"$CACHE/apt-tools.log" 2>&1 \
      || say "warning: apt-get could not install ${want[*]} (see $CACHE/apt-tools.log): without dot pictures are written as .dot only; without chromium the rendering tests are skipped"
  else
    say "warning: missing ${want[*]}: install them (Debian/Ubuntu: sudo apt-get install ${want[*]}); without dot pictures are written as .dot only, without chromium the rendering tests are skipped"
  fi
fi

# The plain venv interpreter, with no -X flag and no PYTHON_GIL: importing taskgraph must
# leave the GIL off.
gil=$(env -u PYTHON_GIL "$VENV/bin/python" -c 'import taskgraph, sys; print(sys._is_gil_enabled())')
[ "$gil" = False ] || die "import taskgraph left the GIL on in $VENV ($gil)"
[ $QUIET_DONE = 1 ] && echo "setup: up to date ($("$VENV/bin/python" -V), GIL off)" || say "done: $VENV ($("$VENV/bin/python" -V), GIL off)"

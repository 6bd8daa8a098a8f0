#!/usr/bin/env bash
# make setup: provide a free-threaded CPython, the project venvs and Graphviz. Idempotent:
# a second run with nothing to do prints one line. See README.md "Work on taskgraph itself".
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TASKGRAPH_CACHE:-$HOME/.cache/taskgraph}
VENV=$ROOT/.venv
VENV313=$ROOT/.venv-313t
GILVENV=$ROOT/.venv-gil
mkdir -p "$CACHE"
SAID=$(mktemp); trap 'rm -f "$SAID"' EXIT   # non-empty once anything was said (subshells too)

say() { printf 'setup: %s\n' "$*" >&2; echo x >>"$SAID"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

is_free_threaded() {  # $1 = interpreter; true if it is a free-threaded build
  "$1" -X gil=0 -c 'import sys, sysconfig; sys.exit(0 if sysconfig.get_config_var("Py_GIL_DISABLED") else 1)' 2>/dev/null
}

# ---------------------------------------------------------------- 1. the interpreters
# Three interpreters: 3.14t (free-threaded, the primary: .venv), 3.13t (free-threaded, still
# supported: .venv-313t) and the machine's GIL build (3.11: .venv-gil). Each free-threaded one
# is looked for, in order: an explicit path (TASKGRAPH_PYTHON for 3.14t, TASKGRAPH_PYTHON_313T
# for 3.13t), the interpreter on PATH (python3.14t, python3.13t: uv, pyenv or a distribution's),
# this cache, uv; else it is built from source into the cache (about 4-6 minutes on 2 cores):
# 3.14t from the CPython source tarball TASKGRAPH_CPYTHON_TARBALL names (Python-3.14.*.tar.xz),
# else from Debian's python3.14 source package where the machine's apt mirror serves it;
# 3.13t from Debian's python3.13 source package.

# Debian's source package of python3.<minor> into $CACHE/src; prints the .orig tarball's path.
fetch_debian_source() {  # $1 = minor version (13, 14)
  local pkg=python3.$1 src=$CACHE/src d uri o suite codename got=""
  mkdir -p "$src"
  if ! ls "$src"/${pkg}_*.orig.tar.xz >/dev/null 2>&1; then
    command -v apt-get >/dev/null || return 1
    say "fetching Debian's $pkg source package"
    d=$(mktemp -d); mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
    uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [ -n "$uri" ] || uri=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
    [ -n "$uri" ] || { rm -rf "$d"; return 1; }
    # The suite that has the source: this machine's own release (VERSION_CODENAME in
    # /etc/os-release) if it has it, else the current stable, testing or unstable release (by
    # their aliases, so no release name is written here).
    codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
    o="-o Dir::Etc::sourcelist=$d/sources.list -o Dir::Etc::sourceparts=- -o Dir::State::Lists=$d/lists -o Dir::Cache=$d/cache"
    : >"$CACHE/apt-$pkg.log"
    for suite in $codename stable testing unstable; do
      echo "deb-src $uri $suite main" > "$d/sources.list"
      apt-get $o update >>"$CACHE/apt-$pkg.log" 2>&1 || continue
      apt-cache $o showsrc "$pkg" 2>/dev/null | grep -q "^Package: $pkg\$" || continue
      (cd "$src" && apt-get $o source --download-only --tar-only "$pkg" >>"$CACHE/apt-$pkg.log" 2>&1) \
        && { got=$suite; break; }
    done
    rm -rf "$d"
    [ -n "$got" ] || return 1
    say "fetched $pkg's source from suite $got"
  fi
  ls "$src"/${pkg}_*.orig.tar.xz | head -1
}

# Builds CPython from a source tarball into $CACHE/cpython-3.<minor>t (--disable-gil).
build_cpython() {  # $1 = minor version, $2 = source tarball
  local minor=$1 tarball=$2 prefix=$CACHE/cpython-3.$1t
  local work=$CACHE/src/build-3.$minor log=$CACHE/build-3.$minor.log
  say "building CPython 3.$minor (--disable-gil) from $(basename "$tarball") into $prefix (about 4-6 minutes on 2 cores; log: $log)"
  rm -rf "$work"; mkdir -p "$work"
  tar -xJf "$tarball" -C "$work" --strip-components=1 || die "could not unpack $tarball"
  (cd "$work" && ./configure --disable-gil --prefix="$prefix" --with-ensurepip=install >"$log" 2>&1) \
    || die "configure failed, see $log"
  (cd "$work" && make -j"$(nproc)" >>"$log" 2>&1) & local pid=$!
  while kill -0 $pid 2>/dev/null; do
    sleep 30; kill -0 $pid 2>/dev/null && say "  ... 3.$minor still compiling: $(find "$work" -name '*.o' | wc -l) object files so far"
  done
  wait $pid || die "make failed, see $log"
  (cd "$work" && make install >>"$log" 2>&1) || die "make install failed, see $log"
  is_free_threaded "$prefix/bin/python3.${minor}t" || die "the built interpreter is not free-threaded"
  touch "$prefix/.complete"
  rm -rf "$work"
  say "built $("$prefix/bin/python3.${minor}t" -VV | head -1)"
}

# The source of CPython 3.<minor> to build, or nothing.
source_for() {  # $1 = minor version
  if [ "$1" = 14 ] && [ -n "${TASKGRAPH_CPYTHON_TARBALL:-}" ]; then
    [ -f "$TASKGRAPH_CPYTHON_TARBALL" ] || die "TASKGRAPH_CPYTHON_TARBALL=$TASKGRAPH_CPYTHON_TARBALL: no such file"
    case $(basename "$TASKGRAPH_CPYTHON_TARBALL") in
      Python-3.14.*.tar.xz|Python-3.14.*.tgz|Python-3.14.*.tar.gz) ;;
      *) die "TASKGRAPH_CPYTHON_TARBALL must name a CPython 3.14 source release (Python-3.14.N.tar.xz), got $TASKGRAPH_CPYTHON_TARBALL" ;;
    esac
    echo "$TASKGRAPH_CPYTHON_TARBALL"; return 0
  fi
  fetch_debian_source "$1"
}

# A free-threaded CPython 3.<minor>: prints its path, or nothing if none can be had here.
find_ft_python() {  # $1 = minor version, $2 = the variable that may name it
  local minor=$1 var=$2 p prefix=$CACHE/cpython-3.$1t tarball
  if [ -n "${!var:-}" ]; then
    is_free_threaded "${!var}" || die "$var=${!var} is not a free-threaded CPython"
    echo "${!var}"; return
  fi
  p=$(command -v python3.${minor}t 2>/dev/null) && is_free_threaded "$p" && { echo "$p"; return; }
  exec 9>"$CACHE/build-3.$minor.lock"; flock 9     # two setups at once build only once
  [ -x "$prefix/bin/python3.${minor}t" ] && [ -f "$prefix/.complete" ] && { echo "$prefix/bin/python3.${minor}t"; return; }
  if command -v uv >/dev/null 2>&1 && uv python install 3.${minor}t >/dev/null 2>&1; then
    p=$(uv python find 3.${minor}t 2>/dev/null) && is_free_threaded "$p" && { echo "$p"; return; }
  fi
  tarball=$(source_for "$minor") || return 0
  build_cpython "$minor" "$tarball" >&2
  echo "$prefix/bin/python3.${minor}t"
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

# The project's dependencies come as wheels only (--only-binary): no C compiler runs for the
# test dependencies on any interpreter (the extras pin what has free-threaded wheels:
# pyproject.toml); taskgraph's own extension is compiled. On 3.13t three dependencies of the
# runtime and of the dask extra have no free-threaded wheels at all (msgpack, PyYAML,
# tornado): they build from their sources in seconds (plain C, no libraries needed).
NO_WHEELS_313T=msgpack,pyyaml,tornado
install_into() {  # $1 = venv, $2 = extras
  local v=$1 pip="$1/bin/python -m pip --disable-pip-version-check -q" nobin=""
  "$v/bin/python" -c 'import sys, sysconfig; sys.exit(0 if sys.version_info[:2] == (3, 13) and sysconfig.get_config_var("Py_GIL_DISABLED") else 1)' \
    && nobin="--no-binary $NO_WHEELS_313T"
  $pip install --upgrade pip >"$v/install.log" 2>&1 || true
  $pip install --only-binary :all: "setuptools>=77" wheel >>"$v/install.log" 2>&1 || { cat "$v/install.log" >&2; die "pip could not install setuptools into $v"; }
  # --no-build-isolation: no download of build tools. TASKGRAPH_TEST_BUILD=1: the in-place
  # extension the tests use has the fault sites they arm (setup.py; wheels never have them).
  TASKGRAPH_TEST_BUILD=1 $pip install --only-binary :all: $nobin --no-build-isolation -e "$ROOT[$2]" >>"$v/install.log" 2>&1 || { cat "$v/install.log" >&2; die "installing taskgraph into $v failed"; }
}

make_venv() {  # $1 = venv, $2 = interpreter, $3 = extras
  local v=$1 py=$2 real want
  real=$("$py" -X gil=0 -c 'import sys, os; print(os.path.realpath(sys.executable))' 2>/dev/null || "$py" -c 'import sys, os; print(os.path.realpath(sys.executable))')
  want="$real $(stamp_of) $3 plain-interpreter test-build wheels-only"
  if [ -f "$v/.taskgraph-stamp" ] && [ "$(cat "$v/.taskgraph-stamp")" = "$want" ]; then return 0; fi
  say "preparing $(basename "$v") from $real"
  [ -f "$v/.taskgraph-interp" ] && [ "$(cat "$v/.taskgraph-interp")" != "$real" ] && rm -rf "$v"
  drop_old_launcher "$v" "$real"
  [ -x "$v/bin/python" ] || { "$real" -m venv "$v" || die "could not create $v"; }
  echo "$real" > "$v/.taskgraph-interp"
  install_into "$v" "$3"
  echo "$want" > "$v/.taskgraph-stamp"
}

PY=$(find_ft_python 14 TASKGRAPH_PYTHON)
PY313=$(find_ft_python 13 TASKGRAPH_PYTHON_313T)
if [ -z "$PY" ]; then
  [ -n "$PY313" ] || die "no free-threaded CPython 3.14 or 3.13 found, and none could be built: install python3.14t (uv, pyenv or your distribution), or set TASKGRAPH_PYTHON to one, or TASKGRAPH_CPYTHON_TARBALL to a CPython 3.14 source tarball to build"
  say "warning: no free-threaded CPython 3.14 here (set TASKGRAPH_PYTHON, or TASKGRAPH_CPYTHON_TARBALL to a Python-3.14.N.tar.xz to build one): .venv uses 3.13t"
  PY=$PY313; PY313=""
fi
make_venv "$VENV" "$PY" "test,progress,dask"
if [ -n "$PY313" ]; then
  make_venv "$VENV313" "$PY313" "test,progress,dask"
else
  say "warning: no free-threaded CPython 3.13 here: the 3.13t runs of make test are skipped"
fi
GILPY=$(command -v python3.11 || command -v python3 || true)
if [ -n "$GILPY" ] && ! is_free_threaded "$GILPY"; then
  make_venv "$GILVENV" "$GILPY" "test,dask"
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
if [ -s "$SAID" ]; then say "done: $VENV ($("$VENV/bin/python" -V), GIL off)"
else echo "setup: up to date ($("$VENV/bin/python" -V), GIL off)"; fi

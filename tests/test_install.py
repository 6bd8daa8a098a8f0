"""Installing taskgraph as a user does: the sdist and the wheel built the way `make dist`
builds them, installed with plain `pip install FILE` into fresh venvs of the free-threaded
CPython and of the GIL build (3.11 here), then a smoke program run there from outside the
source tree:

* on the free-threaded interpreter the GIL stays off after `import taskgraph` and a compute
  (no -X gil=0 and no PYTHON_GIL: both are kept out of the environment), and no GILWarning;
  on the GIL build, one GILWarning and the same results;
* a fork-join (fib spawning children) and a lazy graph give the right answers;
* cffi is not loaded (`_cffi_backend` not in sys.modules) and not a run-time requirement;
* the `taskgraph` console script runs.

Building and installing takes a few minutes: the builds are made once per session (module
fixtures) and `make test` runs this module once, in its free-threaded run (make test-py),
which covers both interpreters. It needs the package index for the dependencies and the
isolated builds' setuptools.
"""
import email.parser
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DIST = PYPROJECT["project"]["name"]
VERSION = PYPROJECT["project"]["version"]
STEM = re.sub(r"[-_.]+", "_", DIST).lower()  # file names of the sdist and the wheels
CACHE = pathlib.Path(os.environ.get("TASKGRAPH_CACHE", pathlib.Path.home() / ".cache" / "taskgraph"))
FIB = {24: 46368}

pytestmark = [
    pytest.mark.thread_unsafe(reason="builds and installs the package: once is enough"),
    pytest.mark.timeout(1800),
]


def user_env():
    """The environment of a user's shell: none of the project's or the test runs' settings
    (no PYTHON_GIL, no sanitizer preloads, no venv of ours)."""
    drop = {"PYTHON_GIL", "PYTHONPATH", "PYTHONHOME", "PYTHONMALLOC", "PYTHONSTARTUP", "VIRTUAL_ENV",
            "LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "__PYVENV_LAUNCHER__", "PYTHONSAFEPATH"}
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith(("TASKGRAPH_", "PYTEST_", "DASK_"))}
    path = env.get("PATH", "").split(os.pathsep)
    env["PATH"] = os.pathsep.join(p for p in path if not p.startswith(str(ROOT)))
    return env


# ------------------------------------------------------------------ the interpreters
def _probe(py):
    """(real path, (major, minor), free-threaded?) of an interpreter, or None if it does not run."""
    try:
        p = subprocess.run([py, "-c", "import os, sys, sysconfig; print(os.path.realpath(sys.executable)); "
                            "print(*sys.version_info[:2]); "
                            "print(int(bool(sysconfig.get_config_var('Py_GIL_DISABLED'))))"],
                           capture_output=True, text=True, timeout=60, env=user_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    real, major, minor, ft = p.stdout.split()
    return real, (int(major), int(minor)), ft == "1"


def find_interpreter(kind):
    """Found as tools/setup.sh finds them: 3.14t from TASKGRAPH_PYTHON, python3.14t on PATH or
    the cached build; 3.13t from TASKGRAPH_PYTHON_313T, python3.13t or the cached build; the
    GIL build python3.11 or python3. The running interpreter first, where it is the kind."""
    if kind == "gil":
        cands, want = [shutil.which("python3.11"), shutil.which("python3")], None
    else:
        minor = 14 if kind == "3.14t" else 13
        var = "TASKGRAPH_PYTHON" if minor == 14 else "TASKGRAPH_PYTHON_313T"
        cands = [os.environ.get(var), shutil.which(f"python3.{minor}t"),
                 str(CACHE / f"cpython-3.{minor}t" / "bin" / f"python3.{minor}t")]
        want = (3, minor)
    cands.insert(0, getattr(sys, "_base_executable", sys.executable))
    for c in cands:
        if c and os.path.exists(c):
            found = _probe(c)
            if found and found[2] == (kind != "gil") and (want is None or found[1] == want):
                return found[0]
    return None


#: The interpreters the package is built and installed for: free-threaded 3.14 and 3.13, and
#: the GIL build. The wheels of the free-threaded ones are cp314t and cp313t.
PYTHONS = {kind: find_interpreter(kind) for kind in ("3.14t", "3.13t", "gil")}
RUNNING_FT = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
RUNNING = ("3.14t" if sys.version_info[:2] == (3, 14) else "3.13t") if RUNNING_FT else "gil"


def run(cmd, timeout=900, **kw):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                       env=user_env(), **kw)
    assert p.returncode == 0, (f"{' '.join(map(str, cmd))}: exit status {p.returncode}\n"
                               f"{p.stdout[-4000:]}\n{p.stderr[-6000:]}")
    return p


@pytest.fixture(scope="module", autouse=True)
def once_per_make_test(request):
    """make test runs the Python tests several times (make test-py on each interpreter,
    test-parallel, test-gil, test-asan); this module needs to run once, and covers every
    interpreter from the primary one (3.14t; else whichever free-threaded one there is)."""
    if os.environ.get("TASKGRAPH_SANITIZED"):
        pytest.skip("not against the AddressSanitizer build (make test-asan): make test-py "
                    "runs the install test")
    threads = str(request.config.getoption("parallel_threads", default=1))
    if threads not in ("1", "None"):
        pytest.skip("not in the 4-threads-per-test run (make test-parallel): make test-py "
                    "runs the install test")
    primary = "3.14t" if PYTHONS["3.14t"] else "3.13t" if PYTHONS["3.13t"] else "gil"
    if RUNNING != primary:
        pytest.skip(f"run from the {primary} interpreter (make test-py), which installs into "
                    f"every one: {PYTHONS}")


# ------------------------------------------------------------------ the builds
@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """{"sdist": path, "3.14t": wheel, "3.13t": wheel, "gil": wheel} as `make dist` makes
    them: `python -m build` (sdist, then a wheel from the sdist, isolated) from the interpreter
    running the tests, the other interpreters' wheels by pip from the same sdist."""
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", out, ROOT], timeout=1200)
    sdists = list(out.glob(f"{STEM}-{VERSION}.tar.gz"))
    wheels = list(out.glob(f"{STEM}-{VERSION}-*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in out.iterdir())
    got = {"sdist": sdists[0], RUNNING: wheels[0]}
    for other, py in PYTHONS.items():
        if other == RUNNING or not py:
            continue
        venv = fresh_venv(py, tmp_path_factory.mktemp(f"wheel-{other}"))
        wdir = tmp_path_factory.mktemp(f"dist-{other}")
        run([venv / "bin" / "python", "-m", "pip", "wheel", "--no-deps", "--wheel-dir", wdir,
             sdists[0]], timeout=1200)
        (got[other],) = wdir.glob(f"{STEM}-{VERSION}-*.whl")
    return got


def fresh_venv(py, where):
    venv = pathlib.Path(where) / "venv"
    run([py, "-m", "venv", venv])
    return venv


SMOKE = r'''
import importlib.metadata, json, sys, sysconfig, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import taskgraph as tg

def fib_serial(n):
    return n if n < 2 else fib_serial(n - 1) + fib_serial(n - 2)

@tg.task(name="fib")
def fib(n, cutoff=0):
    if n <= max(cutoff, 1):
        return fib_serial(n)
    a = fib(n - 1, cutoff)        # spawned children
    b = fib(n - 2, cutoff)
    return a.result() + b.result()

@tg.task
def add(a, b):
    return a + b

with tg.Scheduler(workers=2) as s:
    with tg.trace() as tr:                 # a traced compute, then stats(): GIL still off
        forkjoin = s.compute(fib(24, cutoff=12))
    assert len(tr.records) > 1 and s.stats()
    x = add(1, 2)
    lazy = tg.compute(x, add(x, 10), scheduler=s)
with tg.Executor(2) as ex:                 # the concurrent.futures front door: GIL still off
    executor = [ex.submit(fib_serial, 10).result(), list(ex.map(fib_serial, range(6)))]
print(json.dumps({
    "free_threaded_build": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    "gil_enabled": sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True,
    "fib": forkjoin,
    "lazy": list(lazy),
    "executor": executor,
    "cffi_loaded": "_cffi_backend" in sys.modules,
    "faults": importlib.import_module("taskgraph._native").core.FAULTS,
    "gil_warnings": [str(w.message) for w in caught if issubclass(w.category, tg.GILWarning)],
    "file": tg.__file__,
    "prefix": sys.prefix,
    "version": importlib.metadata.version("DIST"),
    "requires": importlib.metadata.requires("DIST") or [],
}))
'''.replace("DIST", DIST)


# ------------------------------------------------------------------ the installs
@pytest.mark.parametrize("kind", ["wheel", "sdist"])
@pytest.mark.parametrize("interp", ["3.14t", "3.13t", "gil"])
def test_pip_install_into_a_fresh_venv_and_run(interp, kind, dists, tmp_path):
    py = PYTHONS[interp]
    if py is None:
        pytest.skip(f"no CPython {interp} on this machine (looked as tools/setup.sh does)")
    venv = fresh_venv(py, tmp_path)
    vpy = venv / "bin" / "python"
    artefact = dists["sdist"] if kind == "sdist" else dists[interp]
    run([vpy, "-m", "pip", "install", artefact], timeout=1200)   # plain pip, as a user would
    work = tmp_path / "elsewhere"  # not the source tree: its taskgraph/ must not be imported
    work.mkdir()
    p = run([vpy, "-c", SMOKE], timeout=300, cwd=work)
    got = json.loads(p.stdout.strip().splitlines()[-1])
    problems = []
    if got["fib"] != FIB[24]:
        problems.append(f"fork-join fib(24) gave {got['fib']}, not {FIB[24]}")
    if got["lazy"] != [3, 13]:
        problems.append(f"the lazy graph gave {got['lazy']}, not [3, 13]")
    if got["executor"] != [55, [0, 1, 1, 2, 3, 5]]:
        problems.append(f"tg.Executor gave {got['executor']}, not [55, [0, 1, 1, 2, 3, 5]]")
    if not pathlib.Path(got["file"]).is_relative_to(venv.resolve()) and \
            not pathlib.Path(got["file"]).is_relative_to(venv):
        problems.append(f"taskgraph was imported from {got['file']}, not from the venv")
    if got["version"] != VERSION:
        problems.append(f"{DIST} {got['version']} installed, not {VERSION}")
    runtime_cffi = [r for r in got["requires"] if r.lower().startswith("cffi") and "extra" not in r]
    if runtime_cffi:
        problems.append(f"cffi is a run-time requirement: {runtime_cffi}")
    script = subprocess.run([venv / "bin" / "taskgraph", "--help"], capture_output=True, text=True,
                            timeout=120, env=user_env(), cwd=work)
    if script.returncode != 0 or "usage" not in script.stdout:
        problems.append(f"`taskgraph --help`: exit status {script.returncode}: {script.stderr[-2000:]}")
    if interp != "gil":
        if not got["free_threaded_build"]:
            problems.append("the free-threaded venv runs a GIL build")
        if got["gil_enabled"]:
            problems.append("the GIL is on after import taskgraph, a compute and an Executor, with no "
                            "-X gil=0 or PYTHON_GIL")
        if got["gil_warnings"]:
            problems.append(f"GILWarning on the free-threaded interpreter: {got['gil_warnings']}")
    else:
        if len(got["gil_warnings"]) != 1:
            problems.append(f"expected one GILWarning on the GIL build, got {got['gil_warnings']}")
    if got["faults"]:
        problems.append("the installed extension has the tests' fault sites (a TASKGRAPH_TEST_BUILD build)")
    if got["cffi_loaded"]:
        problems.append("'_cffi_backend' is in sys.modules: cffi is loaded at run time")
    assert not problems, f"{interp} venv, installed from the {kind}:\n- " + "\n- ".join(problems)


def test_importing_in_a_checkout_says_what_happened_and_the_command_that_works(dists, tmp_path):
    """The README's install (`pip install .` into a fresh venv), then `import taskgraph` run
    inside the checkout: the checkout's taskgraph/ folder, with no extension built, shadows the
    installed package. The error says so and gives a command; that command, run as given in
    the fresh venv, makes the import work there (it did not: it said `pip install
    --no-build-isolation -e .`, which fails in a venv without setuptools)."""
    py = PYTHONS[RUNNING]
    venv = fresh_venv(py, tmp_path)
    vpy = venv / "bin" / "python"
    run([vpy, "-m", "pip", "install", dists[RUNNING]], timeout=1200)
    with tarfile.open(dists["sdist"]) as t:
        t.extractall(tmp_path / "src", filter="data")
    checkout = tmp_path / "src" / f"{STEM}-{VERSION}"
    p = subprocess.run([vpy, "-c", "import taskgraph"], cwd=checkout, capture_output=True,
                       text=True, timeout=300, env=user_env())
    assert p.returncode != 0
    said = p.stderr.strip().splitlines()[-1]
    assert "found the source folder" in said and str(checkout) in said, said
    assert "site-packages" in said and "Run Python from another directory" in said, said
    command = re.search(r"`([^`]*pip install[^`]*)`", said).group(1)
    assert "--no-build-isolation" not in command, said
    run(command.split(), timeout=1200, cwd=checkout)  # as given: the venv's pip, the checkout
    run([vpy, "-c", "import taskgraph as tg; assert tg.compute(tg.task(abs)(-2)) == 2"],
        timeout=300, cwd=checkout)


# ------------------------------------------------------------------ what the files hold
def test_the_sdist_holds_what_its_tests_need(dists):
    with tarfile.open(dists["sdist"]) as t:
        top = f"{STEM}-{VERSION}/"
        names = {n[len(top):] for n in t.getnames() if n.startswith(top)}
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    need = {"LICENSE", "README.md", "pyproject.toml", "setup.py", "Makefile", "MANIFEST.in",
            "tests/conftest.py", "tests/helpers.py", "tests/dask_tasks.py", "tools/setup.sh"}
    need |= {str(p.relative_to(ROOT)) for pat in ("tests/*.py", "examples/*.py", "docs/**/*.md",
                                                   "docs/img/*", "csrc/*.[ch]", "csrc/py/*.[ch]",
                                                   "csrc/tests/*.c", "taskgraph/**/*.py",
                                                   "tests/data/*", "taskgraph/dashboard/static/*")
             for p in ROOT.glob(pat)
             if tracked.returncode != 0 or str(p.relative_to(ROOT)) in tracked.stdout.split("\n")}
    missing = sorted(need - names)
    assert not missing, f"the sdist lacks {missing}"
    junk = sorted(n for n in names if n.endswith((".so", ".o", ".pyc")) or "__pycache__" in n)
    assert not junk, f"the sdist holds build products: {junk}"


def test_the_wheels_and_their_metadata(dists):
    assert {k for k, py in PYTHONS.items() if py} <= set(dists), sorted(dists)
    for interp in ("3.14t", "3.13t", "gil"):
        if interp not in dists:
            continue
        with zipfile.ZipFile(dists[interp]) as z:
            names = z.namelist()
            meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
            meta = email.parser.Parser().parsestr(z.read(meta_name).decode())
            entry = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
        assert any(re.match(r"taskgraph/_core\..*\.so$", n) for n in names), names
        modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "taskgraph").rglob("*.py")}
        assert modules <= set(names), f"the wheel lacks {sorted(modules - set(names))}"
        # the dashboard's page: its HTML, script and style are package data
        static = {p.relative_to(ROOT).as_posix() for p in (ROOT / "taskgraph/dashboard/static").iterdir()}
        assert static and static <= set(names), f"the wheel lacks {sorted(static - set(names))}"
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
        assert not any(n.startswith(("tests/", "csrc/", "docs/")) for n in names), names
        assert meta["Name"] == DIST and meta["Version"] == VERSION
        assert meta["License-Expression"] == "MIT"
        classifiers = meta.get_all("Classifier")
        assert "Programming Language :: Python :: Free Threading :: 3 - Stable" in classifiers
        assert "Operating System :: POSIX :: Linux" in classifiers
        assert "Programming Language :: C" in classifiers
        requires = meta.get_all("Requires-Dist")
        assert not [r for r in requires if r.startswith("cffi") and "extra ==" not in r], requires
        # the test extra's cffi: cffi 2, but not on 3.13 (cffi 2 refuses 3.13t)
        assert "cffi>=2; python_version != \"3.13\" and extra == \"test\"" in requires, requires
        urls = meta.get_all("Project-URL")
        assert urls and any(u.startswith("Repository,") for u in urls), urls
        body = meta.get_payload()
        assert "pip install taskgraph-ft" in body
        assert not re.search(r"\]\((?!https?://|#)", body), "relative links in the long description"
        assert "taskgraph = taskgraph.cli:main" in entry
        if interp != "gil":
            tag = interp.replace("3.", "cp3").replace("t", "")
            assert re.search(rf"-{tag}-{tag}t-", dists[interp].name), dists[interp].name

"""The documentation keeps up with the code.

* Every ```python block of README.md, CHANGELOG.md and docs/**/*.md runs as written: the
  blocks of a page run in order, in one namespace, in a fresh interpreter of the one running
  the tests (so a hang fails the test and the GIL state is that of a new process), in a
  scratch directory, with a timeout. A top-level expression (or ``print(expression)``) whose
  line ends with ``# -> value`` must give that value (a Python literal, up to a ';'). A block
  that cannot run here is preceded by ``<!-- no-run: reason -->``: keep those rare.
* Shell blocks (```bash/```sh/```console/```shell) and inline code of the pages are not run,
  but the commands they name must exist: `make` targets in the Makefile, `taskgraph` /
  `python -m taskgraph` sub-commands, and `pip install` of this project under its
  distribution name with extras it has.
* Every public name has its entry in a page of docs/api/ and in the index, docs/api.md; every
  design note named exists; README.md (the long description on the package index) links only
  to absolute URLs of files that exist. (tests/test_doc_links.py checks every link and anchor.)
"""
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
import warnings

import pytest

with warnings.catch_warnings():  # on a GIL build: warned at import, expected here
    warnings.filterwarnings("ignore", message="taskgraph: the GIL is enabled")
    import taskgraph as tg

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [p for p in [ROOT / "README.md", ROOT / "CHANGELOG.md"] if p.exists()] + sorted(DOCS.rglob("*.md"))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DIST_NAME = PYPROJECT["project"]["name"]
EXTRAS = set(PYPROJECT["project"].get("optional-dependencies", {}))
SHELL_LANGS = {"bash", "sh", "console", "shell", "shell-session"}
# Where README.md's links point on the package index page (the repository's files).
REPO = PYPROJECT["project"]["urls"]["Repository"].rstrip("/")
BLOB, TREE = f"{REPO}/blob/main/", f"{REPO}/tree/main/"
RAW = REPO.replace("https://github.com/", "https://raw.githubusercontent.com/") + "/main/"
SCALE = 4 if os.environ.get("TASKGRAPH_SANITIZED") else 1  # the AddressSanitizer runs are slower
PAGE_TIMEOUT = 120 * SCALE


def rel(page):
    return str(page.relative_to(ROOT))


def normalise(name):
    """PEP 503: case, '-', '_' and '.' do not distinguish names."""
    return re.sub(r"[-_.]+", "-", name).lower()


def code_blocks(page):
    """[(language, first line number of the code, code, no-run reason or None)] of a page."""
    lines = page.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)```\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        indent, lang = len(m.group(1)), m.group(2).lower()
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mark = re.match(r"\s*<!--\s*no-run:\s*(.*?)\s*-->", lines[j]) if j >= 0 else None
        k = i + 1
        while k < len(lines) and not re.match(r"^\s*```\s*$", lines[k]):
            k += 1
        assert k < len(lines), f"{rel(page)}:{i + 1}: code block never closed"
        code = "\n".join(line[indent:] for line in lines[i + 1:k])
        blocks.append((lang, i + 2, code, mark.group(1) if mark else None))
        i = k + 1
    return blocks


def python_pages():
    return [p for p in PAGES if any(b[0] in ("python", "py") for b in code_blocks(p))]


# The child: runs the blocks in one namespace named __main__ (so tasks defined in the docs
# travel by value to a cluster, as in a script), line numbers as in the page, checks `# ->`.
RUNNER = r'''
import ast, json, sys, traceback
page, blocks = json.load(sys.stdin)

def check(value, expected, where):
    try:
        want = ast.literal_eval(expected)
    except (ValueError, SyntaxError):
        return value
    if value != want:
        raise AssertionError(f"{where}: got {value!r}, the page says {expected}")
    return value

class Checks(ast.NodeTransformer):
    """Wraps each expression statement (or print(expression)) whose line ends with
    `# -> value` in a check of that value."""
    def __init__(self, lines):
        self.lines = lines

    def visit_Expr(self, st):
        line = self.lines[st.end_lineno - 1]
        if "# -> " not in line:
            return st
        expected = line.split("# -> ", 1)[1].split(";")[0].strip()
        target = st.value
        is_print = (isinstance(target, ast.Call) and isinstance(target.func, ast.Name)
                    and target.func.id == "print" and len(target.args) == 1)
        val = target.args[0] if is_print else target
        call = ast.Call(ast.Name("__docs_check__", ast.Load()),
                        [val, ast.Constant(expected), ast.Constant(f"{page}:{st.lineno}")], [])
        if is_print:
            target.args[0] = call
        else:
            st.value = call
        return ast.fix_missing_locations(st)

def instrument(code, first):
    source = "\n" * (first - 1) + code
    tree = Checks(source.splitlines()).visit(ast.parse(source, page))
    return compile(tree, page, "exec")

ns = {"__name__": "__main__", "__docs_check__": check}
for first, code in blocks:
    try:
        exec(instrument(code, first), ns)
    except BaseException:
        print(f"\n=== the block at {page}:{first} failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
print(f"=== {page}: {len(blocks)} block(s) ran")
'''


@pytest.mark.parametrize("page", python_pages(), ids=rel)
@pytest.mark.thread_unsafe(reason="each page runs in its own process: 4 threads would add only load")
@pytest.mark.timeout(PAGE_TIMEOUT + 60)
def test_every_python_block_of_the_page_runs(page):
    blocks = [(first, code) for lang, first, code, no_run in code_blocks(page)
              if lang in ("python", "py") and no_run is None]
    if not blocks:
        pytest.skip(f"every python block of {rel(page)} is marked no-run")
    # in a scratch directory: the files the blocks write land there
    work = tempfile.mkdtemp(prefix="tg-docs-")
    try:
        p = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps([rel(page), blocks]),
                           cwd=work, capture_output=True, text=True,
                           timeout=PAGE_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{rel(page)}: its blocks did not finish within {PAGE_TIMEOUT} s\n"
                    f"{e.stdout or ''}\n{e.stderr or ''}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert p.returncode == 0, f"{rel(page)}: exit status {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-6000:]}"


def test_no_run_marks_are_rare_and_say_why():
    marks = [(rel(p), first, why) for p in PAGES for lang, first, _, why in code_blocks(p)
             if why is not None]
    assert all(why for _, _, why in marks), f"a no-run mark without a reason: {marks}"
    assert len(marks) <= 2, f"too many blocks that do not run: {marks}"


# ------------------------------------------------------------------ commands the pages name
def make_targets():
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M))


def cli_commands():
    """The sub-commands of `python -m taskgraph` (also the `taskgraph` script)."""
    import argparse
    from taskgraph import cli
    for a in cli.build_parser()._actions:
        if isinstance(a, argparse._SubParsersAction):
            return set(a.choices)
    return set()


def commands(page):
    """(where, command words) of every shell line and inline code span of a page that names
    make, taskgraph or pip install."""
    out = []
    for lang, first, code, _ in code_blocks(page):
        if lang not in SHELL_LANGS:
            continue
        for n, line in enumerate(code.splitlines()):
            line = re.sub(r"^\s*\$\s+", "", line).split(" #", 1)[0].strip()
            for part in re.split(r"&&|\|\||;|\|", line):
                out.append((f"{rel(page)}:{first + n}", part.strip()))
    text = page.read_text()
    # inline code outside the fenced blocks
    outside = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.M | re.S)
    for span in re.findall(r"`([^`\n]+)`", outside):
        out.append((rel(page), span.strip()))
    found = []
    for where, cmd in out:
        try:
            words = shlex.split(cmd)
        except ValueError:
            continue
        if not words:
            continue
        if words[0] == "make" or words[0] == "taskgraph" or words[:3] == ["python", "-m", "taskgraph"] \
                or (words[0] in ("pip", "pip3") and words[1:2] == ["install"]) \
                or words[:4] == ["python", "-m", "pip", "install"]:
            found.append((where, words))
    return found


def test_shell_commands_in_the_docs_exist():
    targets, subs = make_targets(), cli_commands()
    assert {"setup", "test", "demo", "dist"} <= targets
    assert {"show", "stats", "timeline"} <= subs
    problems, seen = [], 0
    for page in PAGES:
        for where, w in commands(page):
            seen += 1
            if w[0] == "make":
                for t in w[1:]:
                    if not t.startswith("-") and "=" not in t and t not in targets:
                        problems.append(f"{where}: `make {t}`: no such target in the Makefile")
            elif w[0] == "taskgraph" or w[0] == "python":
                args = w[1:] if w[0] == "taskgraph" else w[3:]
                sub = next((a for a in args if not a.startswith("-")), None)
                for name in (sub.split("|") if sub else []):  # `show|stats|timeline`
                    if name not in subs:
                        problems.append(f"{where}: `taskgraph {name}`: no such sub-command")
            else:
                for req in w[w.index("install") + 1:]:
                    if req.startswith("-") or req in (".",):
                        continue
                    m = re.match(r"^([A-Za-z0-9_.-]+)(?:\[([\w,\s-]+)\])?", req)
                    if not m:
                        continue
                    name = normalise(m.group(1))
                    if name == "taskgraph":
                        problems.append(f"{where}: `{' '.join(w)}` installs the unrelated project "
                                        f"named taskgraph on the package index: this one is {DIST_NAME}")
                    if name == normalise(DIST_NAME) and m.group(2):
                        bad = {e.strip() for e in m.group(2).split(",")} - EXTRAS
                        if bad:
                            problems.append(f"{where}: `{req}`: no such extra {sorted(bad)}")
    assert seen > 5, "the pages name fewer commands than expected: is the parser broken?"
    assert not problems, "\n".join(problems)


def test_the_cli_runs_as_the_docs_call_it():
    """`python -m taskgraph --help` and each sub-command's --help exit 0 (the README and
    docs/trace.md point at them)."""
    for sub in [[]] + [[s] for s in sorted(cli_commands())]:
        p = subprocess.run([sys.executable, "-m", "taskgraph", *sub, "--help"], capture_output=True,
                           text=True, timeout=60 * SCALE, cwd=tempfile.gettempdir())
        assert p.returncode == 0 and "usage" in p.stdout, (sub, p.stdout, p.stderr)


# ------------------------------------------------------------------ names and links
# The reference: docs/api.md is the index, one page per topic under docs/api/.
API_PAGES = sorted((DOCS / "api").glob("*.md"))


def test_every_public_name_is_in_the_api_reference():
    """Each name of tg.__all__ is in the index (docs/api.md) and in a page of docs/api/."""
    index = (DOCS / "api.md").read_text()
    pages = "\n".join(p.read_text() for p in API_PAGES)
    assert len(API_PAGES) >= 5, API_PAGES
    missing = [n for n in tg.__all__ if not re.search(rf"`@?tg\.{n}\b", index)]
    assert not missing, f"not in the index docs/api.md: {missing}"
    missing = [n for n in tg.__all__ if not re.search(rf"`@?tg\.{n}\b", pages)]
    assert not missing, f"not documented in docs/api/*.md: {missing}"


def test_every_name_of_the_dask_backend_is_in_the_api_reference():
    import importlib.util
    if importlib.util.find_spec("distributed") is None and not os.environ.get("TASKGRAPH_REQUIRE_DASK"):
        pytest.skip("the dask extra is not installed (make setup installs it)")
    import taskgraph.dask
    for page in (DOCS / "api.md", DOCS / "api" / "dask.md"):
        text = page.read_text()
        missing = [n for n in taskgraph.dask.__all__ if f"`taskgraph.dask.{n}" not in text]
        assert not missing, f"not documented in {rel(page)}: {missing}"


def test_every_design_note_named_in_the_docs_exists():
    for md in PAGES:
        for ref in re.findall(r"(?:docs/)?(design/[a-z_]+\.md)", md.read_text()):
            assert (DOCS / ref).exists(), f"{md.name} names {ref}, which does not exist"


def test_readme_links_are_absolute_and_name_files_that_exist():
    """README.md is the long description on the package index, where relative links and
    images are broken: its links are absolute, and those into the repository name files that
    exist here."""
    text = (ROOT / "README.md").read_text()
    assert PYPROJECT["project"]["readme"] == "README.md"
    links = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", text, re.S)
    assert links, "no links found in README.md"
    problems = []
    for url in links:
        if url.startswith("#"):
            continue
        if not re.match(r"https?://", url):
            problems.append(f"relative link {url!r}")
            continue
        for base in (BLOB, TREE, RAW):
            if url.startswith(base):
                path = ROOT / url[len(base):].split("#")[0]
                if not path.exists():
                    problems.append(f"{url} names {path.relative_to(ROOT)}, which does not exist")
    assert not problems, "\n".join(problems)


def github_anchor(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_packages_links_to_the_docs_name_pages_and_headings_that_exist():
    """What a pip user reads (warnings, summaries, the report) links to the docs by URL, since
    a wheel ships no docs/: every such URL in the package names a file of this repository and,
    with '#', one of its headings."""
    urls = set()
    for src in (ROOT / "taskgraph").rglob("*.py"):
        urls |= set(re.findall(r"https://github\.com/taskgraph-ft/taskgraph/blob/main/[\w./#-]+",
                               src.read_text()))
    from taskgraph import _links
    urls |= {v for v in vars(_links).values() if isinstance(v, str) and v.startswith(BLOB)}
    urls.discard(BLOB)  # _links.py's base
    assert len(urls) >= 4, urls
    problems = []
    for url in sorted(urls):
        path, _, anchor = url[len(BLOB):].partition("#")
        if not (ROOT / path).is_file():
            problems.append(f"{url}: no file {path}")
            continue
        headings = re.findall(r"^#+\s+(.*)$", (ROOT / path).read_text(), re.M)
        if anchor and anchor not in {github_anchor(h) for h in headings}:
            problems.append(f"{url}: {path} has no heading with the anchor #{anchor}")
    assert not problems, "\n".join(problems)


@pytest.mark.thread_unsafe(reason="runs the README's block in its own process")
@pytest.mark.timeout(PAGE_TIMEOUT + 60)
def test_the_readme_picture_is_what_the_code_beside_it_draws(tmp_path):
    """README.md's first picture (docs/img/fib-trace.svg, made by `make pictures` from the
    block above it) agrees with what that block draws when run: the same tasks (count, names
    and spawn edges, which the program decides; who ran which and the times are the run's)."""
    import xml.etree.ElementTree as ET
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import readme_picture
    finally:
        sys.path.pop(0)
    code = readme_picture.first_block()
    drawn = readme_picture.drawn_file(code)
    text = (ROOT / "README.md").read_text()
    assert text.index("```python") < text.index("docs/img/fib-trace.svg") < text.index(
        "## Use it in your project"), "the picture is not the one under the first block"
    if not shutil.which("dot"):
        pytest.skip("Graphviz's dot is not installed: the block cannot draw its picture")
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=PAGE_TIMEOUT)
    assert p.returncode == 0, p.stderr[-3000:]

    def shape(svg_path):
        """(title line's task count, {task label's name: count}, spawn edges between tasks,
        grouped?) of a picture drawn by Trace.visualize."""
        ns = {"s": "http://www.w3.org/2000/svg"}
        root = ET.parse(svg_path).getroot()
        title = " ".join(t.text or "" for t in root.find("s:g", ns).findall("s:text", ns))
        names, edges, grouped = {}, 0, False
        for g in root.iter("{http://www.w3.org/2000/svg}g"):
            kind, name = g.get("class"), (g.findtext("s:title", "", ns) or "")
            if kind == "node" and re.fullmatch(r"[tg]\d+", name):
                grouped |= name.startswith("g")
                label = next(g.iter("{http://www.w3.org/2000/svg}text")).text
                names[label] = names.get(label, 0) + 1
            elif kind == "edge" and re.fullmatch(r"[tg]\d+->[tg]\d+", name):
                edges += 1
        return re.search(r"(\d+) tasks", title).group(1), names, edges, grouped

    assert shape(tmp_path / drawn) == shape(ROOT / "docs" / "img" / "fib-trace.svg"), (
        "README.md's picture is not what the code above it draws: run `make pictures`")


@pytest.mark.thread_unsafe(reason="opens a trace, which records every task of the process")
def test_the_sample_summary_in_performance_md_is_what_summary_prints_now():
    """docs/performance.md shows a Trace.summary(): its lines, numbers aside, are the lines a
    summary of the same kind of run prints today (the page drifted once: a line was missing)."""
    from helpers import fib
    text = (DOCS / "performance.md").read_text()
    sample = text.split("```\ntaskgraph trace:", 1)[1].split("```", 1)[0]
    sample = ("taskgraph trace:" + sample).strip().splitlines()
    with tg.Scheduler(workers=2) as s, tg.trace() as tr:
        s.compute(fib(16, 8))
    now = tr.summary().splitlines()

    def shape(lines):  # numbers and spacing out, the per-worker rows (however many) once, and
        # what the burdened line says about its steal cost (measured or not) left out
        out = [re.sub(r"\s+", " ", re.sub(r"\d+(\.\d+)?", "N", ln)).strip() for ln in lines]
        out = [ln.split(" (")[0] if ln.startswith("burdened") else ln for ln in out]
        return [ln for i, ln in enumerate(out) if i == 0 or ln != out[i - 1]]
    got, want = shape(now), shape(sample)
    if "a pool of" in got[0]:  # (one worker ran everything: the headline says so)
        got[0] = want[0]
    assert got == want, "\n".join(["performance.md:"] + want + ["now:"] + got)

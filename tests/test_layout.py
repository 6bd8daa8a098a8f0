"""The source layout: dependencies run one way and no source file grows past 600 lines.

- C: the `#include "..."` lines of csrc/ and csrc/py/ (a file's .c and .h are one module)
  form no cycle; every function a csrc/py/ header declares is defined in the .c of the same
  name, and a .c file calls only functions declared by headers it reaches through its own
  includes (so no file calls into a layer above it: includes only go down).
- Python: the imports between the modules of taskgraph/ and its sub-packages (anywhere in a
  module, so a deferred import that hides a cycle counts too) form no cycle, and follow the
  layers of PY_LAYERS: no module imports a layer above its own, nor another unit of its own
  layer. Each sub-package's docstring says in one paragraph what lives there, and the modules
  the C extension imports by name exist.
- No C, header or Python source under csrc/ or taskgraph/ exceeds 600 lines.

The C layer order is written in docs/design/native.md, the Python one in
docs/design/package.md; the pictures docs/img/native-layers.svg (the include graph) and
docs/img/package-layers.svg (the package's layers) are made from .dot files that a test here
keeps current: regenerate them with

    python tests/test_layout.py > docs/img/native-layers.dot
    dot -Tsvg docs/img/native-layers.dot -o docs/img/native-layers.svg
    python tests/test_layout.py package > docs/img/package-layers.dot
    dot -Tsvg docs/img/package-layers.dot -o docs/img/package-layers.svg
"""
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
PKG = ROOT / "taskgraph"
MAX_LINES = 600

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def find_cycle(graph):
    """A cycle of graph ({node: set of nodes}) as a list [a, b, ..., a], or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == "open":
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = "done"
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_find_cycle_finds_one_and_only_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"x": {"x"}}) == ["x", "x"]


# ---------------------------------------------------------------------- C
def c_files():
    return sorted(p for d in (CSRC, CSRC / "py") for p in d.iterdir() if p.suffix in (".c", ".h"))


def c_module(path):
    """csrc/py/node.c and csrc/py/node.h are the module 'py/node'; csrc/pool.c is 'pool'."""
    rel = path.relative_to(CSRC).with_suffix("")
    return rel.as_posix()


def c_includes(path):
    """The project files path includes (resolved), in order."""
    out = []
    for name in INCLUDE.findall(path.read_text()):
        target = (path.parent / name).resolve()
        if target.is_file() and target.is_relative_to(CSRC):
            out.append(target)
    return out


def c_module_graph():
    graph = {}
    for f in c_files():
        mod = c_module(f)
        graph.setdefault(mod, set())
        for inc in c_includes(f):
            if c_module(inc) != mod:
                graph[mod].add(c_module(inc))
    return graph


def test_c_includes_form_no_cycle():
    graph = c_module_graph()
    assert "py/node" in graph and "py/module" in graph, sorted(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "#include cycle: " + " -> ".join(cycle)


def test_tgpy_h_is_gone_and_module_c_is_the_top():
    """module.c is the top: no file includes a header of it."""
    assert not (CSRC / "py" / "module.h").exists()
    assert not (CSRC / "py" / "tgpy.h").exists(), "tgpy.h was split into one header per file"


def layers_dot():
    """The include graph of csrc/ and csrc/py/ (its transitive reduction) in Graphviz's dot."""
    graph = c_module_graph()

    def reach(n, skip):
        seen, todo = set(), [m for m in graph[n] if m != skip]
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += graph[m]
        return seen

    edges = sorted((a, b) for a in graph for b in graph[a] if b not in reach(a, b))
    lines = ["digraph layers {", '  rankdir=BT; node [shape=box, fontname="Helvetica", fontsize=11];',
             '  label="csrc/py/ include graph (transitive reduction): an arrow points to the layer '
             'used"; labelloc=t;']
    core = ' [style=filled, fillcolor="#e8eef7"]'  # the plain-C core, below the C-API face
    for n in sorted(graph):
        lines.append(f'  "{n}"' + ("" if n.startswith("py/") else core) + ";")
    lines += [f'  "{a}" -> "{b}";' for a, b in edges]
    return "\n".join(lines + ["}"]) + "\n"


@pytest.mark.parametrize("picture", ["native-layers", "package-layers"])
def test_the_committed_pictures_of_the_layers_are_current(picture):
    """docs/img/native-layers (the C include graph) and docs/img/package-layers (the Python
    package's layers, drawn by package_dot below)."""
    dot = ROOT / "docs" / "img" / f"{picture}.dot"
    made = layers_dot() if picture == "native-layers" else package_dot()
    assert dot.read_text() == made, (
        f"docs/img/{picture}.dot is stale: regenerate it (see this module's docstring)")
    assert (ROOT / "docs" / "img" / f"{picture}.svg").exists()


def strip_c(text):
    """The C text without comments and string literals."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


DECL = re.compile(r"^[A-Za-z_][\w \t\*]*?\b(tg_\w+)\s*\([^;{]*\)\s*;", re.M)
DEF = re.compile(r"^[A-Za-z_][\w \t\*]*?\b(tg_\w+)\s*\([^;{]*\)\s*\{", re.M)


def declared_functions(header):
    """Functions a header declares (prototypes of tg_* names; not static inline ones)."""
    return set(DECL.findall(strip_c(header.read_text())))


def include_closure(path):
    seen, todo = set(), [path]
    while todo:
        p = todo.pop()
        for inc in c_includes(p):
            if inc not in seen:
                seen.add(inc)
                todo.append(inc)
    return seen


def test_each_header_declares_what_its_own_c_file_defines():
    wrong = []
    for h in sorted((CSRC / "py").glob("*.h")):
        c = h.with_suffix(".c")
        if not c.exists():
            continue
        defined = set(DEF.findall(strip_c(c.read_text())))
        for name in sorted(declared_functions(h) - defined):
            wrong.append(f"{h.name} declares {name}, which {c.name} does not define")
    assert not wrong, "\n".join(wrong)


def test_no_c_file_calls_a_function_of_a_higher_layer():
    """A .c file calls only functions declared in headers below it (its include closure)."""
    headers = sorted((CSRC / "py").glob("*.h"))
    owner = {}
    for h in headers:
        for name in declared_functions(h):
            owner[name] = h.resolve()
    assert "tg_node_key" in owner and "tg_submit" in owner, sorted(owner)
    wrong = []
    for c in sorted((CSRC / "py").glob("*.c")):
        reach = include_closure(c.resolve())
        text = strip_c(c.read_text())
        for name in sorted(set(re.findall(r"\b(tg_\w+)\s*\(", text)) & owner.keys()):
            if owner[name] not in reach:
                wrong.append(f"{c.name} calls {name}, declared in {owner[name].name}, which it "
                             "does not include (a layer above it, or beside it)")
    assert not wrong, "\n".join(wrong)


# ---------------------------------------------------------------------- Python
# The layers of the package, lowest first, written once: docs/design/package.md explains them
# and docs/img/package-layers.svg draws them from this table. "core" is the modules directly
# in taskgraph/ (the core API and its machinery), "entry" the entry points (ENTRY_POINTS), each
# other name a sub-package. A module imports from its own unit or from a lower layer, never
# from a higher one nor from another unit of its own layer.
PY_LAYERS = [
    ["core"],
    ["executor", "trace"],
    ["dask", "dashboard"],
    ["entry"],
]
ENTRY_POINTS = {"taskgraph", "taskgraph.__main__", "taskgraph.cli"}  # the package's __init__ too
EXTENSION = "taskgraph._core"  # the C extension: below every Python module (design/native.md)


def py_modules():
    """{dotted module name: path} of every module of the package ('taskgraph.trace' is
    taskgraph/trace/__init__.py)."""
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def py_unit(module, pkg=PKG):
    """The unit of the layer table a module of the package in directory pkg belongs to."""
    if module in ENTRY_POINTS:
        return "entry"
    parts = module.split(".")
    return parts[1] if (pkg / parts[1]).is_dir() else "core"


def layer_violations(graph, pkg=PKG):
    """The imports of graph ({module: modules it imports}) that break PY_LAYERS, in words."""
    rank = {u: i for i, layer in enumerate(PY_LAYERS) for u in layer}
    wrong = []
    for a, targets in sorted(graph.items()):
        for b in sorted(targets):
            ua, ub = py_unit(a, pkg), py_unit(b, pkg)
            if ua != ub and rank[ub] >= rank[ua]:
                where = "above" if rank[ub] > rank[ua] else "beside"
                wrong.append(f"{a} ({ua}) imports {b} ({ub}), a layer {where} it")
    return wrong


def py_imports(module, path, modules):
    """The modules of the package that `module` imports, anywhere in it (a deferred import
    counts too): for `from X import y`, X.y if it is a module, else X."""
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the module's package
                pkg = module.split(".")
                pkg = pkg if is_pkg else pkg[:-1]
                pkg = pkg[:len(pkg) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            if base not in modules:
                continue
            for a in node.names:
                name = f"{base}.{a.name}"
                if name != EXTENSION:
                    out.add(name if name in modules else base)
    out.discard(module)
    return out


def py_module_graph():
    modules = py_modules()
    return {m: py_imports(m, p, modules) for m, p in modules.items()}


def test_python_imports_form_no_cycle():
    graph = py_module_graph()
    assert {"taskgraph.scheduler", "taskgraph", "taskgraph.trace.viz"} <= graph.keys(), sorted(graph)
    assert "taskgraph.trace.record" in graph["taskgraph.trace.files"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in taskgraph/: " + " -> ".join(cycle)


def test_the_layer_table_names_each_sub_package_once():
    units = [u for layer in PY_LAYERS for u in layer]
    assert len(units) == len(set(units)), units
    packages = {p.parent.name for p in PKG.glob("*/__init__.py")}
    assert set(units) - {"core", "entry"} == packages, (
        "every sub-package of taskgraph/ has a place in PY_LAYERS, and every name there is one")


def test_no_python_module_imports_a_higher_layer_or_a_neighbour():
    wrong = layer_violations(py_module_graph())
    assert not wrong, "\n".join(wrong)


def test_the_checks_catch_an_upward_import_a_neighbour_and_a_cycle(tmp_path):
    """The checks above on a package that breaks them: a core module importing a sub-package
    (in a function, relatively), which imports it back; two units of one layer."""
    pkg = tmp_path / "taskgraph"
    for sub in ("trace", "executor"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from taskgraph.task import task\n")
    (pkg / "task.py").write_text("def task():\n    from .trace import record\n")
    (pkg / "trace" / "record.py").write_text("from taskgraph import task\n")
    (pkg / "executor" / "wait.py").write_text("import taskgraph.trace\n")
    modules = {"taskgraph": pkg / "__init__.py", "taskgraph.task": pkg / "task.py",
               "taskgraph.trace": pkg / "trace" / "__init__.py",
               "taskgraph.trace.record": pkg / "trace" / "record.py",
               "taskgraph.executor": pkg / "executor" / "__init__.py",
               "taskgraph.executor.wait": pkg / "executor" / "wait.py"}
    graph = {m: py_imports(m, p, modules) for m, p in modules.items()}
    assert graph["taskgraph.task"] == {"taskgraph.trace.record"}
    assert graph["taskgraph.trace.record"] == {"taskgraph.task"}
    assert find_cycle(graph) == ["taskgraph.task", "taskgraph.trace.record", "taskgraph.task"]
    assert layer_violations(graph, pkg) == [
        "taskgraph.executor.wait (executor) imports taskgraph.trace (trace), a layer beside it",
        "taskgraph.task (core) imports taskgraph.trace.record (trace), a layer above it"]


def test_each_sub_package_says_in_one_paragraph_what_lives_there():
    """Its __init__.py's docstring: one paragraph, naming each of its modules."""
    wrong = []
    for init in sorted(PKG.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        if not doc or "\n\n" in doc.strip():
            wrong.append(f"{init.parent.name}: the docstring is {'not one paragraph' if doc else 'missing'}")
        for mod in sorted(p.stem for p in init.parent.glob("*.py") if p.name != "__init__.py"):
            if not re.search(rf"\b{mod}\b", doc):
                wrong.append(f"{init.parent.name}: the docstring does not name its module {mod}")
    assert not wrong, "\n".join(wrong)


def test_the_python_modules_the_extension_imports_by_name_exist():
    """csrc/py/ calls a few Python functions by module name (``await node``, a Node's notebook
    display): a module that moves must move there too."""
    modules = py_modules()
    calls = []
    for c in sorted((CSRC / "py").glob("*.c")):
        calls += re.findall(r'call_helper\("([\w.]+)",\s*"(\w+)"', c.read_text())
        calls += [(m, None) for m in re.findall(r'PyImport_ImportModule\("(taskgraph[\w.]*)"\)',
                                               c.read_text())]
    assert ("taskgraph.executor.aio", "wait_node") in calls, calls
    for module, fn in calls:
        assert module in modules, f"csrc/py/ imports {module}, which does not exist"
        if fn:
            tree = ast.parse(modules[module].read_text())
            defs = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            assert fn in defs, f"csrc/py/ calls {module}.{fn}, which is not a function there"


def package_dot():
    """The layers of the Python package in Graphviz's dot: a row per layer, lowest at the
    bottom, a box per unit listing its modules, an arrow per unit imported by another."""
    graph = py_module_graph()
    units = {m: py_unit(m) for m in graph}
    between = sorted({(units[a], units[b]) for a in graph for b in graph[a] if units[a] != units[b]})
    title = {"core": "taskgraph/: the core API and its machinery",
             "entry": "entry points"}
    lines = ["digraph package {",
             '  nodesep=0.4; ranksep=0.5; node [shape=box, fontname="Helvetica", '
             'fontsize=11, style=filled, fillcolor="#f3f6fb"];',
             '  label="taskgraph/: its layers, lowest at the bottom; an arrow points to the '
             'layer imported"; labelloc=t; fontname="Helvetica";']
    for layer in PY_LAYERS:
        row = []
        for u in layer:
            names = sorted("__init__" if m in ("taskgraph", f"taskgraph.{u}") else m.split(".")[-1]
                           for m in graph if units[m] == u)
            rows = [", ".join(names[i:i + 5]) for i in range(0, len(names), 5)]
            label = (f"<b>{title.get(u, f'taskgraph/{u}/')}</b>"
                     + "".join(f'<br/><font point-size="9">{r}</font>' for r in rows))
            lines.append(f'  "{u}" [label=<{label}>];')
            row.append(f'"{u}"')
        lines.append(f"  {{ rank=same; {'; '.join(row)}; }}")
    lines += [f'  "{a}" -> "{b}";' for a, b in between]
    # Each layer's row above the one below it, whether or not its units import that one.
    lines += [f'  "{hi[0]}" -> "{lo[0]}" [style=invis];' for lo, hi in zip(PY_LAYERS, PY_LAYERS[1:])]
    return "\n".join(lines + ["}"]) + "\n"


# ---------------------------------------------------------------------- sizes
def source_files():
    out = []
    for base in (CSRC, PKG):
        out += [p for p in base.rglob("*") if p.suffix in (".c", ".h", ".py") and p.is_file()]
    return sorted(out)


@pytest.mark.parametrize("rel", [p.relative_to(ROOT).as_posix() for p in source_files()])
def test_no_source_file_exceeds_600_lines(rel):
    n = len((ROOT / rel).read_text().splitlines())
    assert n <= MAX_LINES, f"{rel} has {n} lines (at most {MAX_LINES}): split it by concept"


if __name__ == "__main__":
    import sys
    print(package_dot() if sys.argv[1:] == ["package"] else layers_dot(), end="")

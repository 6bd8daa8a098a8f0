"""The source layout: dependencies run one way and no source file grows past 600 lines.

- C: the `#include "..."` lines of csrc/ and csrc/py/ (a file's .c and .h are one module)
  form no cycle; every function a csrc/py/ header declares is defined in the .c of the same
  name, and a .c file calls only functions declared by headers it reaches through its own
  includes (so no file calls into a layer above it: includes only go down).
- Python: the imports between the modules of taskgraph/ (anywhere in a module, so a deferred
  import that hides a cycle counts too) form no cycle.
- No C, header or Python source under csrc/ or taskgraph/ exceeds 600 lines.

The layer order itself is written in docs/design/native.md, with the include graph drawn in
docs/img/native-layers.svg from docs/img/native-layers.dot, which a test here keeps current:
regenerate both with

    python tests/test_layout.py > docs/img/native-layers.dot
    dot -Tsvg docs/img/native-layers.dot -o docs/img/native-layers.svg
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


def test_the_committed_picture_of_the_layers_is_current():
    dot = ROOT / "docs" / "img" / "native-layers.dot"
    assert dot.read_text() == layers_dot(), (
        "docs/img/native-layers.dot is stale: regenerate it (see this module's docstring)")
    assert (ROOT / "docs" / "img" / "native-layers.svg").exists()


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
def py_imports(path):
    """The modules of taskgraph that path imports (anywhere in it)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("taskgraph."):
                    out.add(a.name.split(".")[1])
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x / from .x import y
                base = node.module.split(".")[0] if node.module else None
            elif node.module == "taskgraph":
                base = None
            elif node.module and node.module.startswith("taskgraph."):
                base = node.module.split(".")[1]
            else:
                continue
            if base:
                out.add(base)
            else:  # from taskgraph import x: a module if there is one, else the package
                for a in node.names:
                    is_module = any(PKG.glob(f"{a.name}.*")) or (PKG / a.name).is_dir()
                    out.add(a.name if is_module else "__init__")
    return out


def test_python_imports_form_no_cycle():
    graph = {}
    for p in sorted(PKG.glob("*.py")):
        mod = p.stem
        graph[mod] = {m for m in py_imports(p) if m != mod and (PKG / f"{m}.py").exists()}
    assert "scheduler" in graph and "__init__" in graph
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in taskgraph/: " + " -> ".join(cycle)


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
    print(layers_dot(), end="")

"""The programs of benchmarks/inflation.py, written in a module of their own as a user writes
them (imported, not built with exec()): inflation.py compiles this file to its .pyc before it
imports it, so that it runs as a program does from its second run on. Code that the builtin
compile() makes, which is what an import from source does when there is no valid .pyc (the
first run after an edit, PYTHONDONTWRITEBYTECODE, a read-only directory), keeps its literal
constants mortal on 3.13t (gh-118527), and a constant read by two workers is then a contended
reference count like FULL below (docs/performance.md, "Work inflation").

The 12-queens search is written out three times on purpose: the spelling of FULL is what is
measured, and generating the variants from one text (with compile()) would change it."""
import taskgraph as tg

# ------------------------------------------------------------------ 12-queens
N = 12
FULL = (1 << N) - 1   # a computed int: NOT immortal, every worker's read writes its refcount


# As written naturally: FULL read as a global.
def queens_serial(cols, d1, d2):
    if cols == FULL:
        return 1
    n = 0
    free = ~(cols | d1 | d2) & FULL
    while free:
        bit = free & -free
        free ^= bit
        n += queens_serial(cols | bit, ((d1 | bit) << 1) & FULL, (d2 | bit) >> 1)
    return n


@tg.task
def queens(cols=0, d1=0, d2=0, depth=2):
    if depth == 0:
        return queens_serial(cols, d1, d2)
    kids = []
    free = ~(cols | d1 | d2) & FULL
    while free:
        bit = free & -free
        free ^= bit
        kids.append(queens(cols | bit, ((d1 | bit) << 1) & FULL, (d2 | bit) >> 1, depth - 1))
    return sum(k.result() for k in kids)


# FULL bound as a default argument: still a read of the one shared object per use on 3.13
# (LOAD_FAST takes a reference too), and one more per call to copy the default.
def queens_serial_d(cols, d1, d2, FULL=FULL):
    if cols == FULL:
        return 1
    n = 0
    free = ~(cols | d1 | d2) & FULL
    while free:
        bit = free & -free
        free ^= bit
        n += queens_serial_d(cols | bit, ((d1 | bit) << 1) & FULL, (d2 | bit) >> 1)
    return n


@tg.task
def queens_d(cols=0, d1=0, d2=0, depth=2, FULL=FULL):
    if depth == 0:
        return queens_serial_d(cols, d1, d2)
    kids = []
    free = ~(cols | d1 | d2) & FULL
    while free:
        bit = free & -free
        free ^= bit
        kids.append(queens_d(cols | bit, ((d1 | bit) << 1) & FULL, (d2 | bit) >> 1, depth - 1))
    return sum(k.result() for k in kids)


# FULL written as a literal: a constant of the code, immortal once loaded from a .pyc.
def queens_serial_lit(cols, d1, d2):
    if cols == 0xFFF:
        return 1
    n = 0
    free = ~(cols | d1 | d2) & 0xFFF
    while free:
        bit = free & -free
        free ^= bit
        n += queens_serial_lit(cols | bit, ((d1 | bit) << 1) & 0xFFF, (d2 | bit) >> 1)
    return n


@tg.task
def queens_lit(cols=0, d1=0, d2=0, depth=2):
    if depth == 0:
        return queens_serial_lit(cols, d1, d2)
    kids = []
    free = ~(cols | d1 | d2) & 0xFFF
    while free:
        bit = free & -free
        free ^= bit
        kids.append(queens_lit(cols | bit, ((d1 | bit) << 1) & 0xFFF, (d2 | bit) >> 1,
                               depth - 1))
    return sum(k.result() for k in kids)


# ------------------------------------------------------------------ UTS (unbalanced tree)
ROOT_CHILDREN = 2000


def uts_count(v):
    n = 1
    if (v * 1103515245 + 12345) & 0x7fffffff < 267361255:   # 8 children w.p. 0.1245
        for i in range(8):
            n += uts_count((v * 69069 + i * 7919 + 1) & 0x7fffffff)
    return n


@tg.task
def uts(v=1, root=True):
    if not root:
        return uts_count(v)
    kids = [uts((v * 69069 + i * 7919 + 1) & 0x7fffffff, False) for i in range(ROOT_CHILDREN)]
    return sum(k.result() for k in kids)


def _make_count():
    def uts_count_nested(v):   # a nested function: no deferred reference counting on 3.13t
        n = 1
        if (v * 1103515245 + 12345) & 0x7fffffff < 267361255:
            for i in range(8):
                n += uts_count_nested((v * 69069 + i * 7919 + 1) & 0x7fffffff)
        return n
    return uts_count_nested


uts_count_n = _make_count()


@tg.task
def uts_nested_helper(v=1, root=True):
    if not root:
        return uts_count_n(v)
    kids = [uts_nested_helper((v * 69069 + i * 7919 + 1) & 0x7fffffff, False)
            for i in range(ROOT_CHILDREN)]
    return sum(k.result() for k in kids)

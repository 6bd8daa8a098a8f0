"""Bad input gets a clear error naming the task (where there is one) and the cause; it never
crashes the interpreter or hangs.

* damaged real trace files (byte flips, truncations, appended garbage, zeroed ranges) through
  ``Trace.load`` and everything a loaded trace offers, and through ``python -m taskgraph``;
* damaged real graph files through ``tg.load`` (refused before anything is unpickled);
* public functions fed wrong types and values;
* huge, deep and cyclic argument structures.

The fuzz cases are a fixed, seeded set (a tenth of it under TASKGRAPH_SANITIZED).
"""
import collections
import dataclasses
import os
import random
import re
import subprocess
import sys

import msgpack
import pytest

import taskgraph as tg
from helpers import fib, fib_calls
from taskgraph import saving

pytestmark = pytest.mark.timeout(120)

SANITIZED = bool(os.environ.get("TASKGRAPH_SANITIZED"))


def scaled(n):
    """n fuzz cases, a tenth of them under the sanitizer builds."""
    return max(1, n // 10) if SANITIZED else n


@tg.task
def add(a, b=0):
    return a + b


@tg.task
def boom(x):
    raise ValueError(f"boom {x}")


@tg.task
def ident(x):
    return x


# ---------------------------------------------------------------------- fuzz helpers
def _mutations(data, seed, n, header_end):
    """A deterministic list of (label, damaged bytes), all different from data: truncations
    at every offset of the header and of the last bytes and at some in the middle, single and
    multi byte flips, zeroed ranges, appended garbage."""
    rng = random.Random(seed)
    size = len(data)
    out = []
    step = 1 if not SANITIZED else 7
    for k in range(0, min(header_end, size), step):
        out.append((f"cut-header at {k}", data[:k]))
    middle = range(header_end, max(header_end + 1, size - 16))
    for k in sorted(rng.sample(middle, min(len(middle), scaled(30)))):
        out.append((f"cut at {k}", data[:k]))
    for k in range(max(0, size - 16), size, step):
        out.append((f"cut-end at {k}", data[:k]))
    for _ in range(scaled(n * 5 // 10)):
        k, x = rng.randrange(size), rng.randrange(1, 256)
        b = bytearray(data)
        b[k] ^= x
        out.append((f"flip byte {k} ^= {x:#x}", bytes(b)))
    for _ in range(scaled(n // 10)):
        b = bytearray(data)
        ks = rng.sample(range(size), rng.randint(2, 8))
        for k in ks:
            b[k] ^= rng.randrange(1, 256)
        out.append((f"flips at {ks}", bytes(b)))
    for _ in range(scaled(n // 10)):
        s, m = rng.randrange(size), rng.randint(1, 64)
        z = data[:s] + bytes(len(data[s:s + m])) + data[s + m:]
        if z != data:
            out.append((f"zeroed {s}..{s + m}", z))
    for _ in range(scaled(n // 20)):
        out.append(("garbage appended", data + rng.randbytes(rng.randint(1, 64))))
    out += [("zero-byte appended", data + b"\0"), ("twice: the file twice", data + data)]
    return out


# ---------------------------------------------------------------------- trace files
@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    """A real trace: fork-join (fib), a lazy graph with data edges, a failure and the tasks it
    cancelled, on two schedulers."""
    with tg.trace() as tr:
        assert tg.compute(fib(12), workers=2) == 144
        with tg.Scheduler(workers=2) as s:
            a = add(1, 2)
            b = add(a, 3)
            with pytest.raises(ValueError, match="boom 6"):
                s.compute(add(boom(b), 1), add(b, b))
    states = collections.Counter(r.state for r in tr.records)
    assert states["failed"] == 1 and states["done"] >= fib_calls(12) + 2
    p = tmp_path_factory.mktemp("trace") / "run.tgtrace"
    tr.save(p)
    return p


def _header_end(data):
    """Where the first record starts: everything before is format, version, meta, fields."""
    return data.index(b"\xa7records") + len(b"\xa7records") + 3


def _field_offsets(data, first=3):
    """Where each field of the first records and of the last one starts (its msgpack type
    byte): flips there change a field's type rather than its value."""
    u = msgpack.Unpacker(raw=False, strict_map_key=False)
    u.feed(data)
    offsets = []
    for _ in range(u.read_map_header()):
        if u.unpack() != "records":
            u.skip()
            continue
        count = u.read_array_header()
        for i in range(count):
            for _ in range(u.read_array_header()):
                if i < first or i == count - 1:
                    offsets.append(u.tell())
                u.skip()
    return offsets


def _trace_cases(data):
    cases = _mutations(data, 20240607, 300, _header_end(data))
    rng = random.Random(5)
    for k in _field_offsets(data)[::1 if not SANITIZED else 10]:
        x = rng.choice([0x01, 0x10, 0x20, 0x40, 0x80, rng.randrange(1, 256)])
        cases.append((f"type-flip byte {k} ^= {x:#x}", data[:k] + bytes([data[k] ^ x]) + data[k + 1:]))
    # A damaged task name that is still valid msgpack (and UTF-8): the file must load.
    k = data.index(b"\xa3fib", _header_end(data)) + 2
    b = bytearray(data)
    b[k] = ord("j")
    cases.append(("name: a letter of a task name changed", bytes(b)))
    return cases


def _record_problems(tr):
    """What is not well formed in a loaded trace's records (the types its readers rely on)."""
    bad = []
    for i, r in enumerate(tr.records):
        ok = (isinstance(r, tg.TaskRecord) and isinstance(r.key, str) and isinstance(r.name, str)
              and all(isinstance(getattr(r, f), int) and not isinstance(getattr(r, f), bool)
                      for f in ("worker", "scheduler", "start", "end", "own"))
              and (r.parent is None or isinstance(r.parent, str))
              and isinstance(r.deps, list) and all(isinstance(d, str) for d in r.deps)
              and isinstance(r.stolen, bool) and isinstance(r.state, str)
              and all(getattr(r, f) is None or isinstance(getattr(r, f), str)
                      for f in ("error_type", "error", "where"))
              and isinstance(r.lane, str))
        if not ok:
            bad.append(f"record {i}: {r!r:.200}")
    return bad


def test_damaged_trace_files_are_refused_naming_the_file_or_load_well_formed(trace_file, tmp_path):
    data = trace_file.read_bytes()
    cases = _trace_cases(data)
    p = tmp_path / "damaged.tgtrace"
    problems, outcome = [], collections.Counter()
    for n, (label, damaged) in enumerate(cases):
        assert damaged != data, label
        p.write_bytes(damaged)
        try:
            tr = tg.Trace.load(p)
        except tg.TraceFormatError as e:
            outcome["refused"] += 1
            if str(p) not in str(e) or not isinstance(e, ValueError):
                problems.append(f"{label}: message does not name the file: {e}")
            continue
        except Exception as e:
            problems.append(f"{label}: Trace.load raised {type(e).__name__}: {e}")
            continue
        outcome["loaded"] += 1
        problems += [f"{label}: {b}" for b in _record_problems(tr)]
        # Whatever a loaded trace offers works, or says clearly what is wrong.
        uses = [("summary", tr.summary), ("critical_path", tr.critical_path),
                ("to_chrome_trace", tr.to_chrome_trace),
                ("visualize", lambda: tr.visualize(tmp_path / "g.dot",
                                                   detail="all" if n % 4 == 0 else None))]
        for name, use in uses:
            try:
                use()
            except (tg.TraceFormatError, ValueError) as e:
                if not str(e):
                    problems.append(f"{label}: {name}() raised {type(e).__name__} with no message")
            except Exception as e:
                problems.append(f"{label}: {name}() raised {type(e).__name__}: {e}")
    assert not problems, f"{len(problems)} problems in {len(cases)} cases:\n" + "\n".join(problems[:20])
    assert outcome["refused"] and outcome["loaded"], outcome  # both paths were exercised


def _run_cli(*args):
    return subprocess.Popen([sys.executable, "-W", "ignore::RuntimeWarning", "-m", "taskgraph",
                             *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_the_cli_on_damaged_trace_files_says_one_line_and_exits_2(trace_file, tmp_path):
    by_kind, loaded = collections.defaultdict(list), []
    p = tmp_path / "probe.tgtrace"
    for label, damaged in _trace_cases(trace_file.read_bytes()):
        p.write_bytes(damaged)
        try:
            tg.Trace.load(p)
        except tg.TraceFormatError:
            by_kind[label.split()[0]].append(damaged)
        else:
            loaded.append(damaged)
    # One file of each kind of damage that Trace.load refuses (the middle one of its cases),
    # and two damaged files that still load.
    samples = [(f"refused-{kind}", cases[len(cases) // 2]) for kind, cases in by_kind.items()]
    samples += [(f"loaded-{i}", d) for i, d in enumerate(loaded[:2])]
    assert len(samples) >= 9, (sorted(by_kind), len(loaded))
    files, loaded = [], set()
    for name, damaged in samples:
        f = tmp_path / f"{name}.tgtrace"
        f.write_bytes(damaged)
        files.append(f)
        if name.startswith("loaded"):
            loaded.add(f)
    procs = [(p, _run_cli("stats", p)) for p in files]  # run together: each is mostly start-up
    for p, proc in procs:
        out, err = proc.communicate(timeout=60)
        if p in loaded:  # damage that left a valid trace: it is summarised
            assert proc.returncode == 0 and "tasks on" in out and not err, (p, out, err)
            continue
        lines = err.strip().splitlines()
        assert proc.returncode == 2, (p, out, err)
        assert len(lines) == 1 and lines[0].startswith("taskgraph: error: "), err
        assert str(p) in lines[0] and "Traceback" not in err and not out


def test_a_missing_or_unreadable_trace_is_an_os_error_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "nope.tgtrace"))):
        tg.Trace.load(tmp_path / "nope.tgtrace")
    with pytest.raises(IsADirectoryError, match=re.escape(str(tmp_path))):
        tg.Trace.load(tmp_path)


def test_a_trace_with_well_typed_but_odd_records_is_read_or_refused_clearly(tmp_path):
    """Records a damaged file can hold in valid msgpack: each refused naming the record and the
    field, or (odd but well-typed: cycles, dangling keys) loaded and usable."""
    fields = ["key", "name", "worker", "scheduler", "start", "end", "own", "parent", "deps",
              "stolen", "state", "error_type", "error", "where"]
    good = ["a-1.1", "a", 0, 1, 10, 20, 5, None, [], False, "done", None, None, None]

    def write(rows, version=2, **extra):
        doc = {"format": "taskgraph-trace", "version": version, "meta": {}, "fields": fields,
               "records": rows}
        doc.update(extra)
        p = tmp_path / "odd.tgtrace"
        p.write_bytes(msgpack.packb(doc, use_bin_type=True))
        return p

    def with_(**kw):
        return [kw.get(f, v) for f, v in zip(fields, good)]

    for row, what in [(with_(deps=5), "deps is int 5"), (with_(deps=[["x"]]), "deps is list"),
                      (with_(worker="1"), "worker is str '1'"), (with_(own=1.5), "own is float"),
                      (with_(parent=["p"]), "parent is list"), (with_(stolen=0), "stolen is int"),
                      (with_(state="exploded"), "state is str 'exploded'"),
                      (with_(start=b"\x01"), "start is bytes"), (good[:-1], "record 0 is not a list"),
                      (good + [1, 2, 3], "record 0 is not a list"), ({"key": "x"}, "record 0 is not a list")]:
        p = write([row])
        with pytest.raises(tg.TraceFormatError, match=re.escape(what)) as ei:
            tg.Trace.load(p)
        assert str(p) in str(ei.value) and "damaged taskgraph trace" in str(ei.value)
    for doc, what in [({"fields": 5}, "bad field list"), ({"records": {"a": 1}}, "bad field list"),
                      ({"version": [2]}, "trace version [2]"), ({"version": 99}, "trace version 99")]:
        with pytest.raises(tg.TraceFormatError, match=re.escape(what)):
            tg.Trace.load(write([good], **doc))
    # Well-typed nonsense: a task that is its own parent and dependency, a dangling parent,
    # duplicate keys, end before start, an empty lane name. Loaded, and usable.
    rows = [with_(key="a-1.1", parent="a-1.1", deps=["a-1.1", "zz"]),
            with_(key="a-1.1", parent="nowhere", start=50, end=40, where=""),
            with_(key="b-1.2", parent="b-1.2", deps=["a-1.1", "b-1.2"], state="failed",
                  error_type="E", error="x\\")]
    tr = tg.Trace.load(write(rows))
    assert len(tr) == 3 and not _record_problems(tr)
    assert "3 tasks" in tr.summary() and tr.critical_path()
    assert len([e for e in tr.to_chrome_trace()["traceEvents"] if e["ph"] == "X"]) == 3
    for detail in ("all", "grouped"):
        tr.visualize(tmp_path / "odd.dot", detail=detail)
        assert "digraph" in (tmp_path / "odd.dot").read_text()


# ---------------------------------------------------------------------- graph files
class Tripwire:
    """Unpickling it makes a directory: proof that a file's payload was unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def test_damaged_graph_files_are_refused_without_unpickling_anything(tmp_path):
    marker = tmp_path / "unpickled"
    p = tmp_path / "g.tggraph"
    a = add(1, 2)
    tg.save([add(a, ident(Tripwire(marker))), add(a, 10)], p)
    data = p.read_bytes()
    tg.load(p)  # the intact file: the tripwire works
    assert marker.is_dir()
    marker.rmdir()
    header = len(saving.MAGIC) + saving._HEAD.size  # magic; version, length, sha256
    cases = _mutations(data, 7, 200, header)
    cases += [(f"byte {k} of the header inverted", data[:k] + bytes([data[k] ^ 0xFF]) + data[k + 1:])
              for k in range(0, header, 1 if not SANITIZED else 5)]
    bad = tmp_path / "bad.tggraph"
    problems = []
    for label, damaged in cases:
        assert damaged != data, label
        bad.write_bytes(damaged)
        try:
            got = tg.load(bad)
        except tg.GraphFileError as e:
            if str(bad) not in str(e) or not isinstance(e, ValueError):
                problems.append(f"{label}: message does not name the file: {e}")
        except Exception as e:
            problems.append(f"{label}: tg.load raised {type(e).__name__}: {e}")
        else:
            problems.append(f"{label}: loaded {got!r:.80}")
        if marker.exists():
            problems.append(f"{label}: the payload was unpickled")
            marker.rmdir()
    assert not problems, f"{len(problems)} problems in {len(cases)} cases:\n" + "\n".join(problems[:20])


# ---------------------------------------------------------------------- wrong types and values
@pytest.mark.thread_unsafe(reason="opens traces, which record every task of the process")
def test_file_functions_refuse_what_is_not_a_path_and_never_touch_a_descriptor(tmp_path):
    """An int path would be taken by open() as a file descriptor, read or written, and closed."""
    with tg.trace() as tr:
        add(1, 2).compute(workers=1)
    with open(tmp_path / "keep", "w+b") as keep:
        fd = keep.fileno()
        calls = [("Trace.load", lambda: tg.Trace.load(fd)), ("Trace.save", lambda: tr.save(fd)),
                 ("Trace.to_chrome_trace", lambda: tr.to_chrome_trace(fd)),
                 ("tg.load", lambda: tg.load(fd)), ("tg.save", lambda: tg.save(add(1), fd)),
                 ("write_trace_files", lambda: tg.write_trace_files(tr, fd, quiet=True)),
                 ("the picture's", lambda: tg.visualize(add(1), fd)),
                 ("the picture's", lambda: tr.visualize(fd))]
        for who, call in calls:
            with pytest.raises(TypeError, match=rf"^{re.escape(who)}:? path must be a str or os.PathLike, got int {fd}$"):
                call()
        os.fstat(fd)  # still open
        assert keep.read() == b""  # nothing written to it
    with pytest.raises(TypeError, match="tg.load: path must be a str or os.PathLike, got NoneType"):
        tg.load(None)


def test_load_of_a_directory_or_a_missing_file_is_an_os_error_naming_it(tmp_path):
    with pytest.raises(IsADirectoryError, match=re.escape(str(tmp_path))):
        tg.load(tmp_path)
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "nope"))):
        tg.load(tmp_path / "nope")
    os.mkdir(tmp_path / "x")  # a directory where the file should go
    with pytest.raises(IsADirectoryError, match=re.escape(str(tmp_path / "x"))):
        tg.save(add(1), tmp_path / "x")
    assert os.listdir(tmp_path) == ["x"]  # the temporary file is gone


@pytest.mark.parametrize("bad", [3, None, object()])
def test_save_of_what_is_not_a_node_names_it(tmp_path, bad):
    with pytest.raises(TypeError, match=rf"tg.save takes a Node or a list of Nodes, got {type(bad).__name__}"):
        tg.save(bad, tmp_path / "g.tggraph")
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("bad", [3, None, [3], ["x"]])
def test_visualize_of_what_is_not_a_node_names_it(tmp_path, bad):
    with pytest.raises(TypeError, match=r"tg.visualize takes a Node or a list of Nodes, got (int 3|NoneType None|str 'x')"):
        tg.visualize(bad, tmp_path / "g.dot")
    assert not os.listdir(tmp_path)


@pytest.mark.thread_unsafe(reason="opens traces, which record every task of the process")
def test_visualize_options_are_checked_before_anything_is_written(tmp_path):
    n = add(add(1), 2)
    with pytest.raises(ValueError, match=r"cannot tell the picture format from .*g\.unknown.*\.svg, \.png, \.pdf or \.dot"):
        tg.visualize(n, tmp_path / "g.unknown")
    with tg.trace() as tr:
        n.compute(workers=1)
    for bad in ("x", -1, 2.5, None, True):
        err = ValueError if bad == -1 else TypeError
        msg = re.escape(f"threshold must be an int >= 0 (a number of tasks), got {bad!r}")
        with pytest.raises(err, match=msg):
            tg.visualize(add(1), tmp_path / "g.dot", threshold=bad)
        with pytest.raises(err, match=msg):
            tr.visualize(tmp_path / "g.dot", threshold=bad)
    with pytest.raises(ValueError, match="detail must be None, 'all' or 'grouped', got 'most'"):
        tr.visualize(tmp_path / "g.dot", detail="most")
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("bad", [3, None, "run", [tg.TaskRecord("k", "n", 0, 1, 0, 1, 1, None)]])
def test_write_trace_files_needs_a_trace(tmp_path, bad):
    with pytest.raises(TypeError, match=r"write_trace_files needs a taskgraph.Trace .*, got (int|NoneType|str|list)"):
        tg.write_trace_files(bad, tmp_path / "run", quiet=True)
    assert not os.listdir(tmp_path)


def test_a_trace_is_made_of_task_records():
    with pytest.raises(TypeError, match="Trace records must be TaskRecords, got int 3"):
        tg.Trace([3])
    with pytest.raises(TypeError, match="Trace meta must be a dict, got str 'm'"):
        tg.Trace([], "m")


def test_scheduler_bounds_are_clear_errors():
    with pytest.raises(ValueError, match="workers must be <= 4096, got 4097"):
        tg.Scheduler(workers=4097)
    for bad in (-1, "3", 1.5, True, 2**31, 2**40):  # beyond a C int: ValueError too, not OverflowError
        with pytest.raises(ValueError, match=re.escape(f"max_help_depth must be an int from 0 to "
                                                       f"{2**31 - 1}, got {bad!r}")):
            tg.Scheduler(workers=1, max_help_depth=bad)
    tg.Scheduler(workers=1, max_help_depth=2**31 - 1).close()  # the largest is accepted
    # through tg.compute(workers=...): the same errors, and nothing runs
    n = add(1)
    with pytest.raises(TypeError, match="workers must be an int >= 1, got '2'"):
        tg.compute(n, workers="2")
    with pytest.raises(ValueError, match="workers must be >= 1, got 0"):
        tg.compute(n, workers=0)
    assert n.state == "new"


@pytest.mark.parametrize("form", ["call", "decorator"])
@pytest.mark.parametrize("bad", ["", 3, b"f", ["f"]])
def test_a_bad_task_name_is_named(form, bad):
    with pytest.raises(TypeError, match=re.escape(f"task name must be a non-empty str, got {bad!r}")):
        if form == "call":
            tg.task(lambda: 1, name=bad)
        else:
            tg.task(name=bad)(lambda: 1)


def test_a_closed_scheduler_refuses_work_through_every_entry_point():
    s = tg.Scheduler(workers=1)
    s.close()
    n = add(1)
    for call in (lambda: tg.compute(n, scheduler=s), lambda: tg.gather([n], scheduler=s),
                 lambda: s.compute(n, timeout=1)):
        with pytest.raises(tg.SchedulerClosedError, match=re.escape(f"{s!r} is closed")):
            call()
    assert n.state == "new"  # nothing was submitted
    assert [d["tasks_run"] for d in s.stats()] == [0]
    s.close()
    with tg.use_scheduler(s):  # a closed scheduler is skipped by the current-scheduler rule
        assert tg.current_scheduler() is not s and n.result() == 1


def test_use_scheduler_of_what_is_not_a_scheduler_is_a_type_error():
    with pytest.raises(TypeError, match=r"got (int )?3"):
        with tg.use_scheduler(3):
            tg.compute(add(1))


def test_gather_of_what_is_neither_a_node_nor_a_list_names_it():
    with pytest.raises(TypeError, match=r"gather.*got int 3"):
        tg.gather(3)


@pytest.mark.parametrize("bad", [-1, "x", float("nan")])
def test_a_bad_compute_timeout_is_refused_before_anything_runs(bad):
    n = add(1)
    with tg.Scheduler(workers=1) as s:
        with pytest.raises((ValueError, TypeError), match="timeout"):
            s.compute(n, timeout=bad)
    assert n.state == "new"


def test_a_result_timeout_that_is_not_a_number_names_the_parameter():
    n = add(1)
    with pytest.raises(TypeError, match="timeout"):
        n.result(timeout="x")


# ---------------------------------------------------------------------- huge arguments
def test_a_dict_of_100_000_nodes():
    @tg.task
    def total(d):
        return sum(d.values()), len(d), type(d).__name__

    d = {f"k{i}": add(i) for i in range(100_000)}
    n = total(d)
    assert len(n.dependencies) == 100_000
    assert n.compute(workers=2) == (sum(range(100_000)), 100_000, "dict")


def _nest(depth, leaf):
    x = leaf
    for _ in range(depth):
        x = [x]
    return x


def test_nesting_5000_deep_is_a_recursion_error_naming_the_task_and_nothing_runs():
    leaf = add(1)
    with pytest.raises(RecursionError, match="the arguments of task ident nest containers deeper than 1000 levels"):
        ident(_nest(5000, leaf))
    with pytest.raises(RecursionError, match="the arguments of task ident nest"):
        ident(x={"k": _nest(5000, 1)})  # no Node in it, in a keyword: refused the same way
    with pytest.raises(RecursionError, match="nest containers deeper than 1000 levels"):
        tg.compute(leaf, _nest(5000, leaf), workers=1)
    assert leaf.state == "new"  # refused before anything was submitted
    assert ident(_nest(900, leaf)).compute(workers=1) == _nest(900, 1)


def test_nesting_5000_deep_inside_a_task_fails_that_task_and_the_pool_goes_on():
    @tg.task
    def spawns(depth):
        return ident(_nest(depth, add(1))).result()

    with tg.Scheduler(workers=2) as s:
        with pytest.raises(RecursionError, match="the arguments of task ident nest") as ei:
            s.compute(spawns(5000))
        assert any("raised by task spawns" in note for note in getattr(ei.value, "__notes__", []))
        assert s.compute(spawns(900)) == _nest(900, 1)


@dataclasses.dataclass
class Box:
    item: object


def _cycles():
    d = {"n": add(1)}
    d["l"] = [d]  # a dict holding a list holding the dict
    selfdict = {}
    selfdict["me"] = selfdict
    box = Box([add(2)])
    box.item.append(box)  # a dataclass holding a list holding it
    t = ([],)
    t[0].append(t)  # a tuple holding a list holding the tuple
    return {"dict-list-dict": d, "dict-self": selfdict, "dataclass-list": box, "tuple-list": t}


@pytest.mark.parametrize("case", ["dict-list-dict", "dict-self", "dataclass-list", "tuple-list"])
def test_a_cycle_through_containers_is_a_clear_error_and_nothing_runs(case):
    cyc = _cycles()[case]
    with pytest.raises(RecursionError, match=r"the arguments of task ident nest containers deeper than 1000 levels \(a container that contains itself\?\)"):
        ident(cyc)
    with pytest.raises(RecursionError, match=r"the arguments of task add nest containers"):
        add(1, b=[cyc])
    first = add(5)
    with pytest.raises(RecursionError, match="a container that contains itself"):
        tg.compute(first, cyc, workers=1)
    assert first.state == "new"
    assert first.compute(workers=1) == 5  # and all is well afterwards


def test_a_cycle_given_to_compute_does_not_call_compute_a_task():
    loop = []
    loop.append(loop)
    with pytest.raises(RecursionError) as ei:
        tg.compute(loop, workers=1)
    assert "compute" in str(ei.value) and "task compute" not in str(ei.value)

"""Trace files (taskgraph.trace.files): save/load round trip, damaged files refused, the
Chrome timeline."""
import json

import pytest

import taskgraph as tg
from helpers import fib

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.thread_unsafe(reason="a trace records every task of the process: other threads' tasks would appear in it"),
]


def test_save_load_round_trip(tmp_path):
    with tg.trace() as tr:
        tg.compute(fib(12, cutoff=4), workers=2)
    p = tmp_path / "run.tgtrace"
    tr.save(p)
    back = tg.Trace.load(p)
    assert back.records == tr.records
    assert back.span == tr.span and back.work == tr.work


@pytest.mark.parametrize("content", [b"", b"hello", b"\x93\x01\x02"])
def test_load_rejects_a_file_that_is_not_a_trace(tmp_path, content):
    p = tmp_path / "bad.tgtrace"
    p.write_bytes(content)
    with pytest.raises(tg.TraceFormatError, match="not a taskgraph trace"):
        tg.Trace.load(p)


def test_load_rejects_a_truncated_trace(tmp_path):
    with tg.trace() as tr:
        tg.compute(fib(10), workers=1)
    p = tmp_path / "t.tgtrace"
    tr.save(p)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(tg.TraceFormatError):
        tg.Trace.load(p)


def test_chrome_trace_is_valid_json_with_one_track_per_worker(tmp_path):
    with tg.trace() as tr:
        tg.compute(fib(14, cutoff=4), workers=2)
    p = tmp_path / "t.json"
    tr.to_chrome_trace(p)
    doc = json.loads(p.read_text())
    ev = doc["traceEvents"]
    tasks = [e for e in ev if e["ph"] == "X"]
    assert len(tasks) == len(tr.records)
    assert all({"name", "ts", "dur", "pid", "tid", "args"} <= set(e) for e in tasks)
    assert all(e["ts"] >= 0 and e["dur"] > 0 for e in tasks)
    names = [e for e in ev if e["ph"] == "M" and e["name"] == "thread_name"]
    assert len(names) == len({(e["pid"], e["tid"]) for e in tasks})

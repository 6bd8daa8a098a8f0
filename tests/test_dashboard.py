"""The live dashboard (taskgraph.dashboard): what it publishes against a known run, its HTTP
and event-stream face read with http.client, and its safety and bounds: the token, path
traversal, names shown as text, bounded connections and queues, clients that stop reading
or vanish, closing. The page in a real browser: tests/test_dashboard_browser.py."""
import gc
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

import taskgraph as tg
from taskgraph.dashboard import dashboard, model as _model, server as _server
from helpers import fib, fib_calls, run_script

pytestmark = pytest.mark.timeout(120)


def get(d, path, token=None):
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    if token:
        path += ("&" if "?" in path else "?") + "token=" + token
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, dict(r.getheaders()), body


def state(d):
    # Take what the workers published (a compute publishes before it returns), then, under one
    # hold of the model's lock (the sampler thread may tick meanwhile), send the pending update
    # and take the snapshot: a snapshot leaves out what the next update brings.
    m = d.model
    m.tick()
    with m.lock:
        update = m._message(snapshot=False)
        snap = m._message(snapshot=True)
    if m.publish is not None:
        m.publish(update)
    return snap


def progress(st):
    return {st["names"][r[0]]: dict(zip(("done", "running", "failed", "cancelled", "waiting"), r[1:]))
            for r in st["progress"]}


def tasks_in_stream(st, lane_names=None):
    lanes = {l["lane"] for l in st["lanes"] if lane_names is None or l["name"] in lane_names}
    return (sum(1 for it in st["items"] if it[0] in lanes and it[3] >= 0)
            + sum(b[2] for b in st["buckets"] if b[0] in lanes))


@tg.task
def boom(i):
    raise ValueError(f"boom {i}")


@tg.task
def after(x):
    return x


# ---------------------------------------------------------------------- what it publishes
def test_the_views_count_a_known_run():
    with tg.Scheduler(2) as s, dashboard(s) as d:
        assert s.compute(fib(18, 6)) == 2584
        try:
            s.compute([after(boom(0)), after(1)])
        except ValueError:
            pass
        st = state(d)
        p = progress(st)
        assert p["fib"]["done"] == fib_calls(18, 6)
        assert p["boom"]["failed"] == 1 and p["after"]["cancelled"] >= 1
        assert p["after"]["done"] + p["after"]["cancelled"] == 2
        # the stream: every task is there, one by one (a long one) or in a bucket
        assert tasks_in_stream(st) == fib_calls(18, 6) + 3
        assert [l["name"] for l in st["lanes"]] == [f"s{s.number}.w0", f"s{s.number}.w1",
                                                   f"s{s.number}.spares"]
        stats = s.stats()
        assert [l["tasks"] for l in st["lanes"][:2]] == [w["tasks_run"] for w in stats]
        assert all(0.0 <= l["busy"] <= 1.0 and l["dropped"] == 0 for l in st["lanes"])
        assert st["finished"] == fib_calls(18, 6) + 3  # done, failed or cancelled
        assert st["taken"] >= st["finished"]  # records: the tasks, and idle stretches in joins
        assert st["window"] == 10_000_000 and st["bucket"] == 10_000


def test_running_tasks_and_idle_workers_show():
    release = threading.Event()

    @tg.task
    def waits():
        release.wait(60)
        return 1

    with tg.Scheduler(2) as s, dashboard(s) as d:
        n = waits()
        fut = threading.Thread(target=s.compute, args=(n,))
        fut.start()
        deadline = time.monotonic() + 60
        while True:
            st = state(d)
            running = [r for l in st["lanes"] for r in l["running"]]
            if running or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert [st["names"][r[0]] for r in running] == ["waits"]
        assert progress(st)["waits"]["running"] == 1
        busy = [l for l in st["lanes"] if l["running"]]
        idle = [l for l in st["lanes"] if not l["running"]]
        assert len(busy) == 1 and not busy[0]["idle"]
        deadline = time.monotonic() + 60  # the other worker looks for work, then parks
        while not state(d)["lanes"][idle[0]["worker"]]["idle"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state(d)["lanes"][idle[0]["worker"]]["idle"]
        release.set()
        fut.join()
        assert progress(state(d))["waits"] == {"done": 1, "running": 0, "failed": 0, "cancelled": 0,
                                               "waiting": 0}


def wait_for(d, check, timeout=60):
    """The first state for which check(state) holds (polled), or the last one."""
    deadline = time.monotonic() + timeout
    while True:
        st = state(d)
        if check(st) or time.monotonic() > deadline:
            return st
        time.sleep(0.01)


def test_a_child_spawned_after_its_parent_computed_starts_when_it_ran():
    """A task that begins right after another ended takes that end as its start (one clock
    read per task); one that begins after its parent's own code ran reads the clock."""
    @tg.task
    def kid(dt):
        time.sleep(dt)
        return dt

    @tg.task
    def parent():
        kid(0).result()  # runs in this join, on this worker
        time.sleep(0.05)  # the parent's own code
        return kid(0.02).result()

    with tg.Scheduler(1, spares=0) as s, dashboard(s) as d:
        s.compute(parent())
        st = state(d)
    names = st["names"]
    listed = [it for it in st["items"] if it[3] >= 0]  # tasks a bucket long or more, with times
    (p,) = [it for it in listed if names[it[3]] == "parent"]
    (k,) = [it for it in listed if names[it[3]] == "kid"]
    assert k[1] >= p[1] + 50_000 and k[2] - k[1] >= 20_000 and k[2] <= p[2], (p, k)


def test_tasks_submitted_and_not_started_show_as_waiting_per_function():
    """Waiting: spawned children behind a busy worker, a lazy node whose dependency runs,
    lazy nodes queued from outside, calls submitted to an Executor; 0 once all ran."""
    release = threading.Event()

    @tg.task
    def leaf(i):
        return i

    @tg.task
    def spawner(k):
        kids = [leaf(i) for i in range(k)]  # onto this worker's deque; it is the only one
        release.wait(60)
        return sum(kid.result() for kid in kids)

    with tg.Scheduler(1, spares=0) as s, dashboard(s) as d:
        sp = spawner(7)
        graph = [sp, after(sp)] + [after(i) for i in range(5)]
        t = threading.Thread(target=s.compute, args=(graph,))
        t.start()
        st = wait_for(d, lambda st: progress(st).get("spawner", {}).get("running") == 1 and
                      progress(st).get("leaf", {}).get("waiting") == 7)
        p = progress(st)
        assert p["spawner"] == {"done": 0, "running": 1, "failed": 0, "cancelled": 0, "waiting": 0}
        assert p["leaf"]["waiting"] == 7 and p["leaf"]["done"] == 0
        # after(sp) waits for its dependency; of the other five, those not run before spawner
        assert p["after"]["waiting"] >= 1 and p["after"]["done"] + p["after"]["waiting"] == 6
        release.set()
        t.join(60)
        p = progress(wait_for(d, lambda st: progress(st)["after"]["done"] == 6))
        assert {k: (v["done"], v["waiting"]) for k, v in p.items()} == {
            "spawner": (1, 0), "leaf": (7, 0), "after": (6, 0)}

    gate = threading.Event()

    def call(x):
        gate.wait(60)
        return x

    with tg.Executor(1) as ex, dashboard(ex.scheduler) as d:
        futs = [ex.submit(call, i) for i in range(4)]
        st = wait_for(d, lambda st: progress(st).get("call", {}).get("running") == 1)
        assert progress(st)["call"]["waiting"] == 3
        gate.set()
        assert [f.result() for f in futs] == [0, 1, 2, 3]
        p = progress(wait_for(d, lambda st: progress(st)["call"]["done"] == 4))
        assert p["call"]["waiting"] == 0


@pytest.mark.thread_unsafe(reason="results held is a count of the whole process")
def test_results_held_count_the_results_still_held():
    @tg.task
    def part(i):
        return [i] * 10

    # Garbage of earlier tests (a node in a traceback's cycle) is collected first, and no
    # collection runs meanwhile: the count moves only with what this test holds and lets go.
    gc.collect()
    gc.disable()
    try:
        results_held_follow_the_nodes(part)
    finally:
        gc.enable()


def results_held_follow_the_nodes(part):
    with tg.Scheduler(2) as s, dashboard(s) as d:
        base = state(d)["held"]
        nodes = [part(i) for i in range(300)]
        s.compute(nodes)
        # exact once the workers are idle (each adds what it counted when it goes idle)
        assert wait_for(d, lambda st: st["held"] == base + 300)["held"] == base + 300
        del nodes  # their results go with them
        assert wait_for(d, lambda st: st["held"] == base)["held"] == base
        root = fib(16, 4)
        s.compute(root)  # fork-join: the children are let go once their parent returned
        assert wait_for(d, lambda st: st["held"] == base + 1)["held"] == base + 1
        del root
        assert wait_for(d, lambda st: st["held"] == base)["held"] == base
        # Results that outlive their scheduler (its workers' counts go with it) stay counted
        # until they are let go.
        with tg.Scheduler(2) as other, dashboard(other):
            kept = [part(i) for i in range(50)]
            other.compute(kept)
        assert wait_for(d, lambda st: st["held"] == base + 50)["held"] == base + 50
        del kept
        assert wait_for(d, lambda st: st["held"] == base)["held"] == base
        del other  # its engine goes, and with it its workers' feeds (their counts are folded)
        gc.collect()  # what this test made only: the earlier garbage went first
        assert state(d)["held"] == base


def test_long_tasks_are_listed_with_their_times_and_short_ones_summed():
    @tg.task
    def long_one():
        time.sleep(0.05)  # 50 ms: five buckets of the 10 s window

    @tg.task
    def short(i):
        return i

    with tg.Scheduler(1) as s, dashboard(s) as d:
        s.compute(long_one())
        s.compute([short(i) for i in range(500)])
        st = state(d)
    names = st["names"]
    longs = [it for it in st["items"] if it[3] >= 0 and names[it[3]] == "long_one"]
    assert len(longs) == 1 and longs[0][2] - longs[0][1] >= 50_000
    shorts = sum(b[2] for b in st["buckets"] if names[b[4]] == "short")
    assert shorts == 500 and not [it for it in st["items"] if it[3] >= 0 and names[it[3]] == "short"]
    assert all(b[3] <= b[2] * 10_000 for b in st["buckets"])  # busy time within the bucket count


@pytest.mark.thread_unsafe(reason="a dashboard of every scheduler of the process")
def test_everything_that_runs_on_the_pool_shows(tmp_path):
    """fork-join, a lazy graph, tg.map, taskgraph.Executor, taskgraph.dask.get: on schedulers
    made before and after the dashboard opened."""
    dask = pytest.importorskip("dask")
    import taskgraph.dask

    def square(x):
        return x * x

    @dask.delayed
    def inc(x):
        return x + 1

    with tg.Scheduler(2) as s, dashboard() as d:
        s.compute(fib(12, 4))
        with tg.use_scheduler(s):
            assert list(tg.map(square, range(40))) == [x * x for x in range(40)]
            assert dask.compute([inc(i) for i in range(30)], scheduler=taskgraph.dask.get)[0][0] == 1
        with tg.Executor(2) as ex:  # a scheduler made after the dashboard opened
            assert ex.submit(square, 3).result() == 9
            assert sum(ex.map(square, range(10))) == 285
        p = progress(state(d))
        lanes = {l["name"] for l in d.snapshot()["lanes"]}
    assert p["fib"]["done"] == fib_calls(12, 4)
    assert p["inc"]["done"] == 30
    assert all(v["waiting"] == 0 for v in p.values()), p  # every submitted task was counted run
    assert sum(v["done"] for k, v in p.items() if "square" in k) >= 3  # blocks of tg.map, ex
    assert {f"s{s.number}.w0", f"s{s.number}.w1"} <= lanes and len(lanes) >= 4


def test_one_dashboard_per_scheduler_and_the_argument_checks():
    with tg.Scheduler(1) as s, dashboard(s):
        with pytest.raises(RuntimeError, match="has a live feed already"):
            dashboard(s)
    with pytest.raises(TypeError, match="takes a taskgraph.Scheduler"):
        dashboard("s1")
    with pytest.raises(ValueError, match="port"):
        dashboard(port=-1)
    with pytest.raises(ValueError, match="window"):
        dashboard(window=0)


# ---------------------------------------------------------------------- HTTP and events
def test_the_page_its_files_and_the_state_over_http():
    with tg.Scheduler(1) as s, dashboard(s) as d:
        s.compute(fib(10, 4))
        assert d.url == f"http://127.0.0.1:{d.port}/" and d.token is None
        status, headers, body = get(d, "/")
        assert status == 200 and headers["Content-Type"].startswith("text/html")
        assert b"static/dashboard.js" in body
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert headers["X-Content-Type-Options"] == "nosniff"
        for f in ("dashboard.js", "dashboard.css"):
            status, _, body = get(d, "/static/" + f)
            assert status == 200 and body
        status, headers, body = get(d, "/api/state")
        st = json.loads(body)
        assert status == 200 and st["type"] == "snapshot" and len(st["lanes"]) == 1
        assert get(d, "/nothing")[0] == 404


def test_the_event_stream_sends_a_snapshot_then_updates():
    with tg.Scheduler(1) as s, dashboard(s) as d:
        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
        c.request("GET", "/events")
        r = c.getresponse()
        assert r.status == 200 and r.getheader("Content-Type") == "text/event-stream"
        seen = []
        while len(seen) < 3:
            line = r.fp.readline()
            assert line, "the stream ended"
            if line.startswith(b"data: "):
                seen.append(json.loads(line[6:]))
                if len(seen) == 1:
                    s.compute(fib(10, 4))
        c.close()
    assert seen[0]["type"] == "snapshot" and {m["type"] for m in seen[1:]} == {"update"}
    assert [m["seq"] for m in seen[1:]] == sorted(m["seq"] for m in seen[1:])
    total = sum(len(m["items"]) + sum(b[2] for b in m["buckets"]) for m in seen)
    assert total <= fib_calls(10, 4)


# ---------------------------------------------------------------------- safety
def test_a_token_is_required_off_the_loopback_address_and_when_given():
    with tg.Scheduler(1) as s:
        with dashboard(s, token="s3cret") as d:
            assert d.url.endswith("/?token=s3cret")
            assert get(d, "/")[0] == 403 and get(d, "/api/state")[0] == 403
            assert get(d, "/events?token=wrong")[0] == 403
            assert get(d, "/", token="s3cret")[0] == 200
            assert get(d, "/api/state", token="s3cret")[0] == 200
            assert get(d, "/static/dashboard.js")[0] == 200  # the package's own files
    # any address but the loopback one gets a token of its own (connected to on loopback)
    with tg.Scheduler(1) as s, dashboard(s, host="0.0.0.0") as d:
        assert d.token and len(d.token) >= 24 and d.url.endswith("?token=" + d.token)
        assert get(d, "/")[0] == 403 and get(d, "/", token=d.token)[0] == 200


@pytest.mark.parametrize("path", ["/static/../server.py", "/static/..%2fserver.py",
                                  "/static/%2e%2e/live.py", "/static//etc/passwd",
                                  "/../../etc/passwd", "/static/", "/static/.", "/trace/1.tgtrace",
                                  "/api/trace/99", "/static/dashboard.js/../../model.py"])
def test_paths_outside_its_own_files_are_refused(path):
    with tg.Scheduler(1) as s, dashboard(s) as d:
        status, _, body = get(d, path)
    assert status == 404 and b"import" not in body


def test_task_names_are_data_never_markup():
    evil = tg.task(lambda: 1, name="<script>alert(1)</script>")
    with tg.Scheduler(1) as s, dashboard(s) as d:
        s.compute(evil())
        st = state(d)
        assert "<script>alert(1)</script>" in st["names"]
        _, _, page = get(d, "/")
    assert b"alert" not in page  # the page is static: names reach it as JSON, set as text
    js = open(os.path.join(_server.STATIC, "dashboard.js")).read()
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "document.write" not in js


def _handlers():
    """The server's threads serving a connection now (ThreadingHTTPServer names them)."""
    return [t for t in threading.enumerate() if "process_request_thread" in t.name]


def _wait(cond, timeout=60):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.thread_unsafe(reason="patches the server's timeout")
def test_a_client_that_vanishes_or_never_reads_leaves_no_thread(monkeypatch):
    monkeypatch.setattr(_server, "SEND_TIMEOUT", 1.0)
    with tg.Scheduler(1) as s, dashboard(s) as d:
        srv = d._server
        # vanishes mid-stream: its next write fails
        c = socket.create_connection(("127.0.0.1", d.port))
        c.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b"data:" not in got:
            got += c.recv(65536)
        c.close()
        _wait(lambda: srv.clients() == 0)
        # never reads: a small receive buffer, and large updates; its writer times out
        q = socket.socket()
        q.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        q.connect(("127.0.0.1", d.port))
        q.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        _wait(lambda: srv.clients() >= 1)
        big = {"pad": "x" * 1_000_000}
        deadline = time.monotonic() + 60
        while srv.clients() and time.monotonic() < deadline:  # until the socket's buffers fill
            srv.publish(big)  # never waits: the client's queue drops instead
            time.sleep(0.05)
        assert srv.clients() == 0
        _wait(lambda: not _handlers())  # the threads that served them have ended
        q.close()


@pytest.mark.thread_unsafe(reason="patches the server's timeout; counts its connections")
def test_connections_are_bounded_and_idle_ones_time_out(monkeypatch):
    with tg.Scheduler(1) as s, dashboard(s) as d:
        monkeypatch.setattr(_server._Handler, "timeout", 60.0)
        socks = [socket.create_connection(("127.0.0.1", d.port), timeout=30)
                 for _ in range(_server.MAX_CONNECTIONS + 4)]
        try:  # every slot is taken by a silent client: one more is refused at once
            extra = socket.create_connection(("127.0.0.1", d.port), timeout=30)
            extra.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert extra.recv(100).startswith(b"HTTP/1.1 503")
            extra.close()
        finally:
            for c in socks:
                c.close()
        _wait(lambda: get(d, "/")[0] == 200)  # their threads ended with them
        monkeypatch.setattr(_server._Handler, "timeout", 1.0)
        silent = socket.create_connection(("127.0.0.1", d.port), timeout=60)
        assert silent.recv(100) == b""  # a client that says nothing is hung up on
        silent.close()


def test_closing_closes_the_port_and_the_scheduler_closes_its_dashboard():
    with tg.Scheduler(1) as s:
        d = dashboard(s)
        port = d.port
        assert get(d, "/")[0] == 200
        d.close()
        d.close()  # idempotent
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=10)
        d = dashboard(s)
        port = d.port
    assert d.closed  # closing the scheduler closed its dashboard, and its port
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=10)
    assert "closed" in repr(d) and "closed" in d._repr_html_()


def test_a_notebook_shows_a_link_and_the_page():
    with tg.Scheduler(1) as s, dashboard(s) as d:
        h = d._repr_html_()
    assert f'href="{d.url}"' in h and f'<iframe src="{d.url}"' in h


def test_tasks_run_by_spare_workers_are_shown_on_the_spares_lane():
    release = threading.Event()

    @tg.task
    def waits(i):
        with tg.blocking():
            release.wait(30)
        return i

    with tg.Scheduler(2, spares=4) as s, dashboard(s) as d:
        nodes = [waits(i) for i in range(6)]
        fut = threading.Thread(target=lambda: s.compute(nodes))
        fut.start()
        lane = f"s{s.number}.spares"

        def spares(st):
            return [l for l in st["lanes"] if l["name"] == lane]

        # on duty first, then each spare takes a task: wait until all four run one
        st = wait_for(d, lambda st: sum(len(l["running"]) for l in spares(st)) == 4, timeout=30)
        assert s.spare_stats()["on_duty"] == 4
        assert len(spares(st)) == 1 and not spares(st)[0]["idle"] and len(spares(st)[0]["running"]) == 4
        release.set()
        fut.join(30)
        st = state(d)
    assert progress(st)["waits"]["done"] == 6  # those the spares ran are counted too
    assert tasks_in_stream(st, {f"s{s.number}.spares"}) == 4


# ---------------------------------------------------------------------- bounds
@pytest.mark.thread_unsafe(reason="patches the model's bounds")
def test_the_state_is_bounded_however_many_tasks_and_names(monkeypatch):
    monkeypatch.setattr(_model, "MAX_ITEMS", 50)
    monkeypatch.setattr(_model, "MAX_BUCKETS", 80)
    monkeypatch.setattr(_model, "MAX_NAMES", 30)
    names = [tg.task(lambda i: i, name=f"t{k}") for k in range(60)]

    @tg.task
    def slow(i):
        time.sleep(0.011)

    with tg.Scheduler(2) as s, dashboard(s, window=1.0) as d:
        for k in range(3):
            s.compute([slow(i) for i in range(60)])
            s.compute([t(i) for t in names for i in range(30)])
            d.model.tick()
        st = state(d)
        assert len(d.model.items) <= 50 and len(d.model.buckets) <= 80
        assert len(st["names"]) <= 30
        assert sum(r[1] for r in st["progress"]) == 3 * (60 + 60 * 30)  # counted all the same
        horizon = st["now"] - st["window"]
        assert all(it[2] >= horizon for it in st["items"])


def test_the_rings_drop_rather_than_block_when_the_reader_lags():
    """No drain for a while: each worker's ring holds 131,072 records; the rest of the stream is
    dropped and counted, the workers never wait, and the counts per name lose nothing."""
    @tg.task
    def tiny(i):
        return i

    with tg.Scheduler(1) as s, dashboard(s) as d:
        d.model._stop.set()  # the sampler stops: nobody drains
        d.model._thread.join()
        n = 140_000
        s.compute([tiny(i) for i in range(n)])
        st = state(d)
        assert st["lanes"][0]["dropped"] == n - _model.RING
        assert progress(st)["tiny"]["done"] == n
        assert tasks_in_stream(st) == _model.RING
        s.compute([tiny(i) for i in range(10)])  # the ring has room again
        st = state(d)
        gap = [it for it in st["items"] if it[3] == -2]  # where the dropped records were
        assert len(gap) == 1 and gap[0][2] >= gap[0][1]
        assert progress(st)["tiny"]["done"] == n + 10


# ---------------------------------------------------------------------- traces and the CLI
@pytest.mark.thread_unsafe(reason="a trace records every scheduler; blocks cannot overlap")
def test_a_trace_that_closes_shows_with_its_summary_picture_and_file(tmp_path):
    with tg.Scheduler(2) as s, dashboard(s) as d:
        with tg.trace() as tr:
            s.compute(fib(14, 4))
        st = state(d)
        (t,) = st["traces"]
        assert t["tasks"] == len(tr) == fib_calls(14, 4)
        status, _, body = get(d, f"/api/trace/{t['id']}")
        info = json.loads(body)
        assert status == 200 and info["tasks"] == len(tr) and info["work_ms"] > 0
        assert abs(info["span_ms"] * 1e6 - tr.span) < 1e3 and info["parallelism"] >= 1
        status, headers, body = get(d, f"/trace/{t['id']}.tgtrace")
        assert status == 200 and "attachment" in headers["Content-Disposition"]
        (tmp_path / "t.tgtrace").write_bytes(body)
        assert len(tg.Trace.load(tmp_path / "t.tgtrace")) == len(tr)
        status, headers, body = get(d, f"/trace/{t['id']}.svg")
        if status == 200:
            assert headers["Content-Type"] == "image/svg+xml" and b"<svg" in body
        else:
            assert b"Graphviz" in body


def test_the_command_runs_a_script_with_the_dashboard_open(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("import sys, taskgraph as tg\n"
                      "from taskgraph.dashboard import live\n"
                      "f = tg.task(lambda n: n, name='job')\n"
                      "print(tg.compute([f(i) for i in range(10)])[-1], sys.argv[1:])\n"
                      "(d,) = live._open\n"
                      "d.model.tick()\n"
                      "print('done', dict((d.snapshot()['names'][r[0]], r[1]) for r in d.snapshot()['progress']))\n"
                      "sys.exit(3)\n")
    p = subprocess.run([sys.executable, "-m", "taskgraph", "dashboard", str(script), "a", "--b"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr
    assert "taskgraph dashboard: http://127.0.0.1:" in p.stderr
    assert "9 ['a', '--b']" in p.stdout and "'job': 10" in p.stdout


def test_the_gil_stays_off_with_a_dashboard_serving():
    r = run_script("""
        import sys, urllib.request, taskgraph as tg
        with tg.dashboard() as d:
            tg.compute([tg.task(lambda i: i, name='x')(i) for i in range(100)])
            urllib.request.urlopen(d.url).read()
        print(tg.gil_enabled())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(tg.gil_enabled())  # False on a free-threaded interpreter

"""Free-threaded CPython alone, no taskgraph: two long-lived threads make reference cycles
that hold exceptions (an exception's traceback holds the frame whose list holds the
exception), and the main thread's gc.collect() frees them. RSS grows round after round while
sys.getallocatedblocks() stays flat: the allocator keeps the pages. This is the RSS growth
seen in benchmarks/memory.py's soak (docs/reliability.md); run it to see it without taskgraph.

    python benchmarks/rss_cycles.py [rounds]
"""
import gc
import sys
import threading


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024


class Boom(Exception):
    pass


class Holder:
    __slots__ = ("value",)


def fail(i):
    raise Boom(i)


def work(n):
    """n holders; one in ten holds an exception whose traceback holds this frame: a cycle."""
    held = [Holder() for _ in range(n)]
    for i, h in enumerate(held):
        if i % 10 == 0:
            try:
                fail(i)
            except Boom as e:
                h.value = e
        else:
            h.value = i


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    go, done = threading.Barrier(3), threading.Barrier(3)

    def worker():
        for _ in range(rounds):
            go.wait()
            for _ in range(50):
                work(1000)
            done.wait()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    print(f"Python {sys.version.split()[0]}; round, RSS MB, allocated blocks")
    for r in range(rounds):
        go.wait()
        done.wait()
        gc.collect()
        if r % 10 == 9:
            print(f"{r + 1:5d} {rss_mb():8.1f} {sys.getallocatedblocks():10,d}", flush=True)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()

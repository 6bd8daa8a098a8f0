"""A real DAG: map-reduce word count over generated text, with fan-out and fan-in.

    python examples/pipeline.py --docs 400 --words 5000 --workers 2

Graph: generate each document (fan-out) -> count its words -> merge counts pairwise in a
binary tree (fan-in) -> top 10 words. Built lazily outside the workers, then computed in
one go. Checks the counts against a serial collections.Counter over the same text and prints
the time and the speed-up over the serial version.
"""
import argparse
import collections
import random
import time

import taskgraph as tg

VOCAB = [f"w{i}" for i in range(2000)]


def make_doc(seed, words):
    rnd = random.Random(seed)
    # Zipf-like: low-numbered words are much more frequent.
    return " ".join(VOCAB[min(int(rnd.paretovariate(1.2)) - 1, len(VOCAB) - 1)] for _ in range(words))


def count_words(text):
    return collections.Counter(text.split())


def merge(a, b):
    c = collections.Counter(a)
    c.update(b)
    return c


def top(counts, k=10):
    return counts.most_common(k)


generate_t = tg.task(make_doc, name="generate")
count_t = tg.task(count_words, name="count")
merge_t = tg.task(merge, name="merge")
top_t = tg.task(top, name="top")


def build(docs, words):
    """The lazy graph: returns (top-10 node, total-counts node)."""
    level = [count_t(generate_t(seed, words)) for seed in range(docs)]
    while len(level) > 1:  # pairwise fan-in
        nxt = [merge_t(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    total = level[0]
    return top_t(total), total


def serial(docs, words):
    c = collections.Counter()
    for seed in range(docs):
        c.update(count_words(make_doc(seed, words)))
    return top(c), c


def run(docs=400, words=5000, workers=None, scheduler=None):
    """The word count serially and with taskgraph: returns both results and the times.
    `scheduler` (e.g. a taskgraph.dask.DaskScheduler) runs it there instead of locally."""
    t0 = time.perf_counter()
    expect_top, expect_counts = serial(docs, words)
    t_serial = time.perf_counter() - t0
    top_node, total_node = build(docs, words)
    with (tg.Scheduler(workers=workers) if scheduler is None else tg.use_scheduler(scheduler)) as s:
        t0 = time.perf_counter()
        got_top, got_counts = s.compute(top_node, total_node)
        t_par = time.perf_counter() - t0
    return {"top": got_top, "counts": got_counts, "expected_top": expect_top,
            "expected_counts": expect_counts, "serial_s": t_serial, "taskgraph_s": t_par,
            "speedup": t_serial / t_par, "workers": getattr(s, "workers", None), "tasks": 3 * docs}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=400)
    p.add_argument("--words", type=int, default=5000)
    p.add_argument("--workers", type=int, default=tg.usable_cpus())
    a = p.parse_args(argv)
    r = run(a.docs, a.words, a.workers)
    if r["counts"] != r["expected_counts"] or r["top"] != r["expected_top"]:
        raise SystemExit("WRONG: word counts differ from the serial count")
    print(f"word count over {a.docs} docs x {a.words} words  OK   {a.workers} workers")
    print(f"  top words: {', '.join(f'{w}:{n}' for w, n in r['top'][:5])} ...")
    print(f"  serial {r['serial_s']:.3f} s, taskgraph {r['taskgraph_s']:.3f} s, speed-up "
          f"{r['speedup']:.2f}x  ({r['tasks']} tasks)")


if __name__ == "__main__":
    main()

"""CPython's own concurrent.futures tests, run against taskgraph.Executor.

The interpreter's test package (Lib/test/test_concurrent_futures) writes its executor tests
as mixins over an ``executor_type``: ExecutorTest (submit, map, references, exceptions),
WaitTests (concurrent.futures.wait), AsCompletedTests (as_completed), ExecutorShutdownTest
(shutdown, cancel_futures, the context manager), InitializerMixin and FailingInitializerMixin
(an initializer that runs, one that fails: the executor breaks). They are imported here, never copied, and
combined with a mixin whose executor_type is taskgraph.Executor; pytest collects the
resulting unittest classes. A few ThreadPoolExecutor-only tests that fit any thread-based
executor are borrowed by name (below).

Skipped, with the reason beside each: only the tests that start a subprocess running
``from concurrent.futures import <executor_type.__name__>``: for taskgraph.Executor that
name is ``Executor``, which in concurrent.futures is the abstract base class, so the
subprocess would test something else. tests/test_executor_exit.py runs the same checks
(pending work finishes at exit, submit after interpreter shutdown, shutdown(wait=False) at
exit) with taskgraph.Executor.

Where the interpreter's ``test`` package lacks test_concurrent_futures (some builds ship
without the test suite, e.g. this project's CPython 3.11), the module is skipped, saying so.
"""
import threading
import unittest

import pytest

import taskgraph as tg

try:
    from test.test_concurrent_futures import executor as cf_executor  # noqa: I001
    from test.test_concurrent_futures import test_as_completed as cf_as_completed
    from test.test_concurrent_futures import test_init as cf_init
    from test.test_concurrent_futures import test_shutdown as cf_shutdown
    from test.test_concurrent_futures import test_thread_pool as cf_thread_pool
    from test.test_concurrent_futures import test_wait as cf_wait
    from test.test_concurrent_futures import util as cf_util
except ImportError as e:  # the interpreter was installed without its test suite
    pytest.skip(f"this interpreter's test package has no test_concurrent_futures ({e})",
                allow_module_level=True)

# The mixins keep the executor on the TestCase and count the process's threads: one thread
# at a time (make test-parallel runs them once).
pytestmark = pytest.mark.thread_unsafe(reason="unittest mixins sharing one executor per "
                                       "TestCase and counting threads")

BY_NAME = ("starts a subprocess that runs `from concurrent.futures import "
           "<executor_type.__name__>`: for taskgraph.Executor that imports the abstract "
           "concurrent.futures.Executor, not ours; tests/test_executor_exit.py checks the same "
           "with taskgraph.Executor")


class TaskgraphMixin(cf_util.ExecutorMixin):
    """ThreadPoolMixin's counterpart: the executor under test is taskgraph.Executor."""
    executor_type = tg.Executor

    def create_event(self):
        return threading.Event()


class TaskgraphExecutorTest(TaskgraphMixin, cf_executor.ExecutorTest, cf_util.BaseTestCase):
    # ThreadPoolExecutorTest's tests that hold for any thread-based executor (the others
    # count ThreadPoolExecutor's private _threads, or its default of cpu_count + 4 workers,
    # or use ThreadPoolExecutor by name).
    test_map_submits_without_iteration = \
        cf_thread_pool.ThreadPoolExecutorTest.test_map_submits_without_iteration
    test_executor_map_current_future_cancel = \
        cf_thread_pool.ThreadPoolExecutorTest.test_executor_map_current_future_cancel


class TaskgraphWaitTest(TaskgraphMixin, cf_wait.WaitTests, cf_util.BaseTestCase):
    test_pending_calls_race = cf_wait.ThreadPoolWaitTests.test_pending_calls_race


class TaskgraphAsCompletedTest(TaskgraphMixin, cf_as_completed.AsCompletedTests,
                               cf_util.BaseTestCase):
    pass


class TaskgraphShutdownTest(TaskgraphMixin, cf_shutdown.ExecutorShutdownTest,
                            cf_util.BaseTestCase):
    @unittest.skip(BY_NAME)
    def test_interpreter_shutdown(self):
        pass

    @unittest.skip(BY_NAME)
    def test_submit_after_interpreter_shutdown(self):
        pass

    @unittest.skip(BY_NAME)
    def test_hang_gh83386(self):
        pass

    def test_cancel_futures(self):
        # CPython's test asserts that of 50 calls submitted right before shutdown(
        # cancel_futures=True), at least one had started: a worker woken by the first submit
        # got a core within those 50 submits. On a loaded machine none may have (a fresh-clone
        # CI beside two others saw 0; ThreadPoolExecutor's idle threads, blocked on its queue,
        # wake no faster). That outcome alone is run again on a fresh executor, twice at most;
        # every other failure, or that one three times in a row, fails the test.
        for attempt in range(3):
            try:
                return super().test_cancel_futures()
            except AssertionError as e:
                if attempt == 2 or str(e) != "0 not greater than 0":
                    raise
            self.tearDown()
            self.setUp()


class TaskgraphInitializerTest(TaskgraphMixin, cf_init.InitializerMixin, cf_util.BaseTestCase):
    pass


class TaskgraphFailingInitializerTest(TaskgraphMixin, cf_init.FailingInitializerMixin,
                                      cf_util.BaseTestCase):
    pass


def setUpModule():
    cf_util.setup_module()

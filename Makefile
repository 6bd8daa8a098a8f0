# taskgraph: `make demo` and `make test` do all set-up themselves (see README.md).
SHELL := /bin/bash
# The interpreters (make setup): .venv is free-threaded 3.14t, the one users run and the one
# every figure is judged on; .venv-313t is free-threaded 3.13t; .venv-gil the GIL build (3.11).
VENV  := .venv
PY    := $(VENV)/bin/python
PY313 := .venv-313t/bin/python
GILPY := .venv-gil/bin/python
REPORTPY := $(shell [ -x .venv-gil/bin/python ] && echo .venv-gil/bin/python || echo .venv/bin/python)
CC    ?= gcc
CFLAGS_COMMON := -std=c11 -Wall -Wextra -Werror -pthread -Icsrc -DTG_TEST_HOOKS
CSRCS := $(wildcard csrc/*.c)
CTESTS := deque injector graph pool joinwait sleep steal oom contend live spare
# test_oom fails the core's allocations in turn: it is linked with --wrap for the allocators.
WRAP_OOM := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc
linkflags = $$( [ $$t = oom ] && echo '$(WRAP_OOM)' )
BUILD := build

.PHONY: setup dist test test-c sanitize sanitize-thread sanitize-address test-py test-py-313t test-dask test-core test-parallel test-gil test-asan demo pictures bench bench-deps bench-quick clean

setup:
	@bash tools/setup.sh

test: setup
	@$(MAKE) --no-print-directory test-c
	@$(MAKE) --no-print-directory sanitize
	@$(MAKE) --no-print-directory test-py
	@$(MAKE) --no-print-directory test-py-313t
	@$(MAKE) --no-print-directory test-dask
	@$(MAKE) --no-print-directory test-core
	@$(MAKE) --no-print-directory test-parallel
	@$(MAKE) --no-print-directory test-gil
	@$(MAKE) --no-print-directory test-asan

$(BUILD):
	@mkdir -p $(BUILD)

# The C tests, built and run one way: $(call c_tests,PREFIX,CFLAGS,WHAT,ENV,TIMEOUT) compiles
# each of CTESTS with CFLAGS into build/PREFIX_<test>, then runs it with ENV set.
define c_tests
	@for t in $(CTESTS); do \
	  $(CC) $(2) $(CFLAGS_COMMON) $(CSRCS) csrc/tests/test_$$t.c $(linkflags) -o $(BUILD)/$(1)_$$t || exit 1; \
	  echo "== C test $$t $(3)"; \
	  $(4) timeout $(5) ./$(BUILD)/$(1)_$$t || exit 1; \
	done
endef
# The sanitizer runs: the tests scale their sizes down under TASKGRAPH_SANITIZED (the same
# variable tools/asan.sh sets for the Python tests).
TSAN_FLAGS := -O1 -g -fsanitize=thread
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
TSAN_ENV := TASKGRAPH_SANITIZED=1 TSAN_OPTIONS="halt_on_error=1 exitcode=66"
ASAN_ENV := TASKGRAPH_SANITIZED=1 ASAN_OPTIONS="halt_on_error=1 detect_leaks=1" UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1"

# Plain optimised build of the C tests.
test-c: | $(BUILD)
	$(call c_tests,test,-O2,(plain -O2),,300)

sanitize: sanitize-thread sanitize-address

# ThreadSanitizer: any report makes the run fail (exitcode 66); no suppressions.
sanitize-thread: | $(BUILD)
	$(call c_tests,tsan,$(TSAN_FLAGS),under ThreadSanitizer,$(TSAN_ENV),900)

# AddressSanitizer + UndefinedBehaviorSanitizer (leak checking included); any report fails.
sanitize-address: | $(BUILD)
	$(call c_tests,asan,$(ASAN_FLAGS),under AddressSanitizer+UBSan,$(ASAN_ENV),900)

# Python tests on the free-threaded interpreter (GIL off): the plain venv interpreter, no
# flag, no PYTHON_GIL. tests/core is left out there (see test-core); the session fails if the
# GIL was turned on during it (tests/conftest.py). $(call py_tests,PYTHON) runs them.
define py_tests
	@echo "== Python tests, free-threaded ($$($(1) -c 'import sys; print(sys.version.split()[0], "GIL enabled:", sys._is_gil_enabled())'))"
	@TASKGRAPH_REQUIRE_DASK=1 $(1) -m pytest -q -rs -p no:cacheprovider
endef
test-py:
	$(call py_tests,$(PY))

# The same on free-threaded 3.13t, where make setup could make its venv.
test-py-313t:
	@if [ -x $(PY313) ]; then $(MAKE) --no-print-directory PY=$(PY313) test-py; \
	else echo "== no free-threaded CPython 3.13 on this machine: 3.13t run skipped"; fi

# dask's own tests (delayed, local, array core, dataframe; not those dask marks slow: about
# 1,200, a minute or two) from the installed dask's test files, with taskgraph.dask.get as
# the scheduler (tools/dask_suite.py), on free-threaded 3.14t, where pandas and pyarrow have
# wheels: taskgraph.dask.get passes them wherever dask's threaded scheduler does.
test-dask:
	@echo "== dask's own tests with scheduler=taskgraph.dask.get ($$($(PY) -V))"
	@$(PY) tools/dask_suite.py

# The checks of the C core driven from Python (tests/core): a test-only cffi binding compiled
# from csrc/ in cffi's API mode against the real headers, its declarations read from them
# (tests/core/_binding.py; built once into build/cffi-core-<interpreter>/). cffi 2 supports
# free-threaded 3.14 (and keeps the GIL off); it refuses 3.13t, where cffi 1.17 would turn the
# GIL on, so they run on 3.14t and on the GIL build.
test-core:
	@echo "== C core through the test-only cffi binding, free-threaded ($$($(PY) -V))"
	@TASKGRAPH_CORE_SESSION=1 $(PY) -m pytest -q -p no:cacheprovider tests/core
	@if [ -x $(GILPY) ]; then \
	  echo "== C core through the test-only cffi binding, GIL build ($$($(GILPY) -V))"; \
	  $(GILPY) -m pytest -q -p no:cacheprovider tests/core; \
	fi

# The same tests again, each run by 4 threads at once (pytest-run-parallel), free-threaded:
# races between computes, schedulers and nodes of different threads. Tests marked
# thread_unsafe (process-wide state: traces, injected faults, Ctrl-C, object counts) run once;
# the load test's stress phase is shortened (test-py ran it in full).
test-parallel:
	@echo "== Python tests, free-threaded, 4 threads per test (pytest-run-parallel)"
	@TASKGRAPH_STRESS_SECONDS=5 TASKGRAPH_REQUIRE_DASK=1 $(PY) -m pytest -q -p no:cacheprovider --parallel-threads=4

# The same Python tests on the machine's ordinary GIL build (correctness only).
test-gil:
	@if [ -x $(GILPY) ]; then \
	  echo "== Python tests, GIL build ($$($(GILPY) -V))"; \
	  TASKGRAPH_REQUIRE_DASK=1 $(GILPY) -m pytest -q -rs -p no:cacheprovider; \
	else echo "== no GIL-build CPython on this machine: GIL-build run skipped"; fi

# The Python tests against an AddressSanitizer+UBSan build of the extension, on both
# interpreters (tools/asan.sh says what each run can catch).
test-asan:
	@bash tools/asan.sh .venv
	@if [ -x $(GILPY) ]; then bash tools/asan.sh .venv-gil; fi

# The sdist and the wheels, as published: `python -m build` (an isolated build, setuptools
# from the package index) from the 3.14t venv builds the sdist, then the cp314t wheel from it;
# pip builds the cp313t wheel and the GIL build's wheel from the same sdist.
dist: setup
	@rm -rf dist && $(PY) -m build --outdir dist .
	@for py in $(PY313) $(GILPY); do \
	  if [ -x $$py ]; then $$py -m pip wheel -q --no-deps --wheel-dir dist dist/*.tar.gz || exit 1; fi; \
	done
	@ls -l dist

demo: setup
	@$(PY) examples/fib.py --trace build/demo/fib
	@$(PY) examples/quicksort.py --trace build/demo/quicksort
	@$(PY) examples/pipeline.py

# The executed-graph picture shown in README.md (committed; regenerate with this target): drawn
# by running the README's first block, the code shown beside it.
pictures: setup
	@$(PY) tools/readme_picture.py

# The peers of the suite (the `bench` extra) into both free-threaded venvs; matplotlib for the
# plots into the GIL build's.
bench-deps: setup
	@for py in $(PY) $(PY313); do \
	  [ -x $$py ] || continue; \
	  $$py -m pip install -q --disable-pip-version-check "joblib>=1.4" "dask>=2024.8" >/dev/null 2>&1 \
	    || { echo "could not install joblib/dask into $$py"; exit 1; }; \
	done
	@if [ -x $(GILPY) ]; then $(GILPY) -m pip install -q --disable-pip-version-check "matplotlib>=3.7" >/dev/null 2>&1 || echo "matplotlib not installed: no plot"; fi

# The benchmarks (docs/benchmarks.md). $(call bench_run,DIR,FLAGS,REPORT-ARGS): the speed
# benchmarks on 3.14t into DIR and on 3.13t into DIR/313t, one benchmark on both before the next
# (benchmarks/run_speed.py; the 3.13t pass is skipped, with a message, where make setup could
# not make .venv-313t); the suite's GIL subset on the GIL build; the reliability and memory
# figures (docs/reliability.md) on 3.14t; then report.py writes the page's generated section,
# the plots and DIR/latest.json. The code is compiled to .pyc first by each interpreter and run
# from it, as a program runs from its second run on: 3.13t leaves the constants of code compiled
# from source at import mortal (docs/performance.md, section 5), which a machine with
# PYTHONDONTWRITEBYTECODE set would otherwise measure.
define bench_run
	@mkdir -p $(1)
	@for py in $(PY) $(PY313); do \
	  if [ -x $$py ]; then $$py -m compileall -q benchmarks examples taskgraph || exit 1; fi; \
	done
	@if [ -x $(PY313) ]; then $(PY) benchmarks/run_speed.py $(2) $(PY)=$(1) $(PY313)=$(1)/313t; \
	else echo "== no .venv-313t (make setup found no free-threaded CPython 3.13): the 3.13t pass is skipped"; \
	  $(PY) benchmarks/run_speed.py $(2) $(PY)=$(1); fi
	@if [ -x $(GILPY) ]; then $(GILPY) -W ignore benchmarks/suite.py $(2) --gil-subset --out $(1)/gil.json; fi
	@$(PY) benchmarks/reliability.py $(2) --out $(1)/reliability.json
	@$(PY) benchmarks/memory.py $(2) --out $(1)/memory.json
	@$(REPORTPY) benchmarks/report.py --results $(1) $$([ -x $(PY313) ] && echo --results-313t $(1)/313t) $(3)
endef

# The full run: results in benchmarks/results/, the generated section of docs/benchmarks.md.
bench: bench-deps
	$(call bench_run,benchmarks/results,,)

# The same with small sizes, into build/bench-quick/ (its page: build/bench-quick/benchmarks.md;
# docs/benchmarks.md is written by the full run only).
bench-quick: bench-deps
	$(call bench_run,build/bench-quick,--quick,--doc build/bench-quick/benchmarks.md)
	@echo "quick results in build/bench-quick/, its page build/bench-quick/benchmarks.md"

clean:
	rm -rf $(BUILD) taskgraph/_core*.so taskgraph/*.o

# taskgraph: `make demo` and `make test` do all set-up themselves (see README.md).
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
GILPY := .venv-gil/bin/python
REPORTPY := $(shell [ -x .venv-gil/bin/python ] && echo .venv-gil/bin/python || echo .venv/bin/python)
CC    ?= gcc
CFLAGS_COMMON := -std=c11 -Wall -Wextra -Werror -pthread -Icsrc -DTG_TEST_HOOKS
CSRCS := $(wildcard csrc/*.c)
CTESTS := deque injector graph pool sleep steal oom contend
# test_oom fails the core's allocations in turn: it is linked with --wrap for the allocators.
WRAP_OOM := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc
linkflags = $$( [ $$t = oom ] && echo '$(WRAP_OOM)' )
BUILD := build

.PHONY: setup dist test test-c sanitize sanitize-thread sanitize-address test-py test-core test-parallel test-gil test-asan demo pictures bench bench-deps bench-quick clean

setup:
	@bash tools/setup.sh

test: setup
	@$(MAKE) --no-print-directory test-c
	@$(MAKE) --no-print-directory sanitize
	@$(MAKE) --no-print-directory test-py
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
# GIL was turned on during it (tests/conftest.py).
test-py:
	@echo "== Python tests, free-threaded ($$($(PY) -c 'import sys; print(sys.version.split()[0], "GIL enabled:", sys._is_gil_enabled())'))"
	@TASKGRAPH_REQUIRE_DASK=1 $(PY) -m pytest -q -rs -p no:cacheprovider

# The checks of the C core driven from Python (tests/core): a test-only cffi binding compiled
# from csrc/ in cffi's API mode against the real headers, its declarations read from them
# (tests/core/_binding.py; built once into build/cffi-core-<interpreter>/). Importing cffi
# 1.17 turns the GIL on in 3.13t unless it is forced off, so on the free-threaded interpreter
# they run in a session of their own with -X gil=0; then on the GIL build.
test-core:
	@echo "== C core through the test-only cffi binding, free-threaded (-X gil=0)"
	@$(PY) -X gil=0 -m pytest -q -p no:cacheprovider tests/core
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
# from the package index) from the free-threaded venv builds the sdist, then the
# free-threaded wheel from it; pip builds the GIL build's wheel from the same sdist.
dist: setup
	@rm -rf dist && $(PY) -m build --outdir dist .
	@if [ -x $(GILPY) ]; then $(GILPY) -m pip wheel -q --no-deps --wheel-dir dist dist/*.tar.gz; fi
	@ls -l dist

demo: setup
	@$(PY) examples/fib.py --trace build/demo/fib
	@$(PY) examples/quicksort.py --trace build/demo/quicksort
	@$(PY) examples/pipeline.py

# The executed-graph picture shown in README.md (committed; regenerate with this target): drawn
# by running the README's first block, the code shown beside it.
pictures: setup
	@$(PY) tools/readme_picture.py

bench-deps: setup
	@$(PY) -m pip install -q --disable-pip-version-check "joblib>=1.4" "dask>=2024.8" >/dev/null 2>&1 || { echo "could not install joblib/dask"; exit 1; }
	@if [ -x $(GILPY) ]; then $(GILPY) -m pip install -q --disable-pip-version-check "matplotlib>=3.7" >/dev/null 2>&1 || echo "matplotlib not installed: no plot"; fi

# The benchmarks (docs/benchmarks.md): the suite against peers, the per-task targets, the
# instruction counts (valgrind), the dask backend, then the report; the reliability and
# memory figures (docs/reliability.md); predicted against measured speed-up and work inflation
# (docs/benchmarks.md, docs/performance.md). Results: benchmarks/results/. The code is
# compiled to .pyc first and run from it, as a program runs from its second run on: 3.13t
# leaves the constants of code compiled from source at import mortal (docs/performance.md,
# section 5), which a machine with PYTHONDONTWRITEBYTECODE set would otherwise measure.
BYTECODE := $(PY) -m compileall -q benchmarks examples taskgraph
bench: bench-deps
	@mkdir -p benchmarks/results
	@$(BYTECODE)
	@$(PY) benchmarks/suite.py --out benchmarks/results/ft.json
	@if [ -x $(GILPY) ]; then $(GILPY) -W ignore benchmarks/suite.py --gil-subset --out benchmarks/results/gil.json; fi
	@$(PY) benchmarks/per_task.py --out benchmarks/results/per_task.json
	@$(PY) benchmarks/instructions.py --out benchmarks/results/instructions.json || echo "no instruction counts"
	@$(PY) benchmarks/dask_overhead.py --out benchmarks/results/dask.json
	@$(PY) benchmarks/dask_get.py --out benchmarks/results/dask_get.json
	@$(PY) benchmarks/reliability.py --out benchmarks/results/reliability.json
	@$(PY) benchmarks/memory.py --out benchmarks/results/memory.json
	@$(PY) benchmarks/map_fanout.py --out benchmarks/results/map_fanout.json
	@$(PY) benchmarks/shapes.py --out benchmarks/results/shapes.json
	@$(PY) benchmarks/predict.py --out benchmarks/results/predict.json
	@$(PY) benchmarks/inflation.py --out benchmarks/results/inflation.json
	@$(PY) benchmarks/executor.py --instructions --out benchmarks/results/executor.json
	@$(REPORTPY) benchmarks/report.py --suite benchmarks/results/ft.json --gil benchmarks/results/gil.json \
	  --per-task benchmarks/results/per_task.json --instructions benchmarks/results/instructions.json \
	  --dask benchmarks/results/dask.json --map benchmarks/results/map_fanout.json \
	  --shapes benchmarks/results/shapes.json --executor benchmarks/results/executor.json \
	  --dask-get benchmarks/results/dask_get.json

bench-quick: bench-deps
	@mkdir -p build/bench-quick
	@$(BYTECODE)
	@$(PY) benchmarks/suite.py --quick --out build/bench-quick/ft.json
	@if [ -x $(GILPY) ]; then $(GILPY) -W ignore benchmarks/suite.py --quick --gil-subset --out build/bench-quick/gil.json; fi
	@$(PY) benchmarks/per_task.py --quick --out build/bench-quick/per_task.json
	@$(PY) benchmarks/dask_overhead.py --quick --out build/bench-quick/dask.json
	@$(PY) benchmarks/dask_get.py --quick --out build/bench-quick/dask_get.json
	@$(PY) benchmarks/reliability.py --quick --out build/bench-quick/reliability.json
	@$(PY) benchmarks/memory.py --quick --out build/bench-quick/memory.json
	@$(PY) benchmarks/map_fanout.py --quick --out build/bench-quick/map_fanout.json
	@$(PY) benchmarks/shapes.py --quick --out build/bench-quick/shapes.json
	@$(PY) benchmarks/predict.py --quick --out build/bench-quick/predict.json
	@$(PY) benchmarks/inflation.py --quick --out build/bench-quick/inflation.json
	@$(PY) benchmarks/executor.py --quick --out build/bench-quick/executor.json
	@echo "quick results in build/bench-quick/ (docs/benchmarks.md is written by the full make bench)"

clean:
	rm -rf $(BUILD) taskgraph/_core*.so taskgraph/*.o

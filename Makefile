# One entry point for people and CI. `make demo` and `make test` each run `setup` first.
VENV        ?= .venv
PYTHON      ?= python3
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.installed-stamp

export PROBE_TEST_DATABASE_URL ?= postgresql+psycopg://postgres@127.0.0.1:5432/test
export PROBE_TEST_REDIS_URL    ?= redis://127.0.0.1:6379/0
# Bytecode is cached (in the ignored __pycache__ directories) even where the shell turns it off:
# without it every face, CLI and worker subprocess a test starts compiles the whole package
# again, about 0.5 s of CPU each, and pytest rewrites every test module once per worker.
unexport PYTHONDONTWRITEBYTECODE
# 1,000 sandboxed probes take ~6 minutes on 2 cores; `make bench QUEUE_BENCH_PROBES=200` is quicker.
QUEUE_BENCH_PROBES ?= 1000
BENCH_ARGS ?=
# The files holding property tests and state machines (`make explore`).
EXPLORE_TESTS ?= tests/claims/test_state_machine.py tests/claims/test_globs.py \
	tests/plans/test_models.py tests/plans/test_receipts.py tests/snapshot/test_materialize.py

.PHONY: setup system-packages sandbox-runtime demo test quick security explore lint imports typecheck check bench bench-detail clean

setup: system-packages $(STAMP) sandbox-runtime
	@$(PY) -m compileall -q probe_service
	@$(PY) -m probe_service.sandbox

system-packages:
	@bash scripts/setup-system.sh

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

sandbox-runtime:
	@bash scripts/setup-sandbox.sh

demo: setup
	$(VENV)/bin/byte-probe demo

# Everything, in two passes: the tests that may share the machine on TEST_WORKERS processes
# (pytest-xdist; each owns its store, namespace, slot and run directory), then the `exclusive`
# ones -- the attacks that fill or read host-wide kernel tables, the test-host network -- one
# at a time with nothing beside them. Both passes always run; the status is non-zero if either failed.
TEST_WORKERS ?= 3
test: setup
	@status=0; \
	$(PY) -m pytest -m "not exclusive" -n $(TEST_WORKERS) || status=$$?; \
	$(PY) -m pytest -m exclusive || status=$$?; \
	exit $$status

# The quick loop: everything but the tests marked `slow` (attacks, farms, state machines, crashes),
# on three processes (pytest-xdist; a third fills the cores while the others wait on runs and
# subprocesses). Every `exclusive` test is also `slow`, so the quick loop never meets one.
QUICK_WORKERS ?= 3
quick: setup
	$(PY) -m pytest -m "not slow" -n $(QUICK_WORKERS)

# Containment suite, decoder fuzzers and crash injection, then one summary line (0 losses).
security: setup
	$(PY) scripts/security_summary.py

# Randomized property/state-machine runs looking for new failures (CI stays derandomized).
explore: setup
	HYPOTHESIS_PROFILE=explore $(PY) -m pytest $(EXPLORE_TESTS)

lint: setup
	$(VENV)/bin/ruff check probe_service tests benchmarks
	$(VENV)/bin/ruff format --check probe_service tests benchmarks

# The layers of docs/ARCHITECTURE.md ("Layers"): the import-linter contracts in pyproject.toml
# (tests/test_layers.py runs them too, so `make test` alone keeps them).
imports: setup
	$(VENV)/bin/lint-imports --no-cache

typecheck: setup
	$(VENV)/bin/mypy

check: lint imports typecheck test

# One table of ratios, side by side in one run, plus benchmarks/results/bench.{json,png}.
# `make bench BENCH_ARGS=--quick` takes a few minutes; the full run uses 10,000-file trees.
# The queue row queues 200 probes by default: BENCH_ARGS="--only bulk,queue --queued 1000" for the issue's 1,000.
bench: setup
	$(PY) benchmarks/bench.py $(BENCH_ARGS)

# The older per-area benchmarks, each printing its own lines.
bench-detail: setup
	$(PY) benchmarks/snapshot_bench.py
	$(PY) benchmarks/sandbox_bench.py
	$(PY) benchmarks/claims_bench.py
	$(PY) benchmarks/queue_bench.py --probes $(QUEUE_BENCH_PROBES)
	$(PY) benchmarks/faces_bench.py

clean:
	rm -rf $(VENV) sandbox/node_modules tsboundary/node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis

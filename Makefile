# One entry point for people and CI. `make demo` and `make test` each run `setup` first.
VENV        ?= .venv
PYTHON      ?= python3
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.installed-stamp

export PROBE_TEST_DATABASE_URL ?= postgresql+psycopg://postgres@127.0.0.1:5432/test
export PROBE_TEST_REDIS_URL    ?= redis://127.0.0.1:6379/0

.PHONY: setup system-packages sandbox-runtime demo test lint typecheck check bench clean

setup: system-packages $(STAMP) sandbox-runtime

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

test: setup
	$(PY) -m pytest

lint: setup
	$(VENV)/bin/ruff check probe_service tests benchmarks
	$(VENV)/bin/ruff format --check probe_service tests benchmarks

typecheck: setup
	$(VENV)/bin/mypy

check: lint typecheck test

bench: setup
	$(PY) benchmarks/snapshot_bench.py
	$(PY) benchmarks/queue_bench.py

clean:
	rm -rf $(VENV) sandbox/node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis

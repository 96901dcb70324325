# Developer entry points. Every target fails loudly; CI runs `make test` (see .ci/run).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
ARGS ?=
PYTEST_ARGS ?=
PORT ?= 6006
RUN ?= runs/latest

.PHONY: help setup profile test realworld live soak noise lint format tensorboard bench report browser clean clean-runs

help:
	@echo "make profile       set up on first use, then profile the default suite -> runs/<id>/"
	@echo "make profile FULL=1   the seeds' own step counts (1e5 steps for seed 000)"
	@echo "make test          the linters, then the whole test suite (TensorFlow, TensorBoard, Chromium)"
	@echo "make realworld     every public script of tests/realworld and tests/data/corpus, profiled with defaults; the table of verdicts against truths (~25 min)"
	@echo "make live          the recorded-run script tests again, each on a live run of its script (~4 min)"
	@echo "make soak          the default suite 3 times back to back, 4 runs at once into one --out (~20 min)"
	@echo "make noise         corpus scripts profiled quiet and beside a busy process: the same verdict (~15 min)"
	@echo "make tensorboard   TensorBoard on 127.0.0.1:$(PORT) over $(RUN)/tensorboard"
	@echo "make bench         overhead and prediction figures for this machine"
	@echo "make lint          ruff (lint + format check) and mypy"
	@echo "make clean         caches and build files (never runs/; that is 'make clean-runs')"

# The virtualenv, rebuilt when pyproject.toml changes.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m profiler setup
	@touch $(STAMP)

setup: $(STAMP)

# Debian's Chromium for the browser tests, installed when missing.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; }

profile: $(STAMP)
	$(PY) -m profiler run $(if $(FULL),--full) $(ARGS)

report: $(STAMP)
	$(PY) -m profiler report $(RUN)

# TensorBoard over the latest run's captures (profile plugin) and scalars, loopback only.
tensorboard: $(STAMP)
	@test -d $(RUN)/tensorboard || { echo "no $(RUN)/tensorboard: run 'make profile' first" >&2; exit 1; }
	$(PY) -m tensorboard.main --logdir $(RUN)/tensorboard --host 127.0.0.1 --port $(PORT)

realworld: $(STAMP) browser
	$(PY) -m pytest -m "realworld or not realworld" tests/test_realworld.py tests/test_corpus_truths.py $(PYTEST_ARGS)

# The script tests that read a recorded run by default (tests/data/recorded_scripts), each
# on a live run of its script: what the recordings stand for, measured again on this machine.
live: $(STAMP)
	$(PY) -m pytest -m "live" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

soak: $(STAMP) browser
	$(PY) -m pytest -m "soak or not soak" tests/test_soak.py $(PYTEST_ARGS)

# Each case profiled twice, quiet and beside a busy process (profiler/bench_noise.py's Busy):
# the same verdict and top category both times.
noise: $(STAMP)
	$(PY) -m pytest -m "noise" tests/test_noise.py $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m profiler.bench $(ARGS)

# The linters first (CI runs only this target), then the tests: two pytest workers, each
# module's tests in one of them (their module fixtures are built once; the suite run's tests
# share a module), since a serial run keeps one core busy. tests/conftest.py makes the units
# (a module, the readers of tests.tf_capture's run, or one test) and hands them out longest first.
TEST_WORKERS ?= 2
test: $(STAMP) browser lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=30 $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy profiler

format: $(STAMP)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache tests-output
	find . -name __pycache__ -not -path './.venv/*' -prune -exec rm -rf {} +

# Deletes every run; only ever by this name.
clean-runs:
	rm -rf runs

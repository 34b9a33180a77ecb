# `make demo` and `make test` each set up the virtual environment they need.
PYTHON ?= python3
VENV ?= .venv
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dragoman demo

# Lint includes the type checker (configured in pyproject.toml), so `make test` and CI run it.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

typecheck: lint

test: lint
	$(VENV)/bin/pytest

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/translate.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info

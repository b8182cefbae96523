# t9k-jobs. `make demo` runs the product end to end; `make test` runs every test tier.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

include hack/cluster/cluster.mk

.PHONY: venv test unit lint typecheck layers layout check crds demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check core plugins tests hack
	$(BIN)/ruff format --check core plugins tests hack

# mypy and import-linter read one folder per package; assemble the installed layout (core/ is
# t9kjobs, plugins/ is t9kjobs.plugins) in build/layout and check it there.
LAYOUT := build/layout
layout:
	rm -rf $(LAYOUT) && mkdir -p $(LAYOUT)
	cp -r core $(LAYOUT)/t9kjobs && cp -r plugins $(LAYOUT)/t9kjobs/plugins

typecheck: $(STAMP) layout
	cd $(LAYOUT) && ../../$(BIN)/mypy --config-file ../../pyproject.toml -p t9kjobs

layers: $(STAMP) layout
	cd $(LAYOUT) && PYTHONPATH=. ../../$(BIN)/lint-imports --config ../../.importlinter --no-cache

unit: $(STAMP)
	$(BIN)/pytest tests/unit

check: lint typecheck layers

# Regenerate crds/ from the models (a unit test fails while crds/ is stale).
crds: $(STAMP)
	$(BIN)/t9kjobs crds --output-dir crds

# Every tier: static checks, unit and conformance tests, end-to-end tests on the local cluster.
test: $(STAMP) check
	$(BIN)/pytest tests

# A local control plane, the operator, one example job of every kind run to completion.
demo: $(STAMP)
	$(BIN)/python hack/demo.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

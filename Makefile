# Two commands do all the set-up on a fresh machine: `make dev` runs the service, `make test` the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8080

.PHONY: dev test lint typecheck openapi bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

dev: $(STAMP)
	$(BIN)/uhp-memories serve --port $(PORT) $(if $(KEYS_FILE),--keys-file $(KEYS_FILE),)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

openapi: $(STAMP)
	$(BIN)/python -m uhp_memories.api.openapi > docs/openapi.json

clean:
	rm -rf $(VENV) cdk.out .hypothesis

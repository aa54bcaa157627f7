# The README's two commands: `make demo` (set up + run the demo) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test lint typecheck schemas check

setup:
	@bash scripts/setup.sh

demo: setup
	$(VENV)/bin/osc-gitops demo

test: setup
	$(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: setup
	$(VENV)/bin/mypy reconciler/

schemas: setup
	$(VENV)/bin/osc-gitops schema --write

check: lint typecheck test

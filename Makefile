# Idempotency Lab. BACKEND=embedded|localstack|aws (default: LocalStack when a Docker
# engine answers, else embedded). Every target installs what it needs first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TOOLS := .lab/tools
# Decided once, here, and exported: every process make starts (the backend, Terraform,
# JupyterLab and each notebook's kernel) then talks to the same backend, however slowly a
# Docker engine answers later (idemlab/settings.py decides the same way where make is not used).
# A clone that joined a stack (`make join`) keeps the handout's backend in .lab/backend
# (idemlab/settings.py BACKEND_FILE, which reads the same file).
ifeq ($(strip $(BACKEND)),)
BACKEND := $(strip $(shell cat .lab/backend 2>/dev/null))
endif
ifeq ($(strip $(BACKEND)),)
BACKEND := $(shell $(if $(shell command -v timeout),timeout 5) docker info >/dev/null 2>&1 && echo localstack || echo embedded)
endif
export BACKEND
# JupyterLab refuses to start as root (containers, cloud notebooks) unless told to.
JUPYTER_ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: help install tools up down status build deploy plan destroy region join workshop workshop-check workshop-destroy lab lint test test-embedded test-localstack test-localstack-stage conformance soak bench redrive clean

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

install: $(VENV)/.installed ## create .venv with the pinned dependencies

# The venvs are filled by uv (pinned, installed by pip into a venv of its own): the same
# packages as pip would install, resolved and unpacked in a few seconds instead of a minute
# of pip's CPU. .venv is seeded with pip, which `make up BACKEND=localstack` may use for the LocalStack CLI.
UV_VERSION := 0.13.8
UV := .lab/uv/bin/uv
# Packages are copied from uv's cache (it may sit on another filesystem than the clone).
export UV_LINK_MODE := copy
export UV_PYTHON_DOWNLOADS := never

$(UV):
	$(PYTHON) -m venv .lab/uv
	.lab/uv/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

$(VENV)/.installed: pyproject.toml | $(UV)
	$(UV) venv --quiet --seed --allow-existing --python $(PYTHON) $(VENV)
	$(UV) pip install --quiet --python $(PY) -e '.[test]'
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

# JupyterLab only for `make lab`: the tests run notebooks through nbclient without it.
$(VENV)/.installed-lab: $(VENV)/.installed
	$(UV) pip install --quiet --python $(PY) -e '.[lab,test]'
	touch $@

tools: $(TOOLS)/.installed ## install checkov in a venv of its own (its pins clash with ours)

$(TOOLS)/.installed: | $(UV)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(TOOLS)
	$(UV) pip install --quiet --python $(TOOLS)/bin/python checkov==3.3.30
	touch $@

up: install ## start the backend (reuses a running one)
	$(PY) -m idemlab up

down: install ## stop the backend
	$(PY) -m idemlab down

status: install ## is the backend up?
	$(PY) -m idemlab status

build: install ## build the Lambda zips into build/
	$(PY) -m idemlab.build

# PARTICIPANT=<name>: whose stack (the prefix of every name, its own Terraform state). Unset:
# $PARTICIPANT from the environment, else the one `make deploy` deployed last, else lab.
PARTICIPANT_FLAG = $(if $(strip $(PARTICIPANT)),--prefix $(strip $(PARTICIPANT)))
# LESSONS=vehicles,checkout: provision only those lessons (the module's `lessons` input, by slug);
# remembered for the stack's later plan and destroy; LESSONS=all goes back to every lesson.
LESSONS_FLAG = $(if $(strip $(LESSONS)),--lessons "$(strip $(LESSONS))")

deploy: up ## build, then apply the Terraform stack to the backend (PARTICIPANT=<name>: that participant's stack; LESSONS=vehicles,checkout: only those)
	$(PY) -m idemlab deploy $(PARTICIPANT_FLAG) $(LESSONS_FLAG)

plan: install ## show what a deploy would change (nothing, after a deploy)
	$(PY) -m idemlab plan $(PARTICIPANT_FLAG) $(LESSONS_FLAG)

destroy: install ## remove the stack from the backend
	$(PY) -m idemlab destroy $(PARTICIPANT_FLAG)

region: install ## REGION=<name>: set this clone's region once; every target and notebook reads it (no REGION: show it)
	$(PY) -m idemlab region $(REGION)

join: install ## HANDOUT=<file>: use the stack of a participant's handout from `make workshop` (no Terraform state needed)
	env -u BACKEND $(PY) -m idemlab join "$(HANDOUT)"

# An instructor's workshop (idemlab/workshop.py): PARTICIPANTS=30 (p01..p30) or a list
# (PARTICIPANTS="alice bob"); PARALLEL stacks deployed at a time.
PARALLEL ?= 2

workshop-check: up ## PARTICIPANTS=<n or names>: quotas against current usage, and the cost; creates nothing
	$(PY) -m idemlab.workshop check "$(PARTICIPANTS)" $(LESSONS_FLAG)

workshop: up ## PARTICIPANTS=<n or names>: the check, then (once you confirm, or YES=1) one stack per participant and their handouts
	$(PY) -m idemlab.workshop up "$(PARTICIPANTS)" --parallel $(PARALLEL) $(if $(strip $(YES)),--yes) $(LESSONS_FLAG)

workshop-destroy: install ## destroy every workshop stack, then list each service: what is left (must be 0)
	$(PY) -m idemlab.workshop down "$(PARTICIPANTS)" --parallel $(PARALLEL)

lab: $(VENV)/.installed-lab deploy ## backend up, stack deployed, JupyterLab on the notebooks
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --no-browser $(JUPYTER_ROOT_FLAG)

# Worker processes for `make test`, each with its own embedded backend and stack. Most
# of the suite waits (function timeouts, queue visibility, scheduler delays) rather than
# computes, so more workers than the 2 cores CI has still shorten it. Five, since each
# worker's stack deploys in the background while its first, stack-free file runs.
TEST_WORKERS ?= 5

# The suite starts hundreds of Python processes (workers, backends, Lambda environments,
# notebook kernels, racing clients). Where the environment says PYTHONDONTWRITEBYTECODE
# (some images do), each would compile the lab's modules again and pytest would rewrite
# the asserts of every test module and plugin package again: let them keep what they compiled.
# One style, checked before any test runs (configuration: [tool.ruff] in pyproject.toml).
LINT_PATHS := idemlab functions tests

lint: install ## ruff format --check and ruff check over idemlab/, functions/, tests/
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/ruff check $(LINT_PATHS)

test: install tools lint ## the whole suite: on embedded backends it starts itself, and beside it the lab on LocalStack
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-embedded test-localstack-stage

test-embedded: install tools ## the suite on embedded backends it starts and stops itself (all but the `long` tests)
	@start=$$SECONDS; env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -m "not long" -n $(TEST_WORKERS) --durations=15; code=$$?; \
	echo "stage embedded: $$((SECONDS - start)) s, exit code $$code"; exit $$code

test-long: install tools ## the tests marked `long` (every module example applied and destroyed, Ctrl-C during a workshop, the lesson rename's migration): about 40 minutes on two cores
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -m long -n 2 --durations=15

# The LocalStack stage has a port of its own, so a learner's backend on 4566 may keep running.
LOCALSTACK_STAGE_PORT ?= 4576
# The LocalStack stage runs every test marked `any_backend` (pyproject.toml says which): the
# conformance suite, tests/localstack/, and the stack tests that hold on any backend, on the
# suite's stack (tests/conftest.py). Its workers share the one LocalStack, each with a stack
# of its own (a participant prefix); most of their time is spent waiting (alarm periods,
# visibility timeouts, Lambda timeouts), so two overlap those waits on two cores.
LOCALSTACK_WORKERS ?= 2
test-localstack: install ## the lab on LocalStack (Docker, else native): conformance, deploy, second plan, every notebook that uses the stack, the stack tests that hold anywhere
	@export BACKEND=localstack LAB_PORT=$(LOCALSTACK_STAGE_PORT); start=$$SECONDS; \
	export NATIVE_CACHE_AT_START=$$($(PY) -m idemlab.localstack_native.install --cached); \
	if $(PY) -m idemlab up; then \
	  env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -m any_backend -n $(LOCALSTACK_WORKERS) --durations=15; code=$$?; \
	else code=1; fi; \
	$(PY) -m idemlab down; \
	echo "stage localstack: $$((SECONDS - start)) s, exit code $$code"; exit $$code

# Part of `make test` wherever LocalStack can run: with a Docker engine, or natively (Linux
# with Python 3.12+, a JDK 17+, npm and a C compiler). Elsewhere it says so and runs nothing;
# in CI (CI=true) that is a failure.
test-localstack-stage: install
	@if [ "$$(timeout 5 docker info >/dev/null 2>&1 && echo up)" = up ] || $(PY) -m idemlab.localstack_native.install --check; then \
	  $(MAKE) --no-print-directory test-localstack; \
	elif [ -n "$$CI" ]; then echo "stage localstack: cannot run on this CI machine (above)"; exit 1; \
	else echo "stage localstack: NOT RUN on this machine (above); the embedded suite ran alone"; fi

conformance: install ## the AWS behaviours the lessons rely on, checked on BACKEND (embedded unless set)
	@if [ "$(BACKEND)" = localstack ]; then $(PY) -m idemlab up; fi
	$(PY) -m pytest tests/conformance

soak: install ## every race test (marked `race`) at its acceptance count (300 checkout rounds; many minutes)
	RACE_SOAK=1 $(PY) -m pytest -m race tests

bench: install ## plain moto, the embedded backend and native LocalStack side by side (minutes); BENCH=--strategies adds the cost of idempotency, BENCH=--full the long run; BACKEND=aws: on AWS (cents)
	$(PY) -m idemlab.bench $(BENCH)

redrive: install ## re-deliver every dead-letter queue of the stack to its target (safe to repeat)
	$(PY) -m idemlab.background.redrive

clean: ## stop the backend and remove everything the lab generated
	-$(PY) -m idemlab down
	rm -rf .lab build

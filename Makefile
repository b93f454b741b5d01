# The two commands of README.md: `make run` and `make test`. Everything else is set up on the way.
VENV := .venv
PYTHON := $(VENV)/bin/python

.PHONY: run test test-all checks infra unit-lint-docs lint setup setup-cloud up down clean

# A short breakpoint test of iteration 0 on the twin, after the runner's warm-up. On the study profile
# (the default) the platform's latency sets the knee where the study's was (~60 users) and the ramp goes
# on into the first 429s; PROFILE=none adds no latency, and the knee is where this machine's cores run
# out (several hundred users on 2 cores), so that ramp is steeper; a profile file gets the study's ramp. The
# functions are autoscaled as on Cloud Run (docs/local-twin.md, Autoscaling).
PROFILE ?= study
RUN_SHAPE_study := --duration 100s --shape-set spawn_rate=3
RUN_SHAPE_none := --duration 150s --shape-set spawn_rate=8
run: setup
	scripts/run-iteration iterations/iteration-0 --test breakpoint --profile $(PROFILE) --scaling auto $(or $(RUN_SHAPE_$(PROFILE)),$(RUN_SHAPE_study))

# What CI runs on every stop: everything but the tests marked slow (the long load runs and waits, which
# `make test-all` adds; tests/README.md says which run where). The checks that time nothing run two at a
# time once the stand-in provider the unit tests of infra/ read is built: Terraform's checks beside the
# unit tests, ruff, mypy and the docs' figures; the integration tests, which measure time and load the
# machine, then run alone.
test: checks
	$(PYTHON) -m pytest tests/integration -m "not slow" --durations=30

test-all: checks
	$(PYTHON) -m pytest tests/integration

checks: setup
	scripts/check-infra --stand-in
	$(MAKE) --no-print-directory -j2 --output-sync=target infra unit-lint-docs

infra: setup
	scripts/check-infra

unit-lint-docs: lint
	$(PYTHON) -m pytest tests/unit
	scripts/kit docs --check

# ruff and mypy over the kit, the functions and the Locust suite (pyproject.toml configures both).
lint: setup
	$(VENV)/bin/ruff check scripts/visitkit functions locust
	$(VENV)/bin/mypy scripts/visitkit/
	$(VENV)/bin/mypy functions/
	$(VENV)/bin/mypy locust/

setup: $(VENV)/.installed
	scripts/setup-system

# What a Google Cloud run needs and nothing else: the kit, Locust and Google's client libraries into
# .venv, no emulator, no system package (terraform and gcloud are yours to install: README.md).
setup-cloud: $(VENV)/.installed-cloud

# The pinned versions first, then the kit itself (editable: its code stays in scripts/visitkit). The
# functions' set comes first, exactly as Cloud Functions installs it (every package pinned and hashed);
# the rest is then held to those versions: a requirement of the kit or of a test tool that needs another
# version fails the install instead of changing what the local stack runs. Locust and its packages are
# held to the Locust fleet's lock (infra/loadgen/requirements.txt) too, so the load-generator benchmark
# runs what the fleet's VMs install. Hashes in a constraints file would turn on hash checking for the
# unhashed rest, so the constraints are the bare `name==version` pins.
PINS_AS_CONSTRAINTS = sed -n 's/^\([A-Za-z0-9][^ ]*==[^ ;]*\).*/\1/p'
$(VENV)/.installed: requirements-dev.txt requirements-cloud.txt functions/requirements.txt infra/loadgen/requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet --require-hashes -r functions/requirements.txt
	$(PINS_AS_CONSTRAINTS) functions/requirements.txt infra/loadgen/requirements.txt >$(VENV)/constraints.txt
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt -c $(VENV)/constraints.txt
	$(VENV)/bin/pip install --quiet --no-deps --editable .
	touch $@ $(VENV)/.installed-cloud

$(VENV)/.installed-cloud: requirements-cloud.txt infra/loadgen/requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(PINS_AS_CONSTRAINTS) infra/loadgen/requirements.txt >$(VENV)/constraints-cloud.txt
	$(VENV)/bin/pip install --quiet -r requirements-cloud.txt -c $(VENV)/constraints-cloud.txt
	$(VENV)/bin/pip install --quiet --no-deps --editable .
	touch $@

# The local stack alone, left running: open $(BASE_URL)/app?view=home in a browser.
up: setup
	scripts/local up

down:
	@if [ -x $(VENV)/bin/visitkit ]; then scripts/local down; fi

clean: down
	rm -rf $(VENV) build .local
